#!/bin/bash
# Total restart from the logs (docs/LOGS.md "Total restart"), with the
# benchmark: three members stream into a logged subgroup, all three
# sending (spindle-bench --local 3 --log-dir); every member is killed with
# -9 mid-stream; the same command is run again. Checked, each run:
#   - the restarted members rebuild their state from their logs (the
#     benchmark's replay upcall checks every sender's messages exactly once
#     and in order), take back their member ids, go on with their streams
#     where the recovered log ends and finish them (exit 0);
#   - the group restarted in a view after the killed members' latest;
#   - the three logs agree (spindle-log compare) on the whole stream of
#     every sender (3 x MESSAGES messages);
#   - the messages before the restart are those of one killed member's
#     whole log (nothing that was never delivered appears).
#
# Usage: total_restart.sh SPINDLE_BENCH SPINDLE_LOG [RUNS]
set -u
BENCH=$1
LOGTOOL=$2
RUNS=${3:-1}
MESSAGES=6000
RATE=1500 # per sender: a stream of about 4 s
TIMEOUT=60

WORK=$(mktemp -d /tmp/spindle-total-XXXXXX)
PIDS=()
cleanup() {
    local p f
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for f in "$WORK"/run/tr*/member-*.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/bench_lib.sh"

# A log's messages as "view seq sender index" lines, and its views.
messages_of() {
    "$LOGTOOL" dump "$1" | awk '$2 == "message" { print $6, $8, $10, $12 }'
}
last_view_of() {
    "$LOGTOOL" dump "$1" | awk '$2 == "view" { v = $3 } END { print v + 0 }'
}

run_once() {
    rm -rf "$WORK/run"
    mkdir -p "$WORK/run/tr1" "$WORK/run/tr2"
    local run=$WORK/run port=$((10000 + RANDOM % (RANDOM_PORT_TOP - 10000 - 20)))
    local common=(--local 3 --control-port "$port" --log-dir "$run/logs" --tolerate-failures
        --senders all --messages "$MESSAGES" --rate "$RATE" --msg-size 64 --timeout "$TIMEOUT")
    "$BENCH" "${common[@]}" --trace "$run/tr1" >"$run/first.out" 2>&1 &
    local launcher=$!
    PIDS=("$launcher")
    if ! wait_lines "$run/tr1/member-0.trace" 3000 "$launcher"; then
        grep -q "already in use" "$run/first.out" && return 2
        fail "the members ended before member 0 delivered 3000 messages"
    fi
    local i
    for i in 0 1 2; do kill -9 "$(cat "$run/tr1/member-$i.pid")"; done
    wait "$launcher"
    PIDS=()
    local before=()
    for i in 0 1 2; do
        cp -a "$run/logs/member-$i" "$run/before-$i"
        "$LOGTOOL" check "$run/before-$i" >"$run/check-$i.out" 2>&1 ||
            fail "spindle-log check of killed member $i: $(cat "$run/check-$i.out")"
        messages_of "$run/before-$i" >"$run/before-$i.messages"
        before+=("$(wc -l <"$run/before-$i.messages")")
    done
    # The latest view any killed member's log holds (one may have been
    # removed by the others before they were killed too).
    local killed_view=0 v
    for i in 0 1 2; do
        v=$(last_view_of "$run/before-$i")
        [ "$v" -gt "$killed_view" ] && killed_view=$v
    done

    # The same command again: the members restart from their logs.
    "$BENCH" "${common[@]}" --trace "$run/tr2" >"$run/second.out" 2>&1 &
    launcher=$!
    PIDS=("$launcher")
    wait "$launcher"
    local rc=$?
    PIDS=()
    [ "$rc" -eq 0 ] || fail "the restarted members exited $rc"
    grep -q '"duplicate' "$run/second.out" && fail "a message was delivered twice"

    "$LOGTOOL" compare "$run/logs/member-0" "$run/logs/member-1" "$run/logs/member-2" \
        >"$run/compare.out" 2>&1 || fail "the logs differ: $(cat "$run/compare.out")"
    local total=$((3 * MESSAGES))
    grep -q "member-0 and .*member-2 agree: $total messages" "$run/compare.out" ||
        fail "the logs do not hold the whole streams: $(cat "$run/compare.out")"
    local restarted_view
    restarted_view=$(last_view_of "$run/logs/member-0")
    [ "$restarted_view" -gt "$killed_view" ] ||
        fail "the group went on in view $restarted_view, not after $killed_view"
    # The recovered part is one killed member's whole log.
    messages_of "$run/logs/member-0" | awk -v v="$killed_view" '$1 <= v' >"$run/recovered"
    local same=""
    for i in 0 1 2; do
        cmp -s "$run/recovered" "$run/before-$i.messages" && same=$i
    done
    [ -n "$same" ] || fail "the messages before the restart are no killed member's log" \
        "($(wc -l <"$run/recovered") recovered; the logs held ${before[*]})"
    local times
    times=$(sed -n 's/^member \([0-9]*\) restarted from its log in view \([0-9]*\), \([0-9.]*\) ms.*/\1:\3 ms (view \2)/p' \
        "$run/second.out" | sort | tr '\n' ' ')
    [ "$(echo "$times" | wc -w)" -ge 9 ] || fail "not every member said it restarted: $times"
    echo "ok: killed with ${before[*]} messages logged (view $killed_view); restarted from" \
        "member $same's log; in the group after: $times; three logs agree on $total messages" \
        "(last view $restarted_view)"
    return 0
}

done_runs=0
attempts=0
while [ "$done_runs" -lt "$RUNS" ]; do
    attempts=$((attempts + 1))
    [ "$attempts" -le $((RUNS * 2 + 2)) ] || fail "too many runs were not counted"
    run_once
    case $? in
    0) done_runs=$((done_runs + 1)) ;;
    2) ;;
    *) exit 1 ;;
    esac
done
echo "total restart: $done_runs runs passed"
