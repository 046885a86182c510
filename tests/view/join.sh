#!/bin/bash
# Processes joining a running group under load, each run checked by
# check_traces (a joiner must deliver exactly the messages of the views it
# is in, starting per sender where the state handed over says the group
# was):
#   a) one joiner while three members stream,
#   b) two joiners, the second asking a member that is not the leader
#      (which redirects it), after the first is in,
#   c) one joiner, then a member (not the leader) is killed with -9: the
#      joiner goes through the failure's view change like the others,
#   k) a joiner is killed with -9 or stopped with SIGSTOP a random 0-1200 ms
#      after it started (half of the runs: 150-450 ms; before it asks,
#      anywhere in its admission, or just after it): the
#      members drop it or remove it and finish (--failure-timeout-ms 1000);
#      then a second process joins and gets in,
#   m) three processes ask to join at the same moment: all get in, one
#      after the other.
# The members run spindle-bench --local 3 --control-port P (TCP bootstrap on
# loopback, data over the transport), paced with --rate; joiners run
# spindle-bench --join. The stream lasts until the joins (and the kill) are
# done: then the script ends it through the --stop-file every process was
# given (each sender reports what it has sent, and the stream ends just past
# the highest count), so a loaded machine makes the stream longer rather
# than end it before a joiner is in. A run whose ports were taken
# (or whose stream reached its cap, STREAM_CAP_S, before the joins were
# done) is not counted (a note says so) and is repeated, at most RUNS more
# times.
#
# Usage: join.sh SPINDLE_BENCH CHECK_TRACES [RUNS_PER_KIND [KINDS [MODE]]]
#   MODE: the subgroup's delivery mode, atomic (default), unordered, or
#   mixed (drawn per run from the seed); each run's line names it.
# Environment: SPINDLE_JOIN_SEED (printed when not given),
#              SPINDLE_JOIN_KEEP keep the directory of a failed run,
#              SPINDLE_JOIN_BENCH_ARGS extra spindle-bench arguments for
#              every process (for example --transport fabric --provider tcp).
#              SPINDLE_JOIN_KEYGEN path of spindle-keygen: every process runs
#              with one new group key (--key-file, docs/SECURITY.md).
set -u
BENCH=$1
CHECK=$2
RUNS=${3:-3}
KINDS=${4:-abc}
MODE=${5:-atomic}
MESSAGES=6000 # the first joiner asks after up to a third of 3 x MESSAGES deliveries
RATE=1500     # messages per second per sender
STREAM_CAP_S=60 # --messages: the longest stream, should the joins hang
# Messages per sender after the joins (or the kill): traffic for the
# joiners and through the view changes that follow.
STOP_MARGIN=500
TIMEOUT=120 # a 4 s stream took 67 s under ThreadSanitizer on a loaded 2-core machine

# shellcheck source-path=SCRIPTDIR source=seed.sh
. "$(dirname "$0")/seed.sh"
# shellcheck source-path=SCRIPTDIR source=stop_stream.sh
. "$(dirname "$0")/stop_stream.sh"
seed_random join SPINDLE_JOIN_SEED

WORK=$(mktemp -d /tmp/spindle-join-XXXXXX)
PIDS=()
RUN_DIR=""

stop_run() {
    local p f
    if [ -n "$RUN_DIR" ]; then
        for f in "$RUN_DIR"/member-*.pid; do
            [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
        done
    fi
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    PIDS=()
}
cleanup() {
    stop_run
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -n "${SPINDLE_JOIN_KEYGEN:-}" ]; then
    "$SPINDLE_JOIN_KEYGEN" "$WORK/group.key" || exit 1
    SPINDLE_JOIN_BENCH_ARGS="${SPINDLE_JOIN_BENCH_ARGS:-} --key-file $WORK/group.key"
fi

fail() {
    echo "FAIL: $*"
    echo "join: seed $SEED (rerun with SPINDLE_JOIN_SEED=$SEED)"
    local f
    for f in "$RUN_DIR"/*.out; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f") (last 20 lines) ---"
        tail -n 20 "$f"
    done
    if [ -n "${SPINDLE_JOIN_KEEP:-}" ] && [ -n "$RUN_DIR" ]; then
        stop_run
        kept=$(mktemp -d /tmp/spindle-join-kept-XXXXXX)
        cp -r "$RUN_DIR" "$kept/"
        echo "kept the run in $kept"
    fi
    exit 1
}

# end_run_stream: end_stream for run_once (its stop file; the members
# but the one kind c killed); sets run_once's messages.
end_run_stream() {
    local live=(0 1 2)
    [ -z "$killed" ] || live=(0 2)
    end_stream "$stop_file" $((RATE * STREAM_CAP_S)) "${live[@]}"
    messages=$STREAM_MESSAGES
}

# Waits (bounded) until FILE has at least N lines; 1 if PID ended first or
# a member of the launcher at PID failed (its log, LOG, says so).
wait_lines() {
    local file=$1 want=$2 pid=$3 log=$4 deadline=$((SECONDS + TIMEOUT)) have
    while :; do
        have=0
        [ -f "$file" ] && have=$(wc -l <"$file")
        [ "$have" -ge "$want" ] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        grep -q "exited with status" "$log" 2>/dev/null && return 1
        [ "$SECONDS" -lt "$deadline" ] || fail "$file did not reach $want lines in ${TIMEOUT}s"
        sleep 0.02
    done
}

# Waits (bounded) until FILE contains TEXT; 1 if PID ended first, or
# MEMBERS (when given: the members' launcher) did: a joiner that is still
# asking when the stream is over would only wait out its own timeout.
wait_text() {
    local file=$1 text=$2 pid=$3 members=${4:-} deadline=$((SECONDS + TIMEOUT))
    until grep -q "$text" "$file" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || return 1
        if [ -n "$members" ] && ! kill -0 "$members" 2>/dev/null; then
            grep -q "$text" "$file" 2>/dev/null
            return
        fi
        [ "$SECONDS" -lt "$deadline" ] || fail "$file never said '$text' in ${TIMEOUT}s"
        sleep 0.02
    done
}

# Waits for PID; sets RC.
wait_pid() {
    local pid=$1 deadline=$((SECONDS + TIMEOUT + 30))
    while kill -0 "$pid" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || {
            stop_run
            fail "process $pid still running after $((TIMEOUT + 30))s"
        }
        sleep 0.05
    done
    wait "$pid"
    RC=$?
}

# A base port below the kernel's ephemeral range, so that no outgoing
# connection (libfabric tcp makes many) can hold one of the group's ports;
# if one is taken after all, the member says so and the run is repeated.
# Drawn bases stay below 20480: from there up to the ephemeral range, ports
# come in blocks that tests/test_ports.sh and its twins reserve for others.
RANDOM_PORT_TOP=20480
pick_port() {
    PORT=$((10000 + RANDOM % (RANDOM_PORT_TOP - 10000 - 20)))
}

# record_join_ms FILE: appends the join time the joiner whose output is FILE
# printed to join-ms; sets MS. Fails when it printed none.
record_join_ms() {
    MS=$(sed -n 's/^joined as member [0-9]* in view [0-9]*, \([0-9.]*\) ms after asking$/\1/p' \
        "$1")
    [ -n "$MS" ] || fail "$what: $(basename "$1") does not say how long the join took"
    echo "$MS" >>"$WORK/join-ms"
}

# check_joined TOP IDS...: check_traces over members 0..TOP, where 0..2
# were there from the start and the ids in 3..TOP not among IDS (given to
# the victim or to attempts that were dropped and not given again) are
# checked as killed, and so is VICTIM (ID.VIEW, from "joined as member ID
# in view VIEW": a victim that got in, whose id may since have been given
# to a later joiner); sets VERDICT.
check_joined() {
    local top=$1 gone="" i
    shift
    for ((i = 3; i <= top; i++)); do
        case " $* " in *" $i "*) ;; *) gone="$gone${gone:+,}$i" ;; esac
    done
    [ -z "${VICTIM:-}" ] || gone="$gone${gone:+,}$VICTIM"
    # shellcheck disable=SC2046
    VERDICT=$("$CHECK" "$RUN_DIR" --messages "$messages" --members $((top + 1)) --initial 3 \
        --msg-size "$size" --mode "$RUN_MODE" $([ -n "$gone" ] && echo --killed "$gone") 2>&1) ||
        fail "$what: $VERDICT"
}

# await_joined FILE PID NAME: waits until the joiner PID (output in FILE)
# is in; fails if it ends first; returns 2 (after stopping the run) when
# the members finished without it. Uses run_once's launcher and what.
await_joined() {
    until grep -q "joined as member" "$1" 2>/dev/null; do
        kill -0 "$2" 2>/dev/null || fail "$what: $3 ended without getting in"
        if ! kill -0 "$launcher" 2>/dev/null; then
            stop_run
            echo "note: $what: the stream ended before $3 got in; not counted"
            return 2
        fi
        sleep 0.02
    done
}

# Kind k, called by run_once with its locals: a joiner killed or stopped
# during its admission, then one that gets in.
run_dying_joiner() {
    # Half of the runs 150-450 ms after its start: a process takes about
    # 250 ms to start and ask over shm, and a join tens of milliseconds
    # more; the other half 0-1200 ms, which reaches the admission and the
    # first view of a libfabric joiner (its transport takes about 400 ms
    # to open).
    local signal=KILL delay=$((RANDOM % 2 ? RANDOM % 1201 : 150 + RANDOM % 301)) victim
    [ $((RANDOM % 2)) -eq 0 ] || signal=STOP
    # shellcheck disable=SC2086
    "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
        --listen "127.0.0.1:$((PORT + 10))" "${common[@]}" >"$RUN_DIR/joiner-dying.out" 2>&1 &
    victim=$!
    PIDS+=("$victim")
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -"$signal" "$victim" 2>/dev/null
    what="$what, joiner SIG$signal after $delay ms"
    # The next joiner gets the next id: 4 if the victim was given 3.
    # shellcheck disable=SC2086
    "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
        --listen "127.0.0.1:$((PORT + 11))" "${common[@]}" >"$RUN_DIR/joiner-1.out" 2>&1 &
    j1=$!
    PIDS+=("$j1")
    await_joined "$RUN_DIR/joiner-1.out" "$j1" "the second joiner" || return 2
    end_run_stream
    wait_pid "$launcher"
    [ "$RC" -eq 0 ] || fail "$what: the members' launcher exited $RC"
    wait_pid "$j1"
    [ "$RC" -eq 0 ] || fail "$what: the second joiner exited $RC"
    kill -9 "$victim" 2>/dev/null
    wait "$victim" 2>/dev/null
    PIDS=()
    local id
    id=$(sed -n 's/^joined as member \([0-9]*\) in view.*/\1/p' "$RUN_DIR/joiner-1.out")
    [ -n "$id" ] || fail "$what: the second joiner did not say its id"
    # A victim that was admitted must have delivered what the others did
    # in its views (checked as a killed joiner, by its incarnation: the
    # second joiner may have been given its id again).
    local VICTIM
    VICTIM=$(sed -n 's/^joined as member \([0-9]*\) in view \([0-9]*\),.*/\1.\2/p' \
        "$RUN_DIR/joiner-dying.out")
    local top=$id
    [ -z "$VICTIM" ] || [ "${VICTIM%%.*}" -le "$top" ] || top=${VICTIM%%.*}
    check_joined "$top" "$id"
    record_join_ms "$RUN_DIR/joiner-1.out"
    echo "ok: $what: the second joiner is member $id, $MS ms after asking;" \
        "${VERDICT#check_traces: }"
    rm -rf "$RUN_DIR"
    RUN_DIR=""
    return 0
}

# Kind m, called by run_once with its locals: three joiners at once.
run_three_joiners() {
    local k pids=() ids=() id top=2
    for k in 0 1 2; do
        # shellcheck disable=SC2086
        "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
            --listen "127.0.0.1:$((PORT + 10 + k))" "${common[@]}" >"$RUN_DIR/joiner-m$k.out" 2>&1 &
        pids+=($!)
        PIDS+=($!)
    done
    for k in 0 1 2; do
        await_joined "$RUN_DIR/joiner-m$k.out" "${pids[k]}" "joiner m$k" || return 2
    done
    end_run_stream
    wait_pid "$launcher"
    [ "$RC" -eq 0 ] || fail "$what: the members' launcher exited $RC"
    for k in 0 1 2; do
        wait_pid "${pids[k]}"
        [ "$RC" -eq 0 ] || fail "$what: joiner m$k exited $RC"
        id=$(sed -n 's/^joined as member \([0-9]*\) in view.*/\1/p' "$RUN_DIR/joiner-m$k.out")
        ids+=("$id")
        [ "$id" -le "$top" ] || top=$id
        record_join_ms "$RUN_DIR/joiner-m$k.out"
    done
    PIDS=()
    check_joined "$top" "${ids[@]}"
    echo "ok: $what: three joiners at once are members ${ids[*]};" "${VERDICT#check_traces: }"
    rm -rf "$RUN_DIR"
    RUN_DIR=""
    return 0
}

# run_once KIND: returns 2 when the stream ended before a joiner was in.
run_once() {
    local kind=$1 size window joiners launcher j1 j2 killed="" members=3 messages
    RUN_NUMBER=$((RUN_NUMBER + 1))
    RUN_DIR="$WORK/run-$RUN_NUMBER"
    mkdir -p "$RUN_DIR"
    local sizes=(8 64 1000) windows=(4 16 64)
    size=${sizes[RANDOM % 3]}
    window=${windows[RANDOM % 3]}
    pick_port
    pick_mode "$MODE"
    local stop_file="$WORK/stop-$RUN_NUMBER"
    local common=(--tolerate-failures --trace "$RUN_DIR" --messages $((RATE * STREAM_CAP_S))
        --rate "$RATE" --msg-size "$size" --window "$window" --timeout "$TIMEOUT"
        --mode "$RUN_MODE" --stop-file "$stop_file")
    [ "$kind" != k ] || common+=(--failure-timeout-ms 1000)
    # shellcheck disable=SC2086
    "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --local 3 --control-port "$PORT" "${common[@]}" \
        >"$RUN_DIR/members.out" 2>&1 &
    launcher=$!
    PIDS=("$launcher")
    local what="run $RUN_NUMBER ($kind): 3 members on ports $PORT.., $RUN_MODE, size $size,"
    what="$what window $window"
    # Join somewhere in the first third of the stream.
    local want=$((1 + RANDOM % (MESSAGES * 3 / 3)))
    if ! wait_lines "$RUN_DIR/member-0.trace" "$want" "$launcher" "$RUN_DIR/members.out"; then
        stop_run # the others would wait for the failed member until their timeout
        grep -q "already in use" "$RUN_DIR/members.out" && {
            echo "note: $what: port taken; not counted"
            return 2
        }
        fail "$what: the members failed or ended before $want deliveries"
    fi
    if [ "$kind" = a ]; then
        # A joiner whose subgroups do not match is refused, naming the
        # difference, and the group goes on unharmed.
        local other_window=$((window + 1))
        # shellcheck disable=SC2086
        if "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
            --listen "127.0.0.1:$((PORT + 12))" "${common[@]}" --window "$other_window" \
            --timeout 15 >"$RUN_DIR/mismatch.out" 2>&1; then
            fail "$what: a joiner with --window $other_window got in"
        fi
        if ! grep -q "subgroup 0: window $other_window.*the group has window $window" \
            "$RUN_DIR/mismatch.out"; then
            # On a loaded machine the stream may end before the joiner
            # (which starts its transport first) gets to ask.
            if ! kill -0 "$launcher" 2>/dev/null && grep -q "unreachable" "$RUN_DIR/mismatch.out"; then
                stop_run
                echo "note: $what: the stream ended before the mismatched joiner asked; not counted"
                return 2
            fi
            fail "$what: the refusal does not name the window"
        fi
    fi
    if [ "$kind" = k ]; then
        run_dying_joiner
        return $?
    fi
    if [ "$kind" = m ]; then
        run_three_joiners
        return $?
    fi
    # shellcheck disable=SC2086
    "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
        --listen "127.0.0.1:$((PORT + 10))" "${common[@]}" >"$RUN_DIR/joiner-1.out" 2>&1 &
    j1=$!
    PIDS+=("$j1")
    joiners=1
    if ! wait_text "$RUN_DIR/joiner-1.out" "member 3 joined" "$j1" "$launcher"; then
        kill -9 "$j1" 2>/dev/null
        wait_pid "$j1"
        stop_run
        echo "note: $what: the joiner did not get in (exit $RC) before the stream ended; not counted"
        return 2
    fi
    case $kind in
    b)
        # The second asks member 2, which is not the leader: redirected.
        # shellcheck disable=SC2086
        "$BENCH" ${SPINDLE_JOIN_BENCH_ARGS:-} --join "127.0.0.1:$((PORT + 2))" \
            --listen "127.0.0.1:$((PORT + 11))" "${common[@]}" >"$RUN_DIR/joiner-2.out" 2>&1 &
        j2=$!
        PIDS+=("$j2")
        joiners=2
        if ! wait_text "$RUN_DIR/joiner-2.out" "member 4 joined" "$j2" "$launcher"; then
            kill -9 "$j2" 2>/dev/null
            wait_pid "$j2"
            stop_run
            echo "note: $what: the second joiner did not get in (exit $RC); not counted"
            return 2
        fi
        ;;
    c)
        kill -9 "$(cat "$RUN_DIR/member-1.pid")"
        killed="--killed 1"
        ;;
    esac
    end_run_stream
    wait_pid "$launcher"
    [ "$RC" -eq 0 ] || fail "$what: the members' launcher exited $RC"
    wait_pid "$j1"
    [ "$RC" -eq 0 ] || fail "$what: joiner 1 exited $RC"
    if [ "$joiners" -eq 2 ]; then
        wait_pid "$j2"
        [ "$RC" -eq 0 ] || fail "$what: joiner 2 exited $RC"
    fi
    PIDS=()
    if [ "$kind" = c ] && ! grep -q "member 1 killed by signal 9" "$RUN_DIR/members.out"; then
        echo "note: $what: member 1 finished before the kill landed; not counted"
        return 2
    fi
    # A joiner's files carry its incarnation: member-3.<view it joined>.*
    local joined end
    end=$(find "$RUN_DIR" -maxdepth 1 -name 'member-3.*.end' | head -n 1)
    [ -n "$end" ] || fail "$what: the joiner wrote no member-3.<view>.end"
    joined=$(sed -n 's/.* joined \([0-9]*\)$/\1/p' "$end")
    [ -n "$joined" ] || fail "$what: $(basename "$end") does not say which view it joined"
    [ -s "$RUN_DIR/member-3.$joined.trace" ] || fail "$what: the joiner delivered nothing"
    # shellcheck disable=SC2086
    if ! verdict=$("$CHECK" "$RUN_DIR" --messages "$messages" --members $((members + joiners)) \
        --msg-size "$size" --mode "$RUN_MODE" $killed 2>&1); then
        fail "$what: $verdict"
    fi
    record_join_ms "$RUN_DIR/joiner-1.out"
    echo "ok: $what: joined in view $joined after $want deliveries, $MS ms after asking;" \
        "${verdict#check_traces: }"
    rm -rf "$RUN_DIR"
    RUN_DIR=""
    return 0
}

# Nobody at the join address: a clear error within the timeout.
pick_port
if "$BENCH" --join "127.0.0.1:$PORT" --listen "127.0.0.1:$((PORT + 1))" --tolerate-failures \
    --messages 10 --msg-size 8 --timeout 2 >"$WORK/nobody.out" 2>&1; then
    fail "joining a group that is not there succeeded"
fi
grep -q "127.0.0.1:$PORT" "$WORK/nobody.out" || {
    cat "$WORK/nobody.out"
    fail "the error for an absent group does not name its address"
}
echo "ok: joining 127.0.0.1:$PORT with nobody there: $(grep -o 'spindle_group_create.*' "$WORK/nobody.out" | head -c 200)"

RUN_NUMBER=0
for ((k = 0; k < ${#KINDS}; k++)); do
    kind=${KINDS:k:1}
    done_runs=0 misses=0
    while [ "$done_runs" -lt "$RUNS" ]; do
        run_once "$kind"
        case $? in
        0) done_runs=$((done_runs + 1)) ;;
        2)
            misses=$((misses + 1))
            [ "$misses" -le "$RUNS" ] || fail "kind $kind: $misses runs not counted"
            ;;
        esac
    done
done
sort -g "$WORK/join-ms" >"$WORK/join-ms.sorted"
n=$(wc -l <"$WORK/join-ms.sorted")
echo "join: seed $SEED, mode $MODE: all runs passed; request to first view: median $(sed -n "$(((n + 1) / 2))p" \
    "$WORK/join-ms.sorted") ms, worst $(tail -n 1 "$WORK/join-ms.sorted") ms over $n joins"
