#!/bin/bash
# Network partition: three spindle-bench members over --transport fabric
# (tcp provider), each in its own network namespace, joined by veth pairs to
# a bridge in a fourth namespace. Mid-stream one member's bridge port goes
# down (packets vanish, as in a real partition). Then:
#   - the two members of the majority finish (exit 0, .end with the two of
#     them), and check_traces accepts their traces with the cut-off member as
#     not surviving: they delivered identical sequences per view, every
#     message of both of them, and each message of the cut-off member by both
#     or neither (unordered: each sender's messages once, in its order, every
#     message of both of them, a gap-free prefix of the cut-off member's);
#   - the cut-off member delivered nothing the majority did not (atomic: its
#     trace is a prefix of theirs in every view: checked by check_traces),
#     stops within the bound, says it is in a minority, and writes no .end.
# One run cuts a non-leader (member 2), one cuts the leader (member 0).
# A run whose cut landed after the stream ended (a poller starved on a busy
# machine) injected no fault: it is not counted, and the next run of that
# cut streams twice as many messages (as in faults.sh).
#
# Needs root and network namespaces; fails, saying why, when they cannot be
# created. Usage: faults_partition.sh SPINDLE_BENCH CHECK_TRACES [MESSAGES [MODE]]
#   MODE: atomic (default), unordered, or mixed (drawn per run from the seed).
# Environment: SPINDLE_FAULT_SEED as for faults.sh.
set -u
BENCH=$1
CHECK=$2
MESSAGES=${3:-4000}
MODE=${4:-atomic}
MEMBERS=3
FAILURE_TIMEOUT_MS=1000
RUN_TIMEOUT=60
SIZE=64
WINDOW=16
RATE=4000 # messages per second per sender: a run takes at least MESSAGES / RATE s

# shellcheck source-path=SCRIPTDIR source=seed.sh
. "$(dirname "$0")/seed.sh"
seed_random partition SPINDLE_FAULT_SEED

TAG="sp$(($$ % 100000))"
BRIDGE_NS="$TAG-br"
WORK=$(mktemp -d /tmp/spindle-partition-XXXXXX)
PIDS=()
NAMESPACES=()
RUN_DIR=""

stop_members() {
    for pid in "${PIDS[@]}"; do
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    PIDS=()
}
cleanup() {
    stop_members
    for ns in "${NAMESPACES[@]}"; do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "FAIL: $*"
    echo "partition: seed $SEED (rerun with SPINDLE_FAULT_SEED=$SEED)"
    if [ -n "$RUN_DIR" ]; then
        for ((m = 0; m < MEMBERS; m++)); do
            [ -f "$RUN_DIR/out-$m" ] || continue
            echo "--- member $m output (last 15 lines) ---"
            tail -n 15 "$RUN_DIR/out-$m"
        done
    fi
    exit 1
}

# net CMD...: one network set-up step; any failure is fatal and named.
net() {
    local out
    out=$("$@" 2>&1) || fail "cannot build the test network: '$*': $out (needs root and" \
        "network namespaces: ip netns, veth, bridge)"
}

# Namespace $TAG-<m> holds member m at 10.231.0.<m+1>, its veth peer
# $TAG-p<m> sits on bridge br0 in $BRIDGE_NS.
make_network() {
    command -v ip >/dev/null || fail "the 'ip' command (iproute2) is missing"
    net ip netns add "$BRIDGE_NS"
    NAMESPACES+=("$BRIDGE_NS")
    net ip -n "$BRIDGE_NS" link add br0 type bridge
    net ip -n "$BRIDGE_NS" link set br0 up
    for ((m = 0; m < MEMBERS; m++)); do
        ns="$TAG-$m"
        net ip netns add "$ns"
        NAMESPACES+=("$ns")
        net ip link add "$TAG-v$m" netns "$ns" type veth peer name "$TAG-p$m" netns "$BRIDGE_NS"
        net ip -n "$BRIDGE_NS" link set "$TAG-p$m" master br0
        net ip -n "$BRIDGE_NS" link set "$TAG-p$m" up
        net ip -n "$ns" addr add "10.231.0.$((m + 1))/24" dev "$TAG-v$m"
        net ip -n "$ns" link set "$TAG-v$m" up
        net ip -n "$ns" link set lo up
    done
}

write_config() {
    cfg=$1
    {
        printf '[group]\nname = partition%s\ntransport = fabric\nprovider = tcp\n' "$TAG"
        printf 'failure_timeout_ms = %d\n' "$FAILURE_TIMEOUT_MS"
        for ((m = 0; m < MEMBERS; m++)); do
            printf '[member.%d]\nhost = 10.231.0.%d\nport = %d\nname = node-%d\n' "$m" \
                $((m + 1)) $((7300 + m)) "$m"
        done
        printf '[subgroup.0]\nmembers = 0,1,2\nwindow_size = %d\nmax_payload = %d\n' "$WINDOW" \
            "$SIZE"
        printf '[bench]\nmessages = %d\nmessage_size = %d\n' "$2" "$SIZE"
    } >"$cfg"
}

min_trace_bytes() {
    min=""
    for ((m = 0; m < MEMBERS; m++)); do
        size=$(stat -c %s "$RUN_DIR/member-$m.trace" 2>/dev/null || echo 0)
        if [ -z "$min" ] || [ "$size" -lt "$min" ]; then min=$size; fi
    done
    echo "$min"
}

# Waits (bounded) for pid $1 to end; sets rc to its exit status, or to
# "timeout" if it did not end.
wait_exit() {
    pid=$1 deadline=$((SECONDS + $2))
    while kill -0 "$pid" 2>/dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            rc=timeout
            return
        fi
        sleep 0.05
    done
    wait "$pid"
    rc=$?
}

# partition_run CUT: one run in which member CUT is cut off.
partition_run() {
    cut=$1
    RUN_DIR="$WORK/cut-$cut"
    mkdir -p "$RUN_DIR"
    write_config "$RUN_DIR/config.ini" "$RUN_MESSAGES"
    pick_mode "$MODE"
    for ((m = 0; m < MEMBERS; m++)); do net ip -n "$BRIDGE_NS" link set "$TAG-p$m" up; done
    # Paced: unpaced, a run can end in 0.3 s, before the loop below (a
    # 10 ms poll of the traces) cuts the port, and nobody is cut off.
    for ((m = 0; m < MEMBERS; m++)); do
        ip netns exec "$TAG-$m" "$BENCH" --config "$RUN_DIR/config.ini" --id "$m" \
            --transport fabric --provider tcp --tolerate-failures --trace "$RUN_DIR" \
            --messages "$RUN_MESSAGES" --msg-size "$SIZE" --window "$WINDOW" --timeout 50 \
            --mode "$RUN_MODE" --rate "$RATE" >"$RUN_DIR/out-$m" 2>&1 &
        PIDS[m]=$!
    done
    expected=$((MEMBERS * RUN_MESSAGES * 22))
    want=$((1 + expected * (10 + RANDOM % 40) / 100))
    deadline=$((SECONDS + 30))
    while [ "$(min_trace_bytes)" -lt "$want" ]; do
        for ((m = 0; m < MEMBERS; m++)); do
            kill -0 "${PIDS[m]}" 2>/dev/null || fail "member $m ended before the cut at $want bytes"
        done
        [ "$SECONDS" -lt "$deadline" ] || fail "traces did not reach $want bytes in 30 s"
        sleep 0.01
    done
    net ip -n "$BRIDGE_NS" link set "$TAG-p$cut" down
    echo "partition: cut member $cut off at >= $want trace bytes ($RUN_MODE, $RUN_MESSAGES messages)"
    majority=""
    for ((m = 0; m < MEMBERS; m++)); do
        [ "$m" -eq "$cut" ] && continue
        wait_exit "${PIDS[m]}" "$RUN_TIMEOUT"
        [ "$rc" = 0 ] || fail "majority member $m: exit '$rc' (want 0) after member $cut was cut off"
        majority="$majority $m"
        if cut_too_late; then
            stop_members
            echo "note: member $m finished in a view still holding member $cut: the cut" \
                "landed after the stream ended; not counted"
            rm -rf "$RUN_DIR"
            RUN_DIR=""
            return 2
        fi
        # The view names the removed member by its [member.N] name.
        grep -q "member $cut left (node-$cut, incarnation" "$RUN_DIR/out-$m" ||
            fail "majority member $m did not report node-$cut leaving by name"
    done
    wait_exit "${PIDS[cut]}" 20
    [ "$rc" != timeout ] || fail "cut-off member $cut still running 20 s after the majority finished"
    PIDS=()
    grep -qi minority "$RUN_DIR/out-$cut" ||
        fail "cut-off member $cut (exit $rc) never said it is in a minority"
    [ ! -e "$RUN_DIR/member-$cut.end" ] ||
        fail "cut-off member $cut wrote member-$cut.end: $(cat "$RUN_DIR/member-$cut.end")"
    verdict=$("$CHECK" "$RUN_DIR" --messages "$RUN_MESSAGES" --members "$MEMBERS" --killed "$cut" \
        --msg-size "$SIZE" --mode "$RUN_MODE" 2>&1) || fail "member $cut cut off: $verdict"
    ms=$(sed -n 's/.*installed \([0-9.]*\) ms after failure detected.*/\1/p' "$RUN_DIR"/out-* |
        sort -g | tail -n 1)
    echo "ok: member $cut cut off: majority{$majority } finished, member $cut stopped (exit $rc)" \
        "in a minority; view change ${ms:-?} ms; ${verdict#check_traces: }"
    rm -rf "$RUN_DIR"
    RUN_DIR=""
}

# cut_too_late: whether the run had ended before the cut took effect: a
# majority member finished (wrote its .end) in a view that still held the
# cut member. (The cut member's own .end is checked, never excused.)
cut_too_late() {
    for ((k = 0; k < MEMBERS; k++)); do
        f="$RUN_DIR/member-$k.end"
        if [ "$k" -eq "$cut" ] || [ ! -f "$f" ]; then continue; fi
        list=$(sed -n 's/^view [0-9]* members \([0-9,]*\).*/\1/p' "$f" | head -n 1)
        case ",$list," in *",$cut,"*) return 0 ;; esac
    done
    return 1
}

# cut_runs CUT: one counted run cutting member CUT, with at most 4 runs in
# which the cut landed too late.
cut_runs() {
    RUN_MESSAGES=$MESSAGES
    for ((miss = 0; miss <= 4; miss++)); do
        partition_run "$1"
        [ $? -eq 2 ] || return 0
        RUN_MESSAGES=$((RUN_MESSAGES * 2))
    done
    fail "member $1: 5 runs finished before the cut, the last with $((RUN_MESSAGES / 2))" \
        "messages; raise MESSAGES"
}

make_network
cut_runs 2
cut_runs 0
echo "partition: seed $SEED, mode $MODE, 2 runs, all passed"
