#!/bin/bash
# Soak: JOINS processes join one running group and leave it again, one
# after the other, while three long-lived members stream; every joiner must
# get in, leave and exit 0, check_traces must accept the whole run (each
# joiner delivered exactly the messages of its views, the members that went
# on agree in every view), and the long-lived members must not leak:
#   - their open file descriptors (ls /proc/PID/fd) and threads
#     (/proc/PID/status Threads) after the last join equal, exactly, their
#     values after the first EVERY joins (a leak of a single descriptor or
#     thread per join fails);
#   - their resident memory (VmRSS) after the last join exceeds that after
#     the first EVERY joins by less than RSS_SLACK_KB (see below).
# The members run spindle-bench --local 3 --control-port P --tolerate-failures
# paced with --rate; the stream lasts until the joins are done: then the
# script ends it through the --stop-file every process was given (each
# sender reports what it has sent, and the stream ends just past the highest
# count), so a loaded machine that makes the joins slow makes the stream
# longer, not the run fail. --messages (about JOIN_BUDGET_MS per join) only bounds a run whose
# joins hang. Each joiner runs spindle-bench --join with the same workload
# flags and --leave-after LEAVE_AFTER (it leaves after that many
# deliveries). The next joiner starts once the previous one has exited, its
# .end says "left", and every member has delivered in a view after the one
# it left (the members took it out; the samples are taken at that point, so
# every sample sees the group in the same state: three members, no change
# under way). Prints a table of the samples and the join times (median and
# worst "joined as member N in view V, X ms after asking").
#
# With ids that are never reused a group takes at most 61 joiners (ids
# 3..63); once a departed member's id is given to the next joiner, any
# JOINS works. check_traces is told the highest id any joiner was given.
#
# Usage: soak.sh SPINDLE_BENCH CHECK_TRACES [JOINS [EVERY]]
#   JOINS  joiners, one after the other (default 200)
#   EVERY  sample the members after every EVERY joins (default 20)
# Environment: SPINDLE_SOAK_SEED (printed when not given; it draws the port,
#              the message size and the window),
#              SPINDLE_SOAK_KEEP keep the directory of a failed run,
#              SPINDLE_SOAK_BENCH_ARGS extra spindle-bench arguments for
#              every process (for example --transport fabric --provider tcp),
#              SPINDLE_SOAK_JOIN_BUDGET_MS the longest stream, per join, before
#              the run gives up (default 5000).
set -u
BENCH=$1
CHECK=$2
JOINS=${3:-200}
EVERY=${4:-20}
RATE=500        # messages per second per sender: 1 500 deliveries/s at each member
LEAVE_AFTER=300 # a joiner's deliveries before it leaves: about 0.2 s of stream
# A join cycle (start, join, 300 deliveries, leave, the members' view change)
# takes about 0.35 s on an idle 2-core machine and about 1.9 s on a loaded
# one. The stream ends when the joins are done (the stop file), so this cap
# is not paid: it only ends a run whose joins hang.
JOIN_BUDGET_MS=${SPINDLE_SOAK_JOIN_BUDGET_MS:-5000}
LEAD_S=5 # stream before the first join, in the cap
STOP_MARGIN=250 # messages per sender after the joins: about 0.5 s of stream
TIMEOUT=60   # seconds for any one wait
# Resident memory may move by allocator noise (malloc arenas, trace stdio
# buffers, pages of the shared rings touched for the first time) without a
# leak: 2 MiB is several times the noise seen between samples on an idle
# group, and 200 joins leaking even 10 kB each (2 MB) are still caught.
# Under AddressSanitizer freed blocks stay resident in its quarantine (256
# MiB by default), so the CTest run of a sanitizer build sets
# SPINDLE_SOAK_RSS_SLACK_KB to that: there, fds and threads are the check.
RSS_SLACK_KB=${SPINDLE_SOAK_RSS_SLACK_KB:-2048}

case $JOINS in '' | *[!0-9]*) echo "soak: JOINS '$JOINS' must be a number" >&2 && exit 2 ;; esac
case $EVERY in '' | *[!0-9]* | 0) echo "soak: EVERY '$EVERY' must be a number > 0" >&2 && exit 2 ;; esac
[ "$JOINS" -ge "$EVERY" ] || {
    echo "soak: JOINS $JOINS must be at least EVERY $EVERY (the baseline sample)" >&2
    exit 2
}

# shellcheck source-path=SCRIPTDIR source=seed.sh
. "$(dirname "$0")/seed.sh"
# shellcheck source-path=SCRIPTDIR source=stop_stream.sh
. "$(dirname "$0")/stop_stream.sh"
seed_random soak SPINDLE_SOAK_SEED

WORK=$(mktemp -d /tmp/spindle-soak-XXXXXX)
RUN_DIR="$WORK/run"
STOP_FILE="$WORK/stop"
mkdir -p "$RUN_DIR"
LAUNCHER=""
JOINER=""

# Kills what is still running, by pid only: the joiner, the members the
# launcher reported, the launcher.
stop_run() {
    local f
    [ -z "$JOINER" ] || kill -9 "$JOINER" 2>/dev/null
    for f in "$RUN_DIR"/member-0.pid "$RUN_DIR"/member-1.pid "$RUN_DIR"/member-2.pid; do
        [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    if [ -n "$LAUNCHER" ]; then
        kill -9 "$LAUNCHER" 2>/dev/null
        wait "$LAUNCHER" 2>/dev/null
    fi
    [ -z "$JOINER" ] || wait "$JOINER" 2>/dev/null
    LAUNCHER="" JOINER=""
}
cleanup() {
    stop_run
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "FAIL: $*"
    echo "soak: seed $SEED (rerun with SPINDLE_SOAK_SEED=$SEED)"
    local f
    for f in "$RUN_DIR/members.out" "$RUN_DIR/joiner-$JOIN_NUMBER.out"; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f") (last 20 lines) ---"
        tail -n 20 "$f"
    done
    [ ! -s "$WORK/samples" ] || print_samples
    if [ -n "${SPINDLE_SOAK_KEEP:-}" ]; then
        stop_run
        kept=$(mktemp -d /tmp/spindle-soak-kept-XXXXXX)
        cp -r "$RUN_DIR" "$kept/"
        echo "kept the run in $kept"
    fi
    exit 1
}

# The stream is over (the launcher exited): no later join can be counted.
stream_ended() {
    ! kill -0 "$LAUNCHER" 2>/dev/null
}

# Waits (bounded) until FILE has at least N lines.
wait_lines() {
    local file=$1 want=$2 deadline=$((SECONDS + TIMEOUT)) have
    while :; do
        have=0
        [ -f "$file" ] && have=$(wc -l <"$file")
        [ "$have" -ge "$want" ] && return 0
        stream_ended && fail "the members ended before $file reached $want lines"
        [ "$SECONDS" -lt "$deadline" ] || fail "$file did not reach $want lines in ${TIMEOUT}s"
        sleep 0.02
    done
}

# Waits (bounded) until every long-lived member has delivered in view
# WANT or a later one (the view id is the first field of a trace line).
wait_view() {
    local want=$1 deadline=$((SECONDS + TIMEOUT)) m view
    for m in 0 1 2; do
        while :; do
            view=$(tail -n 1 "$RUN_DIR/member-$m.trace" 2>/dev/null | cut -d' ' -f1)
            [ -n "$view" ] && [ "$view" -ge "$want" ] && break
            stream_ended && fail "join $JOIN_NUMBER: the stream ended before member $m" \
                "delivered in view $want; raise SPINDLE_SOAK_JOIN_BUDGET_MS"
            [ "$SECONDS" -lt "$deadline" ] ||
                fail "join $JOIN_NUMBER: member $m did not deliver in view $want in ${TIMEOUT}s" \
                    "(last line in view ${view:-none})"
            sleep 0.02
        done
    done
}

# Waits (bounded) for the joiner; sets RC.
wait_joiner() {
    local deadline=$((SECONDS + TIMEOUT))
    while kill -0 "$JOINER" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || fail "join $JOIN_NUMBER: the joiner is still running" \
            "after ${TIMEOUT}s"
        sleep 0.02
    done
    wait "$JOINER"
    RC=$?
    JOINER=""
}

# sample JOINS: appends one line per long-lived member to the samples:
# "joins member fds threads VmRSS RssAnon RssFile RssShmem mappings" (kB;
# the last four say where resident memory is, should it grow).
sample() {
    local m pid fds status maps
    for m in 0 1 2; do
        pid=${MEMBER_PIDS[m]}
        [ -d "/proc/$pid" ] || fail "member $m (pid $pid) is gone after $1 joins"
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        status=$(awk '$1 == "Threads:" { t = $2 } $1 == "VmRSS:" { r = $2 }
                      $1 == "RssAnon:" { a = $2 } $1 == "RssFile:" { f = $2 }
                      $1 == "RssShmem:" { s = $2 }
                      END { print t + 0, r + 0, a + 0, f + 0, s + 0 }' "/proc/$pid/status")
        maps=$(wc -l <"/proc/$pid/maps")
        echo "$1 $m $fds $status $maps" >>"$WORK/samples"
    done
}

print_samples() {
    echo "soak: the long-lived members after each sample's joins (memory in kB):"
    printf '%6s %6s %5s %7s %8s %8s %8s %8s %8s\n' joins member fds threads VmRSS RssAnon \
        RssFile RssShmem mappings
    awk '{ printf "%6d %6d %5d %7d %8d %8d %8d %8d %8d\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' \
        "$WORK/samples"
}

# A base port below the kernel's ephemeral range (join.sh explains why).
# Drawn bases stay below 20480: from there up to the ephemeral range, ports
# come in blocks that tests/test_ports.sh and its twins reserve for others.
RANDOM_PORT_TOP=20480
PORT=$((10000 + RANDOM % (RANDOM_PORT_TOP - 10000 - 40)))
sizes=(8 64 1000)
windows=(16 64 100)
SIZE=${sizes[RANDOM % 3]}
WINDOW=${windows[RANDOM % 3]}
STREAM_S=$((LEAD_S + (JOINS * JOIN_BUDGET_MS + 999) / 1000))
MESSAGES=$((RATE * STREAM_S))
common=(--tolerate-failures --trace "$RUN_DIR" --messages "$MESSAGES" --rate "$RATE"
    --msg-size "$SIZE" --window "$WINDOW" --stop-file "$STOP_FILE")
echo "soak: $JOINS joins, one after the other, into 3 members on ports $PORT..$((PORT + 2))" \
    "streaming $RATE messages/s each until the joins are done (at most $MESSAGES), size $SIZE," \
    "window $WINDOW; each joiner leaves after $LEAVE_AFTER deliveries; samples every $EVERY joins"

# The members' --timeout covers the whole stream.
# shellcheck disable=SC2086
"$BENCH" ${SPINDLE_SOAK_BENCH_ARGS:-} --local 3 --control-port "$PORT" "${common[@]}" \
    --timeout $((STREAM_S + TIMEOUT)) >"$RUN_DIR/members.out" 2>&1 &
LAUNCHER=$!
JOIN_NUMBER=0
MEMBER_PIDS=()
for m in 0 1 2; do
    wait_lines "$RUN_DIR/member-$m.pid" 1
    MEMBER_PIDS[m]=$(cat "$RUN_DIR/member-$m.pid")
done
# The stream is running: every member delivered something.
for m in 0 1 2; do wait_lines "$RUN_DIR/member-$m.trace" 1; done
if grep -q "already in use" "$RUN_DIR/members.out"; then
    fail "port $PORT.. is taken; rerun (another seed draws another port)"
fi
sample 0

TOP=2 # the highest member id
: >"$WORK/join-ms"
started=$SECONDS
for ((JOIN_NUMBER = 1; JOIN_NUMBER <= JOINS; JOIN_NUMBER++)); do
    stream_ended && fail "the stream ended after $((JOIN_NUMBER - 1)) of $JOINS joins;" \
        "raise SPINDLE_SOAK_JOIN_BUDGET_MS"
    out="$RUN_DIR/joiner-$JOIN_NUMBER.out"
    # Ten listen ports in turn: a port is taken again only after nine
    # other joins.
    # shellcheck disable=SC2086
    "$BENCH" ${SPINDLE_SOAK_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
        --listen "127.0.0.1:$((PORT + 10 + JOIN_NUMBER % 10))" "${common[@]}" --timeout "$TIMEOUT" \
        --leave-after "$LEAVE_AFTER" >"$out" 2>&1 &
    JOINER=$!
    wait_joiner
    [ "$RC" -eq 0 ] || fail "join $JOIN_NUMBER: the joiner exited $RC"
    line=$(grep -m 1 '^joined as member' "$out")
    id=$(echo "$line" | sed -n 's/^joined as member \([0-9]*\) in view \([0-9]*\), \([0-9.]*\) ms after asking$/\1/p')
    view=$(echo "$line" | sed -n 's/^joined as member [0-9]* in view \([0-9]*\), .*/\1/p')
    ms=$(echo "$line" | sed -n 's/.*, \([0-9.]*\) ms after asking$/\1/p')
    if [ -z "$id" ] || [ -z "$view" ] || [ -z "$ms" ]; then
        fail "join $JOIN_NUMBER: the joiner did not say 'joined as member N in view V, X ms after asking'"
    fi
    echo "$ms" >>"$WORK/join-ms"
    [ "$id" -le "$TOP" ] || TOP=$id
    end="$RUN_DIR/member-$id.$view.end"
    [ -f "$end" ] || fail "join $JOIN_NUMBER: member $id of view $view exited 0 without $end"
    # "view <last view> members <ids> joined <view> left"
    last=$(sed -n 's/^view \([0-9]*\) members [0-9,]* joined [0-9]* left$/\1/p' "$end")
    [ -n "$last" ] || fail "join $JOIN_NUMBER: $(basename "$end") does not say it left:" \
        "$(cat "$end") (did the stream end before it delivered $LEAVE_AFTER messages?)"
    # The members took it out: they deliver in a later view.
    wait_view $((last + 1))
    if [ $((JOIN_NUMBER % EVERY)) -eq 0 ] || [ "$JOIN_NUMBER" -eq "$JOINS" ]; then
        sample "$JOIN_NUMBER"
        echo "soak: $JOIN_NUMBER joins in $((SECONDS - started))s (the last: member $id of view" \
            "$view, left after view $last)"
    fi
done
JOIN_NUMBER=$JOINS
echo "soak: $JOINS joins done in $((SECONDS - started))s; the highest member id given was $TOP"
end_stream "$STOP_FILE" "$MESSAGES" 0 1 2

deadline=$((SECONDS + STREAM_S + TIMEOUT + 30))
while ! stream_ended; do
    [ "$SECONDS" -lt "$deadline" ] || fail "the members' launcher is still running"
    sleep 0.1
done
wait "$LAUNCHER"
RC=$?
LAUNCHER=""
[ "$RC" -eq 0 ] || fail "the members' launcher exited $RC"
echo "soak: the stream ended at $STREAM_MESSAGES messages per sender"
VERDICT=$("$CHECK" "$RUN_DIR" --messages "$STREAM_MESSAGES" --members $((TOP + 1)) --initial 3 \
    --msg-size "$SIZE" 2>&1) || fail "$VERDICT"
echo "soak: ${VERDICT#check_traces: }"

print_samples
sort -g "$WORK/join-ms" >"$WORK/join-ms.sorted"
n=$(wc -l <"$WORK/join-ms.sorted")
echo "soak: request to first view: median $(sed -n "$(((n + 1) / 2))p" "$WORK/join-ms.sorted") ms," \
    "worst $(tail -n 1 "$WORK/join-ms.sorted") ms over $n joins"

# The baseline is the first sample after EVERY joins (the first joins may
# set up what later ones reuse); the last sample is after the last join.
verdict=ok
for m in 0 1 2; do
    read -r _ _ base_fds base_threads base_rss _ < <(awk -v every="$EVERY" -v m="$m" \
        '$1 == every && $2 == m' "$WORK/samples")
    read -r _ _ fds threads rss _ < <(awk -v joins="$JOINS" -v m="$m" \
        '$1 == joins && $2 == m' "$WORK/samples")
    if [ "$fds" -ne "$base_fds" ]; then
        echo "FAIL: member $m: $base_fds open fds after $EVERY joins, $fds after $JOINS"
        verdict=fail
    fi
    if [ "$threads" -ne "$base_threads" ]; then
        echo "FAIL: member $m: $base_threads threads after $EVERY joins, $threads after $JOINS"
        verdict=fail
    fi
    grown=$((rss - base_rss))
    echo "soak: member $m: VmRSS $base_rss kB after $EVERY joins, $rss kB after $JOINS:" \
        "$((grown * 1000 / (JOINS - EVERY > 0 ? JOINS - EVERY : 1))) bytes per join"
    if [ "$grown" -ge "$RSS_SLACK_KB" ]; then
        echo "FAIL: member $m: VmRSS grew by $grown kB from $EVERY to $JOINS joins" \
            "($base_rss to $rss kB; allowed: less than $RSS_SLACK_KB kB)"
        verdict=fail
    fi
done
[ "$verdict" = ok ] || fail "the long-lived members leak (see above)"
echo "soak: ok: $JOINS joins and departures; fds and threads of the long-lived members flat" \
    "from $EVERY to $JOINS joins, VmRSS within $RSS_SLACK_KB kB"
