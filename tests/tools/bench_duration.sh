#!/bin/sh
# spindle-bench --duration: bad values of --duration and --warmup, and
# combinations that cannot mean anything, end the run before it starts
# (exit 2) with one message naming the flag; a timed run stops on its own,
# prints a progress line per second and reports a nonzero count over the
# measured interval; [bench] duration_ms in --config does the same, and
# the command line wins over it. A joiner's summary names the members and
# senders of the view it was in and the time from its join to its end.
# Usage: bench_duration.sh SPINDLE_BENCH
set -u
BENCH=$1
WORK=$(mktemp -d /tmp/spindle-duration-XXXXXX)
PIDS=""
cleanup() {
    for pid in $PIDS; do
        kill "$pid" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
# Ports from a block no other test is handed (tests/test_ports.sh).
. "$(dirname "$0")/../test_ports.sh"
test_port_block || exit 1
BASE=$TEST_PORT_BASE

fail() {
    echo "FAIL: $*"
    exit 1
}

# refused TEXT ARGS...: exit 2 and TEXT in the one "spindle-bench:" line.
refused() {
    text=$1
    shift
    "$BENCH" "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "spindle-bench $*: exit $rc, want 2"; }
    [ "$(grep -c '^spindle-bench:' "$WORK/err")" -eq 1 ] || {
        cat "$WORK/err"
        fail "spindle-bench $*: want one error line"
    }
    grep -F -q -- "$text" "$WORK/err" || { cat "$WORK/err"; fail "$*: error does not say '$text'"; }
    echo "ok: $* -> $(grep '^spindle-bench:' "$WORK/err")"
}

# field JSON_LINE KEY: the number after "KEY":
field() {
    echo "$1" | sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p"
}

# above VALUE MIN: VALUE is a number greater than MIN.
above() {
    [ -n "$1" ] && awk -v v="$1" -v m="$2" 'BEGIN { exit !(v + 0 > m + 0) }'
}

refused "--duration '0' must be a number of seconds in 0.001..86400" --local 2 --duration 0
refused "--duration 'soon' must be a number of seconds" --local 2 --duration soon
refused "--duration '-3' must be a number of seconds" --local 2 --duration -3
refused "--duration '1s' must be a number of seconds" --local 2 --duration 1s
refused "--duration 'inf' must be a number of seconds" --local 2 --duration inf
refused "--warmup '-1' must be a number of seconds in 0..3600" --local 2 --duration 1 --warmup -1
refused "--warmup goes with --duration" --local 2 --warmup 1
refused "--duration and --messages cannot be combined" --local 2 --duration 1 --messages 10
refused "--duration cannot be combined with --tolerate-failures" --local 2 --duration 1 \
    --tolerate-failures

# A timed run: 0.3 s warm-up, 1 s measured. It must stop by itself well
# within the bound that timeout(1) sets. The measured seconds are those
# between the moments the member read its delivered count at the two edges;
# the second edge is 1 s after the first, so at least 1 s, and more by how
# long the sender was blocked when it passed the second.
timeout 60 "$BENCH" --local 2 --duration 1 --warmup 0.3 --msg-size 256 >"$WORK/out" 2>"$WORK/err"
rc=$?
[ "$rc" -eq 0 ] || { cat "$WORK/out" "$WORK/err"; fail "--local 2 --duration 1: exit $rc"; }
json=$(tail -n 1 "$WORK/out")
delivered=$(field "$json" messages_delivered)
total=$(field "$json" messages_delivered_total)
seconds=$(field "$json" seconds)
above "$delivered" 0 || fail "a timed run delivered '$delivered' messages: $json"
above "$total" "$((delivered - 1))" || fail "total $total is below the measured $delivered"
[ "$(field "$json" duration_s)" = "1.000" ] || fail "duration_s is not 1.000: $json"
[ "$(field "$json" warmup_s)" = "0.300" ] || fail "warmup_s is not 0.300: $json"
if ! above "$seconds" 0.9995 || above "$seconds" 1.5; then
    fail "measured $seconds s, want 1 s: $json"
fi
grep -q '^progress: member 0 at 1 s: [0-9]* msgs/s, [0-9.]* MB/s delivered, 2 members$' \
    "$WORK/err" || { cat "$WORK/err"; fail "no progress line for member 0 at 1 s"; }
echo "ok: --duration 1 stopped by itself: $delivered messages in $seconds s"

# [bench] duration_ms: two members over TCP bootstrap; the file's 600 ms,
# then the flag's 0.4 s over it, then --messages over it.
cat >"$WORK/timed.ini" <<EOF
[group]
name = duration-$$
transport = shm

[member.0]
host = 127.0.0.1
port = $BASE

[member.1]
host = 127.0.0.1
port = $((BASE + 1))

[bench]
messages = 100
message_size = 64
duration_ms = 600
EOF
pair() { # expected duration_s, expected messages_per_sender, flags...
    want_duration=$1 want_messages=$2
    shift 2
    timeout 60 "$BENCH" --config "$WORK/timed.ini" --id 0 "$@" >"$WORK/m0" 2>&1 &
    m0=$!
    PIDS="$m0"
    timeout 60 "$BENCH" --config "$WORK/timed.ini" --id 1 "$@" >"$WORK/m1" 2>&1 ||
        { cat "$WORK/m1"; fail "member 1 of timed.ini $*"; }
    wait "$m0" || { cat "$WORK/m0"; fail "member 0 of timed.ini $*"; }
    PIDS=""
    for m in 0 1; do
        json=$(tail -n 1 "$WORK/m$m")
        [ "$(field "$json" duration_s)" = "$want_duration" ] ||
            fail "member $m, timed.ini $*: duration_s is not $want_duration: $json"
        [ "$(field "$json" messages_per_sender)" = "$want_messages" ] ||
            fail "member $m, timed.ini $*: messages_per_sender is not $want_messages: $json"
        above "$(field "$json" messages_delivered)" 0 || fail "member $m delivered nothing: $json"
    done
    echo "ok: timed.ini $*: duration_s $want_duration on both members"
}
pair 0.600 0 --warmup 0.2
pair 0.400 0 --duration 0.4 --warmup 0
pair 0.000 300 --messages 300
refused "--duration and --messages cannot be combined" --config "$WORK/timed.ini" --id 0 \
    --duration 1 --messages 5

# A joiner's summary: the 4 members and 3 senders of the view it joined,
# and the seconds from its join to the end of the stream (at 2000 msgs/s
# per sender, 4000 messages last 2 s; it joins within the first second).
timeout 60 "$BENCH" --local 3 --control-port "$((BASE + 2))" --tolerate-failures --messages 4000 \
    --rate 2000 --msg-size 64 >"$WORK/members" 2>&1 &
PIDS=$!
timeout 60 "$BENCH" --join "127.0.0.1:$((BASE + 2))" --listen "127.0.0.1:$((BASE + 9))" \
    --tolerate-failures --messages 4000 --rate 2000 --msg-size 64 >"$WORK/joiner" 2>&1 ||
    { cat "$WORK/joiner"; fail "the joiner failed"; }
wait "$PIDS" || { cat "$WORK/members"; fail "the members failed"; }
PIDS=""
json=$(tail -n 1 "$WORK/joiner")
if [ "$(field "$json" members)" != 4 ] || [ "$(field "$json" senders)" != 3 ]; then
    fail "the joiner does not report the 4 members and 3 senders of its view: $json"
fi
above "$(field "$json" seconds)" 0.2 || fail "the joiner's time is not from its join: $json"
grep -q "joiner: member 3 in views 1\.\.1 of 4 to 4 members" "$WORK/joiner" ||
    { cat "$WORK/joiner"; fail "the joiner's summary does not name its view"; }
echo "ok: the joiner reports its view: $(grep "^  delivered" "$WORK/joiner")"
