#!/bin/bash
# Randomized kill -9 runs of spindle-bench --tolerate-failures over shared
# memory, each checked by check_traces against the virtual-synchrony
# guarantees:
#   a) one random non-leader member of 4 killed,
#   b) two random members of 5 killed at once (the survivors keep a majority),
#   c) the leader (member 0) of 4 killed,
#   d) two random members of 5 killed one after the other, the second 0 to
#      50 ms after the first (half of the runs: 0 to 10 ms), a second failure
#      inside the first view change,
#   s) one random member of 4 stopped with SIGSTOP (a hung process): found by
#      its silent heartbeat (--failure-timeout-ms 1000) and removed like a
#      killed one; the launcher kills it once the others are done.
# Each run starts the bench with --trace, waits (bounded, polling trace
# sizes) until every member has delivered traffic plus a random extra amount,
# kills the chosen members by the pids the launcher wrote, waits (bounded) for
# the launcher, which must exit 0, then runs check_traces and collects the
# "view change: view V installed N.N ms after failure detected" times the
# members print. Message size and window are drawn at random too.
#
# Usage: faults.sh SPINDLE_BENCH CHECK_TRACES [RUNS_PER_KIND [MESSAGES [KINDS [MODE]]]]
#   KINDS: any of a, b, c, d, s (default abc).
#   MODE: the subgroup's delivery mode, atomic (default) or unordered
#   (spindle-bench --mode, check_traces --mode: per-sender FIFO, no
#   all-or-none for a failed sender), or mixed: drawn per run from the seed;
#   each run's line names its mode.
# Environment: SPINDLE_FAULT_SEED  seed of the run (printed when not given),
#              SPINDLE_FAULT_KEEP  keep the directory of a failed run,
#              SPINDLE_FAULT_BENCH_ARGS  extra spindle-bench arguments (for
#                  example --transport fabric --provider tcp).
set -u
BENCH=$1
CHECK=$2
RUNS=${3:-20}
MESSAGES=${4:-3000}
KINDS=${5:-abc}
MODE=${6:-atomic}
LAUNCH_TIMEOUT=60 # seconds for one run's launcher to finish after the kill
TRAFFIC_TIMEOUT=30
LINE_BYTES=22 # about one trace line, to turn a delivery count into bytes

# shellcheck source-path=SCRIPTDIR source=seed.sh
. "$(dirname "$0")/seed.sh"
seed_random faults SPINDLE_FAULT_SEED

WORK=$(mktemp -d /tmp/spindle-faults-XXXXXX)
LAUNCHER=""
RUN_DIR=""

# Kills whatever of the current run is still alive: the launcher and the
# members it reported, by pid only.
stop_run() {
    if [ -n "$RUN_DIR" ]; then
        for f in "$RUN_DIR"/member-*.pid; do
            [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
        done
    fi
    if [ -n "$LAUNCHER" ]; then
        kill -9 "$LAUNCHER" 2>/dev/null
        wait "$LAUNCHER" 2>/dev/null
        LAUNCHER=""
    fi
}
cleanup() {
    stop_run
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "FAIL: $*"
    echo "faults: seed $SEED (rerun with SPINDLE_FAULT_SEED=$SEED)"
    if [ -n "$RUN_DIR" ] && [ -f "$RUN_DIR/out" ]; then
        echo "--- spindle-bench output (last 30 lines) ---"
        tail -n 30 "$RUN_DIR/out"
    fi
    if [ -n "${SPINDLE_FAULT_KEEP:-}" ] && [ -n "$RUN_DIR" ]; then
        stop_run
        kept=$(mktemp -d /tmp/spindle-faults-kept-XXXXXX)
        cp -r "$RUN_DIR" "$kept/"
        echo "kept the run in $kept"
    fi
    exit 1
}

launcher_alive() {
    kill -0 "$LAUNCHER" 2>/dev/null
}

# Sets MIN_BYTES to the smallest trace size over members 0..n-1 (0 when one
# is missing), with one stat call.
min_trace_bytes() {
    local n=$1 files=() sizes=() size
    for ((m = 0; m < n; m++)); do files+=("$RUN_DIR/member-$m.trace"); done
    mapfile -t sizes < <(stat -c %s "${files[@]}" 2>/dev/null)
    MIN_BYTES=0
    [ "${#sizes[@]}" -eq "$n" ] || return 0
    MIN_BYTES=${sizes[0]}
    for size in "${sizes[@]}"; do
        [ "$size" -ge "$MIN_BYTES" ] || MIN_BYTES=$size
    done
}

# Waits until every member's trace holds at least `want` bytes. Returns 1 if
# the launcher ended first, fails on timeout.
wait_for_traffic() {
    n=$1 want=$2
    deadline=$((SECONDS + TRAFFIC_TIMEOUT))
    while min_trace_bytes "$n" && [ "$MIN_BYTES" -lt "$want" ]; do
        launcher_alive || return 1
        [ "$SECONDS" -lt "$deadline" ] ||
            fail "traces did not reach $want bytes in ${TRAFFIC_TIMEOUT}s (smallest $MIN_BYTES)"
        sleep 0.02
    done
    for ((m = 0; m < n; m++)); do
        [ -s "$RUN_DIR/member-$m.pid" ] || fail "member-$m.pid missing while traces grow"
    done
    return 0
}

# Waits for the launcher to end; sets LAUNCH_RC. Fails on timeout.
wait_for_launcher() {
    deadline=$((SECONDS + LAUNCH_TIMEOUT))
    while launcher_alive; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            stop_run
            fail "spindle-bench still running ${LAUNCH_TIMEOUT}s after the kill"
        fi
        sleep 0.02
    done
    wait "$LAUNCHER"
    LAUNCH_RC=$?
    LAUNCHER=""
}

# Worst "installed N.N ms after failure detected" of a run, or "" if none.
view_change_ms() {
    sed -n 's/.*view change: view [0-9]* installed \([0-9.]*\) ms after failure detected.*/\1/p' \
        "$RUN_DIR/out" | sort -g | tail -n 1
}

# run KIND N TARGET... : one run; appends its crash-to-view time to
# $WORK/times-KIND. Returns 2 when a target finished before the kill
# landed (no fault was injected: the caller runs again).
run_once() {
    kind=$1 members=$2
    shift 2
    targets="$*"
    RUN_NUMBER=$((RUN_NUMBER + 1))
    RUN_DIR="$WORK/run-$RUN_NUMBER"
    mkdir -p "$RUN_DIR"
    sizes=(8 64 1000)
    windows=(4 16 64)
    size=${sizes[RANDOM % 3]}
    window=${windows[RANDOM % 3]}
    expected=$((members * RUN_MESSAGES * LINE_BYTES))
    # Kill somewhere between the first flushed trace block and half-way.
    want=$((1 + expected * (RANDOM % 500) / 1000))
    signal=KILL landed="killed by signal 9" extra=""
    if [ "$kind" = s ]; then
        signal=STOP landed="stopped by signal 19" extra="--failure-timeout-ms 1000"
    fi
    pick_mode "$MODE"
    # shellcheck disable=SC2086
    "$BENCH" ${SPINDLE_FAULT_BENCH_ARGS:-} --local "$members" --tolerate-failures --trace "$RUN_DIR" \
        --messages "$RUN_MESSAGES" --msg-size "$size" --window "$window" --timeout 50 $extra \
        --mode "$RUN_MODE" >"$RUN_DIR/out" 2>&1 &
    LAUNCHER=$!
    what="run $RUN_NUMBER ($kind): $members members, $RUN_MODE, $RUN_MESSAGES messages, size $size,"
    what="$what window $window,"
    what="$what SIG$signal {$targets}"
    if ! wait_for_traffic "$members" "$want"; then
        # Every member delivered everything before the traces were seen
        # to pass the kill point (a fast run on a busy machine, whose
        # poller was not scheduled in time): no fault was injected, so the
        # run is not counted, as when the kill lands after the end.
        wait_for_launcher
        [ "$LAUNCH_RC" -eq 0 ] ||
            fail "$what: spindle-bench exited $LAUNCH_RC before the kill at $want trace bytes"
        echo "note: $what: the run ended before the kill at $want trace bytes; not counted"
        return 2
    fi
    pids=""
    for t in $targets; do pids="$pids $(cat "$RUN_DIR/member-$t.pid")"; done
    if [ "$kind" = d ]; then
        # The second kill lands a random 0-50 ms after the first: inside the
        # view change the first one started, at a random step of it.
        # shellcheck disable=SC2086
        set -- $pids
        kill -"$signal" "$1" 2>/dev/null
        sleep "$(printf '0.%03d' "$DELAY_MS")"
        kill -"$signal" "$2" 2>/dev/null
        what="$what, second kill after $DELAY_MS ms"
    else
        # shellcheck disable=SC2086
        kill -"$signal" $pids 2>/dev/null
    fi
    wait_for_launcher
    # A target that wrote its end file had delivered everything and was in
    # its shutdown when the signal came: no fault was injected mid-stream.
    late=0
    for t in $targets; do
        if ! grep -q "member $t $landed" "$RUN_DIR/out" || [ -f "$RUN_DIR/member-$t.end" ]; then
            late=$((late + 1))
        fi
    done
    # Likewise a survivor that wrote its end file in a view still holding a
    # target: it had delivered everything before the signal came (an
    # unordered member finishes on receipt, without waiting for the others).
    for f in "$RUN_DIR"/member-*.end; do
        [ -f "$f" ] || continue
        list=$(sed -n 's/^view [0-9]* members \([0-9,]*\).*/\1/p' "$f" | head -n 1)
        for t in $targets; do
            case ",$list," in *",$t,"*) late=$((late + 1)) ;; esac
        done
    done
    if [ "$late" -gt 0 ]; then
        [ "$LAUNCH_RC" -eq 0 ] || fail "$what: spindle-bench exited $LAUNCH_RC"
        echo "note: $what: a target finished before the kill landed; not counted"
        return 2
    fi
    [ "$LAUNCH_RC" -eq 0 ] || fail "$what: spindle-bench exited $LAUNCH_RC after the kill"
    killed=$(echo "$targets" | tr ' ' ',')
    if ! verdict=$("$CHECK" "$RUN_DIR" --messages "$RUN_MESSAGES" --members "$members" \
        --killed "$killed" --msg-size "$size" --mode "$RUN_MODE" 2>&1); then
        fail "$what: $verdict"
    fi
    ms=$(view_change_ms)
    [ -n "$ms" ] || fail "$what: no member printed 'view change: ... ms after failure detected'"
    echo "$ms" >>"$WORK/times-$kind"
    # Changes a failed member entered after every live survivor had
    # committed (installed under locks, removed by the next change).
    locked=$(grep -c "installing without the commitment" "$RUN_DIR/out")
    [ "$locked" -eq 0 ] || what="$what, $locked installs under locks"
    echo "ok: $what at >= $want trace bytes: view change ${ms} ms; ${verdict#check_traces: }"
    rm -rf "$RUN_DIR"
    RUN_DIR=""
    return 0
}

# kind_runs KIND: RUNS counted runs of one kind, with a bound on runs where
# the kill landed too late. Each such run doubles the messages of the runs
# of that kind that follow (up to 16 times MESSAGES): a machine fast enough,
# or a poller starved enough, to see the stream end before the kill point
# gets a longer stream rather than a failure.
kind_runs() {
    kind=$1
    done_runs=0 misses=0
    RUN_MESSAGES=$MESSAGES
    while [ "$done_runs" -lt "$RUNS" ]; do
        case $kind in
        a) run_once a 4 $((1 + RANDOM % 3)) ;;
        b)
            first=$((RANDOM % 5))
            second=$(((first + 1 + RANDOM % 4) % 5))
            run_once b 5 "$first" "$second"
            ;;
        c) run_once c 4 0 ;;
        d)
            first=$((RANDOM % 5))
            second=$(((first + 1 + RANDOM % 4) % 5))
            # Half of the runs within 10 ms: a change over loopback takes
            # about that long, and the step hit inside it matters most.
            DELAY_MS=$((RANDOM % 2 ? RANDOM % 51 : RANDOM % 11))
            run_once d 5 "$first" "$second"
            ;;
        s) run_once s 4 $((RANDOM % 4)) ;;
        esac
        case $? in
        0) done_runs=$((done_runs + 1)) ;;
        2)
            misses=$((misses + 1))
            [ "$misses" -le $((RUNS / 4 + 5)) ] ||
                fail "kind $kind: $misses runs finished before the kill, the last with" \
                    "$RUN_MESSAGES messages; raise MESSAGES"
            [ "$RUN_MESSAGES" -ge $((MESSAGES * 16)) ] || RUN_MESSAGES=$((RUN_MESSAGES * 2))
            ;;
        *) fail "kind $kind: run failed" ;;
        esac
    done
}

summary() {
    kind=$1 label=$2
    f="$WORK/times-$kind"
    count=$(wc -l <"$f")
    median=$(sort -g "$f" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    worst=$(sort -g "$f" | tail -n 1)
    printf 'faults: %-34s %3d runs, crash-to-view median %s ms, worst %s ms\n' "$label" \
        "$count" "$median" "$worst"
}

RUN_NUMBER=0
declare -A labels=([a]="(a) one non-leader of 4 killed" [b]="(b) two of 5 killed at once"
    [c]="(c) leader of 4 killed" [d]="(d) two of 5, second 0-50 ms later"
    [s]="(s) one of 4 stopped (SIGSTOP)")
for kind in a b c d s; do
    case $KINDS in *$kind*) kind_runs $kind ;; esac
done
for kind in a b c d s; do
    case $KINDS in *$kind*) summary $kind "${labels[$kind]}" ;; esac
done
echo "faults: seed $SEED, mode $MODE, $RUN_NUMBER runs, all passed"
