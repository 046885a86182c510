#!/bin/sh
# spindle-run: three copies of spindle-hello form a group from their
# environment alone and each delivers everyone's messages; output lines
# carry "[rank] "; a copy that exits 3 or dies of a signal is named with
# its status and makes spindle-run fail; SIGTERM reaches every copy.
# Usage: run.sh SPINDLE_RUN SPINDLE_HELLO
# shellcheck disable=SC2016 # the copies' shell expands their variables
set -u
RUN=$1
HELLO=$2
WORK=$(mktemp -d /tmp/spindle-run-XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
# Ports reserved for this script, apart from every other test's.
. "$(dirname "$0")/../test_ports.sh"
test_port_block || exit 1
BASE=$TEST_PORT_BASE

fail() {
    echo "FAIL: $*"
    for f in "$WORK"/out "$WORK"/err; do [ -f "$f" ] && sed "s|^|  $(basename "$f"): |" "$f"; done
    exit 1
}

# has FILE TEXT: the file holds a line that is exactly TEXT.
has() {
    grep -F -x -q -- "$2" "$1" || fail "$(basename "$1") has no line '$2'"
}

# A group of three from the environment alone.
"$RUN" -n 3 --base-port "$BASE" "$HELLO" --messages 25 >"$WORK/out" 2>"$WORK/err" ||
    fail "spindle-run -n 3 spindle-hello exited $?"
for r in 0 1 2; do
    has "$WORK/out" "[$r] member $r of 3: delivered all 75 messages of 3 senders"
    has "$WORK/err" "spindle-run: rank $r: exit 0"
done
[ "$(wc -l <"$WORK/out")" -eq 3 ] || fail "want 3 lines of output"
echo "ok: 3 members from the environment, each delivered all 75 messages"

# A configuration for the rest: its subgroup has ranks 0 and 1, rank 1 sends.
printf '[group]\nname = run-%s\n[member.0]\n[member.1]\n[member.2]\n[subgroup.0]\nmembers = 0, 1\nsenders = 1\nwindow_size = 4\n' \
    "$$" >"$WORK/group.ini"
"$RUN" -n 3 --base-port "$BASE" "$HELLO" --messages 9 --config "$WORK/group.ini" \
    >"$WORK/out" 2>"$WORK/err" || fail "spindle-run with --config exited $?"
has "$WORK/out" "[0] member 0 of 3: delivered all 9 messages of 1 senders"
has "$WORK/out" "[1] member 1 of 3: delivered all 9 messages of 1 senders"
has "$WORK/out" "[2] member 2 of 3: not a member of subgroup 0"
echo "ok: the configuration's subgroup, by rank"

# The environment each copy gets, lines split across writes, a failure named.
"$RUN" -n 3 --base-port "$BASE" sh -c '
    printf "rank %s of %s, local %s, port %s\n" "$SPINDLE_RANK" "$SPINDLE_SIZE" \
        "$SPINDLE_LOCAL_RANK" "$SPINDLE_BASE_PORT"
    printf "half a "; printf "line\n"; printf "no newline"
    echo "to stderr" >&2
    [ "$SPINDLE_RANK" = 1 ] && exit 3
    exit 0' >"$WORK/out" 2>"$WORK/err"
rc=$?
[ "$rc" -eq 1 ] || fail "a copy exited 3, but spindle-run exited $rc (want 1)"
for r in 0 1 2; do
    has "$WORK/out" "[$r] rank $r of 3, local $r, port $BASE"
    has "$WORK/out" "[$r] half a line"
    has "$WORK/out" "[$r] no newline"
    has "$WORK/err" "[$r] to stderr"
done
has "$WORK/err" "spindle-run: rank 0: exit 0"
has "$WORK/err" "spindle-run: rank 1: exit 3"
has "$WORK/err" "spindle-run: rank 2: exit 0"
echo "ok: prefixed lines, each copy's environment, rank 1's exit 3 named"

# A copy killed by a signal, and a program that does not exist.
"$RUN" -n 2 sh -c '[ "$SPINDLE_RANK" = 0 ] && kill -9 $$; exit 0' >"$WORK/out" 2>"$WORK/err" &&
    fail "a copy was killed, but spindle-run exited 0"
has "$WORK/err" "spindle-run: rank 0: signal 9 (Killed)"
has "$WORK/err" "spindle-run: rank 1: exit 0"
"$RUN" -n 1 "$WORK/missing" >"$WORK/out" 2>"$WORK/err" && fail "a missing program, but exit 0"
has "$WORK/err" "[0] spindle-run: $WORK/missing: No such file or directory"
has "$WORK/err" "spindle-run: rank 0: exit 127"
# The copies get SIGPIPE's default (spindle-run ignores it for itself):
# yes dies quietly when head is done, instead of reporting a broken pipe.
"$RUN" -n 1 sh -c 'yes | head -n 1' >"$WORK/out" 2>"$WORK/err" || fail "yes | head failed"
has "$WORK/out" "[0] y"
grep -q -i "broken pipe" "$WORK/err" && fail "the copy inherited an ignored SIGPIPE"
echo "ok: a signal and a missing program are named; SIGPIPE is the default"

# Bad command lines.
"$RUN" -n 0 true 2>"$WORK/err" && fail "-n 0 accepted"
has "$WORK/err" "spindle-run: -n 0: must be a number 1..64"
"$RUN" -n 2 --base-port 65535 true 2>"$WORK/err" && fail "--base-port 65535 -n 2 accepted"
has "$WORK/err" "spindle-run: --base-port 65535: rank 1 would need port 65536, above 65535"
echo "ok: bad command lines are named"

# SIGTERM to spindle-run reaches both copies, which say so and exit 7.
"$RUN" -n 2 sh -c 'trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.05; done' \
    >"$WORK/out" 2>"$WORK/err" &
PID=$!
tries=0
until [ "$(grep -c ready "$WORK/out")" -eq 2 ]; do
    tries=$((tries + 1))
    [ "$tries" -lt 600 ] || fail "the copies never said ready"
    sleep 0.05
done
kill -TERM "$PID"
wait "$PID"
rc=$?
PID=""
[ "$rc" -eq 1 ] || fail "after SIGTERM spindle-run exited $rc (want 1)"
for r in 0 1; do
    has "$WORK/out" "[$r] got TERM"
    has "$WORK/err" "spindle-run: rank $r: exit 7"
done
echo "ok: SIGTERM forwarded to every copy"
