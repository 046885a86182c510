#!/bin/sh
# Drives three_members.c, or its Python twin three_members.py, as an operator would: spindle-run -n 3 starts the
# three members; once each has written its ready file (its request/reply
# round and member 0's point-to-point query to member 1 done), spindle-stat, from outside, must show the group's three
# members, and spindle-ctl has member 0 remove member 2; then every member
# must have exited 0 (members 0 and 1 saw the view without member 2 and
# delivered a message in it, member 2 learnt it was removed), each must
# have routed the library's log lines to its own sink, and none of them may
# have reached stderr through the library's default sink.
#
# Usage: three_members.sh CONSUMER [ARG...]
#   CONSUMER  three_members.c built against the installed library, or
#             `python3 three_members.py` (ARG: the script) with the installed
#             package importable; the installed spindle-run, spindle-stat and
#             spindle-ctl are taken from PATH.
# Exit 0 when all of that held, 1 naming what did not.
set -u
[ $# -ge 1 ] || { echo "usage: $0 CONSUMER [ARG...]"; exit 2; }
WORK=$(mktemp -d /tmp/spindle-three-XXXXXX)
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    for f in out err stat; do [ -f "$WORK/$f" ] && sed "s|^|  $f: |" "$WORK/$f"; done
    exit 1
}
# Ports reserved for this script, apart from every other test's: test_ports.sh
# sits beside this script where scripts/check-deb.sh copies both, and in
# tests/ of the source tree.
here=$(dirname "$0")
if [ -f "$here/test_ports.sh" ]; then . "$here/test_ports.sh"; else . "$here/../test_ports.sh"; fi
test_port_block || exit 1
BASE=$TEST_PORT_BASE
GROUP=three-$$
ADMIN=$WORK/admin

spindle-run -n 3 --base-port "$BASE" "$@" "$GROUP" "$ADMIN" "$WORK" \
    >"$WORK/out" 2>"$WORK/err" &
PID=$!
# The members say when they are ready; spindle-run ending first is a failure.
deadline=$(($(date +%s) + 60))
for rank in 0 1 2; do
    while [ ! -f "$WORK/ready-$rank" ]; do
        kill -0 "$PID" 2>/dev/null || { wait "$PID"; PID=""; fail "spindle-run ended before member $rank was ready"; }
        [ "$(date +%s)" -lt "$deadline" ] || fail "member $rank not ready within 60 s"
        sleep 0.1
    done
done

spindle-stat --dir "$ADMIN" "$GROUP" >"$WORK/stat" 2>&1 || fail "spindle-stat --dir $ADMIN $GROUP"
# Each member, in the view of three, having delivered the ten requests and
# the ten replies.
for id in 0 1 2; do
    grep -q "^Group $GROUP, member $id " "$WORK/stat" ||
        fail "spindle-stat does not show member $id of $GROUP"
done
[ "$(grep -c '^View [0-9]*, leader 0, 3 members:$' "$WORK/stat")" -eq 3 ] ||
    fail "spindle-stat does not show all three in a view of three"
[ "$(grep -c '^Messages: .*, 20 delivered;' "$WORK/stat")" -eq 3 ] ||
    fail "spindle-stat does not show 20 messages delivered at each member"
spindle-ctl --dir "$ADMIN" remove "$GROUP/0" 2 >>"$WORK/stat" 2>&1 ||
    fail "spindle-ctl remove $GROUP/0 2 was refused"

wait "$PID"
status=$?
PID=""
[ "$status" -eq 0 ] || fail "spindle-run -n 3 exited $status"
for rank in 0 1 2; do
    grep -q "^\[$rank\] member $rank: ok, [1-9][0-9]* log lines through the sink$" "$WORK/out" ||
        fail "member $rank did not finish ok with lines through its sink"
    grep -q "^\[$rank\] sink: [a-z]* [a-z]*: " "$WORK/out" || fail "member $rank's sink printed no line"
done
grep -q "^\[0\] member 0: view [0-9]* of 2 members without member 2$" "$WORK/out" ||
    fail "member 0 did not report the view without member 2"
grep -q "^\[2\] member 2: removed" "$WORK/out" || fail "member 2 did not report its removal"
grep -q "^\[0\] member 0: member 1 answered the point-to-point query: replies sent 10$" \
    "$WORK/out" || fail "member 0 did not report member 1's answer to its point-to-point query"
if grep -q "spindle\[[0-9]*\]" "$WORK/err"; then
    fail "library log lines reached stderr instead of the sink"
fi
echo "ok: three members ($*) under spindle-run: epoll dispatch, replies from the upcall, their own" \
    "log sinks; spindle-stat showed them and spindle-ctl removed member 2"
