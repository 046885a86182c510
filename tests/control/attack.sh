#!/bin/bash
# A keyed group under attack by strangers (docs/SECURITY.md "Under
# attack"). Each round runs the same workload twice, alternately without
# and with an attack:
#   three members stream (spindle-bench --local 3 --control-port P
#   --key-file K, all sending as fast as they can) and a process with the
#   key joins a tenth of the way through; with the attack, spindle-attack
#   meanwhile holds IDLE idle connections, GARBAGE connections sending
#   random bytes and REPLAY connections replaying a real joiner's recorded
#   bytes (captured by relaying the first plain round's joiner) open to the
#   three members from 16 addresses, and processes with another key and
#   with none keep trying to join (spindle-bench --join).
# Every run must end with every member and the joiner exiting 0 and
# check_traces agreeing; in every attacked run the joiner with the key is
# admitted, every stranger's join fails naming the key handshake, and no
# connection of the attacker is sent more than the acceptor's 32-byte
# nonce. The last lines report the medians of the members' msgs/s and of
# the join times, and attacked/plain ratios (a benchmark's figures: not
# asserted).
#
# Usage: attack.sh SPINDLE_BENCH SPINDLE_ATTACK SPINDLE_KEYGEN CHECK_TRACES
#                  [ROUNDS [MESSAGES_PER_SENDER [IDLE GARBAGE REPLAY [PACE]]]]
#   PACE: messages per second per sender (0, the default: as fast as they
#   can, the benchmark); the test paces the stream so that it outlasts the
#   joiner's start on a fast machine.
# Environment: SPINDLE_ATTACK_BENCH_ARGS  extra spindle-bench arguments for
#                  the members, the joiner and the strangers (for example
#                  --transport fabric --provider tcp),
#              SPINDLE_ATTACK_KEEP  a directory to copy each run's outputs to.
set -u
BENCH=$1
ATTACK=$2
KEYGEN=$3
CHECK=$4
ROUNDS=${5:-1}
MESSAGES=${6:-30000}
IDLE=${7:-200}
GARBAGE=${8:-20}
REPLAY=${9:-20}
PACE=${10:-0}
SIZE=1024
TIMEOUT=60

WORK=$(mktemp -d /tmp/spindle-attack-XXXXXX)
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
    echo "FAIL: $*"
    local f
    for f in "$RUN_DIR"/*.out; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f") (last 10 lines) ---"
        tail -n 10 "$f"
    done
    exit 1
}
"$KEYGEN" "$WORK/group.key" >/dev/null || exit 1
"$KEYGEN" "$WORK/other.key" >/dev/null || exit 1

# Drawn bases stay below 20480: from there up to the ephemeral range, ports
# come in blocks that tests/test_ports.sh and its twins reserve for others.
RANDOM_PORT_TOP=20480

# Waits (bounded) until FILE has at least N lines; fails if PID ended.
wait_lines() {
    local file=$1 want=$2 pid=$3 deadline=$((SECONDS + TIMEOUT)) have
    while :; do
        have=0
        [ -f "$file" ] && have=$(wc -l <"$file")
        [ "$have" -ge "$want" ] && return 0
        kill -0 "$pid" 2>/dev/null || fail "$what: the members ended before $file had $want lines"
        [ "$SECONDS" -lt "$deadline" ] || fail "$what: $file did not reach $want lines"
        sleep 0.01
    done
}

# Strangers asking to join, one after the other, while the members'
# launcher LAUNCHER runs, with the arguments that follow (another key, or
# none); each must fail on the key.
strangers() {
    local name=$1 launcher=$2 n=0
    shift 2
    while kill -0 "$launcher" 2>/dev/null; do
        n=$((n + 1))
        # shellcheck disable=SC2086 # word splitting of the extra arguments is meant
        if "$BENCH" ${SPINDLE_ATTACK_BENCH_ARGS:-} --join "127.0.0.1:$PORT" \
            --listen "127.0.0.1:$((PORT + 20 + n % 50))" \
            --tolerate-failures --messages "$MESSAGES" --msg-size "$SIZE" --timeout 2 "$@" \
            >"$RUN_DIR/$name-$n.out" 2>&1; then
            echo "a stranger ($name) was admitted" >"$RUN_DIR/$name.admitted"
        fi
    done
}

# run_once MODE (plain or attacked): sets RATE and JOIN_MS.
run_once() {
    local mode=$1 launcher joiner attacker="" contact
    RUN_DIR="$WORK/run-$RUN_NUMBER-$mode"
    mkdir -p "$RUN_DIR"
    PORT=$((10000 + RANDOM % (RANDOM_PORT_TOP - 10000 - 100)))
    what="round $RUN_NUMBER ($mode, ports $PORT..)"
    # shellcheck disable=SC2206 # word splitting of the extra arguments is meant
    local common=(${SPINDLE_ATTACK_BENCH_ARGS:-} --tolerate-failures --trace "$RUN_DIR"
        --messages "$MESSAGES" --msg-size "$SIZE" --timeout "$TIMEOUT" --key-file "$WORK/group.key")
    [ "$PACE" = 0 ] || common+=(--rate "$PACE")
    "$BENCH" --local 3 --control-port "$PORT" "${common[@]}" >"$RUN_DIR/members.out" 2>&1 &
    launcher=$!
    PIDS=("$launcher")
    wait_lines "$RUN_DIR/member-0.trace" 1 "$launcher"
    contact=$PORT
    if [ "$mode" = attacked ]; then
        "$ATTACK" --target "127.0.0.1:$PORT,127.0.0.1:$((PORT + 1)),127.0.0.1:$((PORT + 2))" \
            --sources 127.0.2 16 --idle "$IDLE" --garbage "$GARBAGE" \
            --replay "$WORK/captured" "$REPLAY" --seconds $((TIMEOUT * 2)) \
            >"$RUN_DIR/attack.json" 2>"$RUN_DIR/attack.err" &
        attacker=$!
        strangers other "$launcher" --key-file "$WORK/other.key" &
        PIDS+=("$attacker" $!)
        strangers keyless "$launcher" &
        PIDS+=($!)
    elif [ ! -s "$WORK/captured" ]; then
        contact=$((PORT + 50))
        "$ATTACK" --record "$contact" --to "127.0.0.1:$PORT" --out "$WORK/captured" \
            >"$RUN_DIR/record.out" 2>&1 &
        PIDS+=($!)
        until grep -q listening "$RUN_DIR/record.out" 2>/dev/null; do sleep 0.01; done
    fi
    wait_lines "$RUN_DIR/member-0.trace" $((MESSAGES * 3 / 10)) "$launcher"
    "$BENCH" --join "127.0.0.1:$contact" --listen "127.0.0.1:$((PORT + 10))" "${common[@]}" \
        >"$RUN_DIR/joiner.out" 2>&1 &
    joiner=$!
    PIDS+=("$joiner")
    wait "$joiner" || fail "$what: the joiner with the key exited $?"
    wait "$launcher" || fail "$what: the members' launcher exited $?"
    if [ -n "$attacker" ]; then
        kill -TERM "$attacker"
        wait "$attacker" || fail "$what: spindle-attack exited $?: $(cat "$RUN_DIR/attack.err")"
    fi
    local p
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    PIDS=()
    [ -z "${SPINDLE_ATTACK_KEEP:-}" ] || cp "$RUN_DIR"/*.out "$SPINDLE_ATTACK_KEEP/" 2>/dev/null
    local id verdict
    id=$(sed -n 's/^joined as member \([0-9]*\) in view.*/\1/p' "$RUN_DIR/joiner.out")
    [ "$id" = 3 ] || fail "$what: the joiner with the key was not admitted as member 3"
    verdict=$("$CHECK" "$RUN_DIR" --messages "$MESSAGES" --members 4 --initial 3 \
        --msg-size "$SIZE" 2>&1) || fail "$what: $verdict"
    RATE=$(sed -n 's/^{"members":3,.*"msgs_per_s":\([0-9.]*\).*/\1/p' "$RUN_DIR/members.out")
    JOIN_MS=$(sed -n 's/^joined as member [0-9]* in view [0-9]*, \([0-9.]*\) ms after asking$/\1/p' \
        "$RUN_DIR/joiner.out")
    if [ -z "$RATE" ] || [ -z "$JOIN_MS" ]; then
        fail "$what: no msgs/s or join time reported"
    fi
    if [ "$mode" = attacked ]; then
        check_attack
    else
        echo "ok: $what: $RATE msgs/s per member, joined in $JOIN_MS ms"
    fi
}

# The attacked run's own checks: the strangers were refused on the key,
# and no connection of the attacker heard more than a nonce.
check_attack() {
    local tried refused json most
    [ ! -e "$RUN_DIR/other.admitted" ] || fail "$what: a process with another key was admitted"
    [ ! -e "$RUN_DIR/keyless.admitted" ] || fail "$what: a process without a key was admitted"
    tried=$(find "$RUN_DIR" -name 'other-*.out' -o -name 'keyless-*.out' | wc -l)
    refused=$(grep -l -e "failed authentication with the group key" \
        -e "during the handshake (it may need a group key)" \
        "$RUN_DIR"/other-*.out "$RUN_DIR"/keyless-*.out 2>/dev/null | wc -l)
    [ "$tried" -gt 0 ] || fail "$what: no stranger tried to join"
    # The last attempt of each may have been cut short by the group's end.
    [ "$refused" -ge $((tried - 2)) ] ||
        fail "$what: $refused of $tried strangers' joins were refused on the key"
    json=$(cat "$RUN_DIR/attack.json")
    most=$(echo "$json" | sed -n 's/.*"most_received_on_one":\([0-9]*\).*/\1/p')
    if [ -z "$most" ] || [ "$most" -gt 32 ]; then
        fail "$what: a stranger's connection was sent more than a nonce: $json"
    fi
    echo "ok: $what: $RATE msgs/s per member, joined in $JOIN_MS ms;" \
        "$tried strangers' joins refused; attack $json"
}

median() {
    sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

RUN_NUMBER=0
for ((round = 1; round <= ROUNDS; round++)); do
    RUN_NUMBER=$round
    for mode in plain attacked; do
        run_once "$mode"
        echo "$RATE" >>"$WORK/$mode.rate"
        echo "$JOIN_MS" >>"$WORK/$mode.join"
    done
done
plain=$(median <"$WORK/plain.rate")
attacked=$(median <"$WORK/attacked.rate")
plain_join=$(median <"$WORK/plain.join")
attacked_join=$(median <"$WORK/attacked.join")
echo "medians of $ROUNDS rounds: plain $plain msgs/s per member, attacked $attacked" \
    "(ratio $(awk -v a="$attacked" -v p="$plain" 'BEGIN { printf "%.2f", a / p }'));" \
    "join $plain_join ms plain, $attacked_join ms attacked"
