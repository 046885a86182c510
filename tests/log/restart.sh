#!/bin/bash
# Restart of one member from its log (docs/LOGS.md "Restart of one member"),
# with real processes: three members stream into a logged subgroup
# (spindle-bench --local 3 --log-dir, member 0 sending); member 2 is killed
# with -9 mid-stream; it is started again with its old log directory (the
# same name, a larger incarnation) and joins. Checked, each run:
#   - it was sent exactly the records its log lacked: as many records as
#     the leader's log holds after where the killed member's log ended (its
#     torn tail cut) and before the view it joined, and at most their bytes
#     plus the stream's 16-byte header (log_catchup_records/_bytes of its
#     JSON report, against spindle-log dump of the two logs);
#   - it rebuilt its state from its log and the catch-up (the benchmark's
#     replay upcall checks every sender's messages exactly once, in order)
#     and delivered the rest of the stream;
#   - the three logs agree (spindle-log compare), and the restarted member's
#     holds the whole stream.
# A run where the stream ended before the member got back in is not counted
# and is repeated (at most RUNS more times).
#
# Usage: restart.sh SPINDLE_BENCH SPINDLE_LOG [RUNS]
set -u
BENCH=$1
LOGTOOL=$2
RUNS=${3:-1}
MESSAGES=12000
RATE=2000 # one sender: a stream of about 6 s
TIMEOUT=60

WORK=$(mktemp -d /tmp/spindle-restart-XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for f in "$WORK"/run/tr/member-*.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. "$(dirname "$0")/bench_lib.sh"

# The records of a dump (spindle-log dump) as "type view seq bytes" lines:
# a message's view and seq, a view record's id and "-"; bytes as on disk
# (docs/LOGS.md "Encoding": a 24-byte header, then 36 + payload bytes, or
# 16 + 4 per member + 8 per subgroup).
records_of() {
    "$LOGTOOL" dump "$1" | awk '
        $2 == "message" { print "m", $6, $8, 24 + 36 + $14 }
        $2 == "view" {
            m = split($5, members, ","); s = ($7 == "-") ? 0 : split($7, trims, ",")
            print "v", $3, "-", 24 + 16 + 4 * m + 8 * s
        }'
}

run_once() {
    rm -rf "$WORK/run"
    mkdir -p "$WORK/run/tr"
    local run=$WORK/run port=$((10000 + RANDOM % (RANDOM_PORT_TOP - 10000 - 20)))
    local common=(--tolerate-failures --trace "$run/tr" --senders one --messages "$MESSAGES"
        --rate "$RATE" --msg-size 64 --timeout "$TIMEOUT")
    "$BENCH" --local 3 --control-port "$port" --log-dir "$run/logs" --name m "${common[@]}" \
        >"$run/members.out" 2>&1 &
    local launcher=$!
    PIDS=("$launcher")
    if ! wait_lines "$run/tr/member-2.trace" 2000 "$launcher"; then
        grep -q "already in use" "$run/members.out" && return 2
        fail "the members ended before member 2 delivered 2000 messages"
    fi
    kill -9 "$(cat "$run/tr/member-2.pid")"
    # What the killed member's log holds, its torn tail cut.
    cp -a "$run/logs/member-2" "$run/before"
    "$LOGTOOL" check "$run/before" >"$run/check-before.out" 2>&1 ||
        fail "spindle-log check of the killed member's log: $(cat "$run/check-before.out")"
    "$BENCH" --join "127.0.0.1:$port" --listen "127.0.0.1:$((port + 10))" --name m-2 \
        --incarnation 2 --log-dir "$run/logs/member-2" "${common[@]}" >"$run/joiner.out" 2>&1 &
    local joiner=$!
    PIDS+=("$joiner")
    wait "$joiner"
    local joiner_rc=$?
    wait "$launcher"
    local members_rc=$?
    PIDS=()
    if [ "$joiner_rc" -ne 0 ] && ! grep -q "joined as member" "$run/joiner.out"; then
        if grep -q "unreachable\|could not join" "$run/joiner.out"; then
            echo "note: the stream ended before member 2 got back in; not counted"
            return 2
        fi
        fail "the restarted member exited $joiner_rc without getting in"
    fi
    [ "$joiner_rc" -eq 0 ] || fail "the restarted member exited $joiner_rc"
    [ "$members_rc" -eq 0 ] || fail "the members' launcher exited $members_rc"
    local view
    view=$(sed -n 's/^joined as member 2 in view \([0-9]*\),.*/\1/p' "$run/joiner.out")
    [ -n "$view" ] || fail "the restarted member did not say the view it joined"

    # Where the killed member's log ended: its last message's point and
    # its last view record.
    records_of "$run/before" >"$run/before.records"
    local end_view end_seq last_view
    read -r end_view end_seq < <(awk '$1 == "m" { v = $2; s = $3 + 1 } END { print v, s }' \
        "$run/before.records")
    last_view=$(awk '$1 == "v" { v = $2 } END { print v }' "$run/before.records")
    # What the leader's log holds after that and before the view joined.
    records_of "$run/logs/member-0" >"$run/leader.records"
    local missing missing_bytes
    read -r missing missing_bytes < <(awk -v ev="$end_view" -v es="$end_seq" -v lv="$last_view" \
        -v j="$view" '
        $1 == "v" && $2 >= j { exit }
        $1 == "v" && $2 > lv { n++; b += $4 }
        $1 == "m" && $2 < j && ($2 > ev || ($2 == ev && $3 >= es)) { n++; b += $4 }
        END { print n + 0, b + 0 }' "$run/leader.records")
    local records bytes
    records=$(grep -o '"log_catchup_records":[0-9]*' "$run/joiner.out" | cut -d: -f2)
    bytes=$(grep -o '"log_catchup_bytes":[0-9]*' "$run/joiner.out" | cut -d: -f2)
    [ -n "$records" ] && [ -n "$bytes" ] || fail "the restarted member's report lacks its catch-up"
    [ "$missing" -gt 0 ] || fail "the killed member's log lacked nothing (killed too late?)"
    [ "$records" -eq "$missing" ] ||
        fail "it was sent $records records; its log lacked $missing (ended at view $end_view" \
            "seq $end_seq, last view $last_view; joined view $view)"
    [ "$bytes" -le $((missing_bytes + 16)) ] ||
        fail "the catch-up took $bytes bytes, more than the $missing_bytes missing + 16"

    "$LOGTOOL" compare "$run/logs/member-0" "$run/logs/member-1" "$run/logs/member-2" \
        >"$run/compare.out" 2>&1 || fail "the logs differ: $(cat "$run/compare.out")"
    grep -q "member-0 and .*member-2 agree: $MESSAGES messages" "$run/compare.out" ||
        fail "the restarted member's log does not hold the whole stream: $(cat "$run/compare.out")"
    echo "ok: member 2 killed after $(wc -l <"$run/before.records") records, back in view" \
        "$view: caught up $records records, $bytes bytes (missing: $missing_bytes);" \
        "three logs agree on $MESSAGES messages"
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
echo "restart: $done_runs runs passed"
