#!/bin/sh
# spindle-bench --config: every mistake ends the run with one message that
# names the culprit, and the right exit status (2: bad file or flags before
# anything runs; 1: the member failed). Covers a malformed file, a missing
# file, an --id outside the file, a message size above max_payload, an
# unknown libfabric provider, a port already in use and an unreachable
# member. Then a well-formed file runs a 2-member group to completion.
# Usage: bench_config_errors.sh SPINDLE_BENCH
set -u
BENCH=$1
WORK=$(mktemp -d /tmp/spindle-cfgerr-XXXXXX)
HOLDER=""
cleanup() {
    [ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null
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

# expect STATUS TEXT ARGS...: runs the bench, wants exit STATUS, exactly one
# "spindle-bench:" line on stderr, and TEXT in it.
expect() {
    want_rc=$1 text=$2
    shift 2
    "$BENCH" "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    [ "$rc" -eq "$want_rc" ] || {
        cat "$WORK/err"
        fail "spindle-bench $*: exit $rc, want $want_rc"
    }
    lines=$(grep -c '^spindle-bench:' "$WORK/err")
    [ "$lines" -eq 1 ] || {
        cat "$WORK/err"
        fail "spindle-bench $*: $lines error lines, want one"
    }
    grep -F -q -- "$text" "$WORK/err" || {
        cat "$WORK/err"
        fail "spindle-bench $*: error does not say '$text'"
    }
    echo "ok: $* -> $(grep '^spindle-bench:' "$WORK/err")"
}

write_config() { # file provider port0 port1
    cat >"$1" <<EOF
[group]
name = cfgerr-$$
transport = fabric
provider = $2
failure_timeout_ms = 2000

[member.0]
host = 127.0.0.1
port = $3

[member.1]
host = 127.0.0.1
port = $4

[subgroup.0]
members = 0, 1
window_size = 20
max_payload = 256

[bench]
messages = 200
message_size = 64
EOF
}

GOOD="$WORK/good.ini"
write_config "$GOOD" tcp "$BASE" $((BASE + 1))

# Malformed: an unknown key, a value out of range, a line without '='.
printf '[group]\ntransport = fabric\ncolour = red\n' >"$WORK/key.ini"
expect 2 "key.ini:3: colour = red: unknown key in [group]" --config "$WORK/key.ini" --id 0
sed 's/window_size = 20/window_size = 0/' "$GOOD" >"$WORK/range.ini"
expect 2 "range.ini:17: window_size = 0: must be between 1 and 100000" \
    --config "$WORK/range.ini" --id 0
printf '[member.0]\nhost 127.0.0.1\n' >"$WORK/noeq.ini"
expect 2 "noeq.ini:2" --config "$WORK/noeq.ini" --id 0
expect 2 "$WORK/missing.ini" --config "$WORK/missing.ini" --id 0

# Combinations the file rules out.
expect 2 "--id 5 is not a member (the file defines members 0..1)" --config "$GOOD" --id 5
expect 2 "message size 512" --config "$GOOD" --id 0 --msg-size 512
expect 2 "--subgroups cannot be combined with --config" --config "$GOOD" --id 0 --subgroups 2

# Unknown provider: named, with the ones that exist.
write_config "$WORK/pigeon.ini" carrier-pigeon "$BASE" $((BASE + 1))
expect 1 "fabric provider 'carrier-pigeon' not found" --config "$WORK/pigeon.ini" --id 0
grep -q "tcp" "$WORK/err" || fail "the unknown-provider error does not list tcp"

# Port in use: member 0 holds its port while it waits for member 1; a second
# member 0 must be told the port is taken.
"$BENCH" --config "$GOOD" --id 0 --timeout 30 >"$WORK/holder.out" 2>&1 &
HOLDER=$!
tries=0
until ss -ltn 2>/dev/null | grep -q "127.0.0.1:$BASE "; do
    tries=$((tries + 1))
    [ "$tries" -lt 500 ] || fail "member 0 never listened on 127.0.0.1:$BASE"
    kill -0 "$HOLDER" 2>/dev/null || { cat "$WORK/holder.out"; fail "member 0 exited early"; }
    sleep 0.02
done
expect 1 "127.0.0.1:$BASE is already in use" --config "$GOOD" --id 0
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null
HOLDER=""

# Unreachable: member 1 alone, nobody at member 0's address.
expect 1 "member 0 at 127.0.0.1:$BASE is unreachable" --config "$GOOD" --id 1 --timeout 2

# The good file runs to completion, flags overriding the workload.
"$BENCH" --config "$GOOD" --id 0 --messages 300 --trace "$WORK" >"$WORK/m0" 2>&1 &
M0=$!
"$BENCH" --config "$GOOD" --id 1 --messages 300 --trace "$WORK" >"$WORK/m1" 2>&1 ||
    { cat "$WORK/m1"; fail "member 1 of the good file failed"; }
wait "$M0" || { cat "$WORK/m0"; fail "member 0 of the good file failed"; }
for m in 0 1; do
    lines=$(wc -l <"$WORK/member-$m.trace")
    [ "$lines" -eq 600 ] || fail "member $m delivered $lines messages, want 600 (--messages 300)"
done
cmp -s "$WORK/member-0.trace" "$WORK/member-1.trace" || fail "the two traces differ"
echo "ok: the good file runs: 2 members, 600 identical deliveries each"
