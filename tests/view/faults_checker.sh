#!/bin/sh
# shellcheck disable=SC2086,SC2016 # $ARGS splits on purpose; awk programs are single-quoted
# Self-test of check_traces on crafted traces: it accepts correct sets
# (a member killed in view 0, two killed at once, the leader killed, a
# member killed after a second view change, two subgroups) and rejects each
# kind of violation with the matching message: duplicate, gap, reorder,
# divergent views, partially delivered failed-sender message, killed trace
# not a prefix, view id decrease, missing message, payload mismatch,
# disagreeing final views, an unexplained member, malformed lines; and,
# with joiners that leave and ids given again to later joiners (files
# member-<id>.<view it joined>.*), a departed member that missed, duplicated
# or delivered after it left, and two incarnations of one id mixed up.
# With --mode unordered: it accepts survivors that interleave senders
# differently, move to the next view at different points of a sender's
# stream and hold failed-sender prefixes of different lengths (and rejects
# them as atomic), and rejects a gap, a duplicate (a resend delivered again
# among them), a FIFO violation, a surviving sender's message missing at one
# survivor, a payload mismatch and a joiner that starts where nobody was.
# Usage: faults_checker.sh CHECK_TRACES
set -eu
CHECK=$1
WORK=$(mktemp -d /tmp/spindle-checker-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
M=6
failures=0
cases=0

# line VIEW SUBGROUP SENDER INDEX: one trace line with a fake checksum that
# depends on what the message is.
line() {
    printf '%s %s %s %s 10 %08x\n' "$1" "$2" "$3" "$4" $(($2 * 100000 + $3 * 1000 + $4))
}

# rounds VIEW SUBGROUP FIRST LAST SENDERS...: round-robin delivery order.
rounds() {
    view=$1 sg=$2 first=$3 last=$4
    shift 4
    r=$first
    while [ "$r" -le "$last" ]; do
        for s in "$@"; do line "$view" "$sg" "$s" "$r"; done
        r=$((r + 1))
    done
}

# base DIR: members 0..3, member 3 killed in view 0 after its round 2 was
# delivered by all; survivors finish senders 0..2 in view 1. Member 3's
# trace is the first 7 lines of view 0 and half a line.
base() {
    d=$1
    mkdir -p "$d"
    for m in 0 1 2; do
        { rounds 0 0 0 2 0 1 2 3; rounds 1 0 3 5 0 1 2; } >"$d/member-$m.trace"
        echo "view 1 members 0,1,2" >"$d/member-$m.end"
    done
    rounds 0 0 0 2 0 1 2 3 | head -n 7 >"$d/member-3.trace"
    printf '0 0 3 1 10 000' >>"$d/member-3.trace"
}

# expect_ok NAME DIR ARGS...
expect_ok() {
    name=$1 dir=$2
    shift 2
    cases=$((cases + 1))
    if out=$("$CHECK" "$dir" "$@" 2>&1); then
        echo "ok: accepts $name: $out"
    else
        echo "FAIL: rejected correct traces ($name): $out"
        failures=$((failures + 1))
    fi
}

# expect_exit STATUS NAME WORD DIR ARGS...: must exit STATUS with WORD in
# the message.
expect_exit() {
    status=$1 name=$2 word=$3 dir=$4
    shift 4
    cases=$((cases + 1))
    set +e
    out=$("$CHECK" "$dir" "$@" 2>&1)
    rc=$?
    set -e
    if [ "$rc" -eq "$status" ] && printf '%s' "$out" | grep -q -- "$word"; then
        echo "ok: rejects $name: $out"
    else
        echo "FAIL: $name: want exit $status and '$word', got exit $rc: $out"
        failures=$((failures + 1))
    fi
}

# expect_reject NAME WORD DIR ARGS...: a violation (exit 1) naming WORD.
expect_reject() {
    expect_exit 1 "$@"
}

# mutate NAME: a fresh copy of the base set in $WORK/NAME, path in $d.
mutate() {
    d="$WORK/$1"
    base "$d"
}

# edit FILE AWK-PROGRAM: rewrite FILE through awk.
edit() {
    awk "$2" "$1" >"$1.new"
    mv "$1.new" "$1"
}

ARGS="--messages $M --members 4 --killed 3 --msg-size 10"

# --- correct sets ------------------------------------------------------
mutate good
expect_ok "one member killed in view 0" "$d" $ARGS

d="$WORK/two-killed"
mkdir -p "$d"
for m in 0 1 2; do
    { rounds 0 0 0 1 0 1 2 3 4; rounds 1 0 2 5 0 1 2; } >"$d/member-$m.trace"
    echo "view 1 members 0,1,2" >"$d/member-$m.end"
done
rounds 0 0 0 1 0 1 2 3 4 | head -n 9 >"$d/member-3.trace"
: >"$d/member-4.trace"
expect_ok "two of five killed at once" "$d" --messages $M --members 5 --killed 3,4

d="$WORK/leader"
mkdir -p "$d"
for m in 1 2 3; do
    { rounds 0 0 0 2 0 1 2 3; line 0 0 0 3; rounds 1 0 3 5 1 2 3; } >"$d/member-$m.trace"
    echo "view 1 members 1,2,3" >"$d/member-$m.end"
done
rounds 0 0 0 2 0 1 2 3 >"$d/member-0.trace"
expect_ok "leader killed" "$d" --messages $M --members 4 --killed 0

d="$WORK/later-view"
mkdir -p "$d"
for m in 0 1; do
    { rounds 0 0 0 1 0 1 2 3; rounds 1 0 2 3 0 1 2; rounds 2 0 4 5 0 1; } >"$d/member-$m.trace"
    echo "view 2 members 0,1" >"$d/member-$m.end"
done
{ rounds 0 0 0 1 0 1 2 3; rounds 1 0 2 3 0 1 2; line 2 0 0 4; } >"$d/member-2.trace"
rounds 0 0 0 0 0 1 2 3 | head -n 3 >"$d/member-3.trace"
expect_ok "killed member that went through a view change" "$d" --messages $M --members 4 \
    --killed 2,3

d="$WORK/subgroups"
mkdir -p "$d"
for m in 0 1 2; do
    { rounds 0 0 0 2 0 1 2 3; rounds 0 1 0 1 0 1 2 3; rounds 1 1 2 5 0 1 2; } >"$d/member-$m.trace"
    rounds 1 0 3 5 0 1 2 >>"$d/member-$m.trace"
    echo "view 1 members 0,1,2" >"$d/member-$m.end"
done
rounds 0 0 0 2 0 1 2 3 >"$d/member-3.trace"
expect_ok "two subgroups" "$d" --messages $M --members 4 --killed 3 --subgroups 2

# --- each kind of violation -------------------------------------------
mutate dup
edit "$d/member-1.trace" 'NR == 14 { print } { print }'
expect_reject "a duplicate delivery" "duplicate: subgroup 0 sender 1 index 3" "$d" $ARGS

mutate gap
edit "$d/member-2.trace" 'NR != 14'
expect_reject "a gap in a sender's indexes" "gap: subgroup 0 sender 1 index 4" "$d" $ARGS

mutate reorder
edit "$d/member-1.trace" 'NR == 14 { held = $0; next } { print } NR == 17 { print held }'
expect_reject "a sender's messages reordered" "reorder: subgroup 0 sender 1 index 4" "$d" $ARGS

mutate diverge
edit "$d/member-2.trace" 'NR == 5 { held = $0; next } { print } NR == 6 { print held }'
expect_reject "two survivors ordering a view differently" "member-2.trace:5: diverge: view 0" \
    "$d" $ARGS

mutate diverge-boundary
edit "$d/member-2.trace" 'NR == 13 { sub(/^1 /, "0 ") } { print }'
expect_reject "a message delivered in different views" "diverge: view 0" "$d" $ARGS

mutate partial
edit "$d/member-1.trace" 'NR != 12'
expect_reject "a failed sender's message delivered by only some" \
    "partially delivered: failed sender 3 subgroup 0 index 2" "$d" $ARGS

mutate not-prefix
{ rounds 0 0 0 0 0 1 2; line 0 0 0 1; } >"$d/member-3.trace"
expect_reject "a killed member delivering out of the survivors' order" \
    "member-3.trace:4: not a prefix" "$d" $ARGS

mutate killed-extra
rounds 0 0 0 2 0 1 2 3 >"$d/member-3.trace"
line 0 0 3 3 >>"$d/member-3.trace"
expect_reject "a killed member delivering what survivors did not" "not a prefix: view 0" "$d" $ARGS

mutate killed-went-on
{ rounds 0 0 0 1 0 1 2 3; line 1 0 0 2; } >"$d/member-3.trace"
expect_reject "a killed member that left a view early" "diverge: view 0" "$d" $ARGS

mutate view-order
edit "$d/member-0.trace" 'NR == 14 { sub(/^1 /, "0 ") } { print }'
expect_reject "a view id going back" "view id decreases" "$d" $ARGS

mutate missing
for m in 0 1 2; do edit "$d/member-$m.trace" '$3 != 2 || $4 != 5'; done
expect_reject "a surviving sender's message never delivered" \
    "missing: subgroup 0 sender 2 (in the final view) index 5" "$d" $ARGS

mutate payload
edit "$d/member-1.trace" 'NR == 3 { $6 = "deadbeef" } { print }'
expect_reject "one message with two checksums" "payload differs" "$d" $ARGS

mutate final-view
echo "view 2 members 0,1,2" >"$d/member-2.end"
expect_reject "survivors disagreeing on the final view" "final view disagrees" "$d" $ARGS

mutate final-members
for m in 0 1 2; do echo "view 1 members 0,1,2,3" >"$d/member-$m.end"; done
expect_reject "a final view that lists a killed member" "lists member 3" "$d" $ARGS

mutate unexplained
rm "$d/member-2.end"
expect_reject "a member neither killed nor finished" "member 2 was not killed" "$d" $ARGS

mutate malformed
edit "$d/member-0.trace" 'NR == 2 { print "0 0 1 0 10"; next } { print }'
expect_reject "a malformed line" "member-0.trace:2: malformed" "$d" $ARGS

mutate truncated
printf '1 0 0 6 10 0' >>"$d/member-0.trace"
expect_reject "a survivor's half-written line" "truncated" "$d" $ARGS

mutate out-of-range
edit "$d/member-0.trace" '{ print } END { print "1 0 0 6 10 00000006" }'
expect_reject "an index beyond --messages" "index 6 out of range" "$d" $ARGS

# A joiner (member 4) killed during its first view: with --initial 4 it is
# checked from where the group was when it joined; without, as a member
# that missed everything before; one that skipped its first message is a gap.
JOINER_ARGS="--messages $M --members 5 --killed 3,4 --msg-size 10"
mutate killed-joiner
rounds 1 0 3 5 0 1 2 | head -n 4 >"$d/member-4.trace"
expect_ok "a joiner killed in its first view (--initial)" "$d" $JOINER_ARGS --initial 4
expect_reject "a killed joiner taken for an initial member" "gap" "$d" $JOINER_ARGS
mutate killed-joiner-gap
rounds 1 0 4 5 0 1 2 | head -n 2 >"$d/member-4.trace"
expect_reject "a killed joiner that missed its first view's first message" "gap" "$d" \
    $JOINER_ARGS --initial 4

# reuse DIR: senders 0..2 stream 6 rounds; member 3 joins in view 1,
# delivers round 2 and the first message of round 3, and leaves (view 2
# is without it); id 3 is given again to a joiner of view 3, which stays.
reuse() {
    d=$1
    mkdir -p "$d"
    for m in 0 1 2; do
        { rounds 0 0 0 1 0 1 2; rounds 1 0 2 3 0 1 2; rounds 2 0 4 4 0 1 2; rounds 3 0 5 5 0 1 2; } \
            >"$d/member-$m.trace"
        echo "view 3 members 0,1,2,3" >"$d/member-$m.end"
    done
    rounds 1 0 2 3 0 1 2 | head -n 4 >"$d/member-3.1.trace"
    echo "view 1 members 0,1,2,3 joined 1 left" >"$d/member-3.1.end"
    echo 4242 >"$d/member-3.1.pid" # ignored
    rounds 3 0 5 5 0 1 2 >"$d/member-3.3.trace"
    echo "view 3 members 0,1,2,3 joined 3" >"$d/member-3.3.end"
}
REUSE_ARGS="--messages $M --members 4 --initial 3 --msg-size 10"
d="$WORK/reuse"
reuse "$d"
expect_ok "a joiner that left and a later joiner with its id" "$d" $REUSE_ARGS

d="$WORK/reuse-killed"
reuse "$d"
head -n 2 "$d/member-3.3.trace" >"$d/member-3.3.trace.new"
mv "$d/member-3.3.trace.new" "$d/member-3.3.trace"
rm "$d/member-3.3.end"
for m in 0 1 2; do echo "view 4 members 0,1,2" >"$d/member-$m.end"; done
expect_ok "the second incarnation of an id killed (--killed 3.3)" "$d" $REUSE_ARGS --killed 3.3
expect_ok "the second incarnation of an id killed (--killed 3: the last one)" "$d" \
    $REUSE_ARGS --killed 3
expect_reject "--killed naming the incarnation that left" "was not killed" "$d" \
    $REUSE_ARGS --killed 3.1

d="$WORK/leave-later"
reuse "$d"
rounds 1 0 2 3 0 1 2 >"$d/member-3.1.trace"
line 2 0 0 4 >>"$d/member-3.1.trace"
echo "view 2 members 0,1,2,3 joined 1 left" >"$d/member-3.1.end"
expect_ok "a departed member that went through a view" "$d" $REUSE_ARGS

d="$WORK/left-missed"
reuse "$d"
edit "$d/member-3.1.trace" 'NR != 2'
expect_reject "a departed member that missed a message" "member-3.1.trace:2: not a prefix: view 1" \
    "$d" $REUSE_ARGS

d="$WORK/left-missed-first"
reuse "$d"
edit "$d/member-3.1.trace" 'NR != 1'
expect_reject "a departed member that missed its first view's first message" \
    "member-3.1.trace:3: gap: subgroup 0 sender 0 index 3 delivered but index 2 never was" "$d" \
    $REUSE_ARGS

d="$WORK/left-missed-end"
reuse "$d"
rounds 1 0 2 3 0 1 2 | head -n 5 >"$d/member-3.1.trace"
line 2 0 0 4 >>"$d/member-3.1.trace"
echo "view 2 members 0,1,2,3 joined 1 left" >"$d/member-3.1.end"
expect_reject "a departed member that missed the end of a view it went past" \
    "member-3.1.trace: diverge: view 1" "$d" $REUSE_ARGS

d="$WORK/left-dup"
reuse "$d"
edit "$d/member-3.1.trace" '{ print } NR == 2 { print }'
expect_reject "a departed member that delivered a message twice" \
    "member-3.1.trace:3: duplicate: subgroup 0 sender 1 index 2" "$d" $REUSE_ARGS

d="$WORK/left-after"
reuse "$d"
line 2 0 0 4 >>"$d/member-3.1.trace"
expect_reject "a departed member that delivered after it left" \
    "member-3.1.trace:5: delivered in view 2 after it left" "$d" $REUSE_ARGS

d="$WORK/left-list"
reuse "$d"
echo "view 1 members 0,1,3 joined 1 left" >"$d/member-3.1.end"
expect_reject "a departed member's view without a survivor" "view 1 does not list member 2" \
    "$d" $REUSE_ARGS

d="$WORK/mixed-overlap"
reuse "$d"
echo "view 3 members 0,1,2,3 joined 1 left" >"$d/member-3.1.end"
expect_reject "two incarnations of one id in one view" \
    "mixed up: two incarnations of member 3 overlap" "$d" $REUSE_ARGS

d="$WORK/mixed-end"
reuse "$d"
echo "view 3 members 0,1,2,3 joined 1" >"$d/member-3.3.end"
expect_reject "an incarnation's .end naming another's join" \
    "mixed up: member-3.3 says joined 1, but its name says incarnation 3" "$d" $REUSE_ARGS

d="$WORK/mixed-swap"
reuse "$d"
mv "$d/member-3.1.trace" "$d/held"
mv "$d/member-3.3.trace" "$d/member-3.1.trace"
mv "$d/held" "$d/member-3.3.trace"
expect_reject "the traces of two incarnations swapped" \
    "member-3.1.trace:1: delivered in view 3 after it left" "$d" $REUSE_ARGS

d="$WORK/mixed-two-survivors"
reuse "$d"
echo "view 3 members 0,1,2,3 joined 1" >"$d/member-3.1.end"
expect_reject "two incarnations of one id both finishing" \
    "mixed up: two incarnations of member 3 overlap" "$d" $REUSE_ARGS

d="$WORK/legacy-names"
reuse "$d"
mv "$d/member-3.3.trace" "$d/member-3.trace"
mv "$d/member-3.3.end" "$d/member-3.end"
expect_ok "a joiner's files without incarnation (older spindle-bench) beside an earlier one" \
    "$d" $REUSE_ARGS

# --- unordered subgroups (--mode unordered) ----------------------------
# senders VIEW SUBGROUP SENDER FIRST LAST [SENDER FIRST LAST]...: each
# sender's run of indexes in turn (a member's own interleaving).
senders() {
    view=$1 sg=$2
    shift 2
    while [ $# -ge 3 ]; do
        i=$2
        while [ "$i" -le "$3" ]; do
            line "$view" "$sg" "$1" "$i"
            i=$((i + 1))
        done
        shift 3
    done
}

# unordered DIR: members 0..3 all send, member 3 killed in view 0. Each
# survivor interleaves the senders its own way and moves to view 1 at its
# own point of each sender's stream (what one delivered in view 0 another
# gets in view 1, as a resend); of the failed sender 3 they hold prefixes
# of different lengths (0..2, 0..3, 0..1); member 3 got further in its own
# stream than anyone.
unordered() {
    d=$1
    mkdir -p "$d"
    { senders 0 0 0 0 2 1 0 2 3 0 2 2 0 1; senders 1 0 2 2 5 0 3 5 1 3 5; } >"$d/member-0.trace"
    { senders 0 0 1 0 1 0 0 3 3 0 3 2 0 2; senders 1 0 1 2 5 0 4 5 2 3 5; } >"$d/member-1.trace"
    { senders 0 0 2 0 3 3 0 1 0 0 1 1 0 3; senders 1 0 0 2 5 1 4 5 2 4 5; } >"$d/member-2.trace"
    for m in 0 1 2; do echo "view 1 members 0,1,2" >"$d/member-$m.end"; done
    senders 0 0 3 0 4 0 0 1 1 0 0 >"$d/member-3.trace"
    printf '0 0 2 0 10 0' >>"$d/member-3.trace"
}
UARGS="--messages $M --members 4 --killed 3 --msg-size 10 --mode unordered"
umutate() {
    d="$WORK/$1"
    unordered "$d"
}

umutate u-good
expect_ok "unordered: interleavings, view boundaries and failed-sender prefixes differ" "$d" \
    $UARGS
expect_reject "the same unordered traces checked as atomic" \
    "partially delivered: failed sender 3 subgroup 0 index 2" "$d" $ARGS

umutate u-gap
edit "$d/member-1.trace" '$3 != 0 || $4 != 2'
expect_reject "unordered: a gap in a sender's indexes" \
    "member-1.trace:5: gap: subgroup 0 sender 0 index 3 delivered but index 2 never was" "$d" \
    $UARGS

umutate u-dup
edit "$d/member-2.trace" '{ print } NR == 3 { print }'
expect_reject "unordered: a duplicate delivery" \
    "member-2.trace:4: duplicate: subgroup 0 sender 2 index 2 already delivered at line 3" \
    "$d" $UARGS

umutate u-dup-resend
edit "$d/member-0.trace" '{ print } NR == 11 { print "1 0 2 1 10 " $6 }'
expect_reject "unordered: a resend delivered again in the next view" \
    "member-0.trace:12: duplicate: subgroup 0 sender 2 index 1 already delivered at line 11" \
    "$d" $UARGS

umutate u-fifo
edit "$d/member-0.trace" 'NR == 4 { held = $0; next } { print } NR == 5 { print held }'
expect_reject "unordered: one sender's messages out of FIFO order" \
    "member-0.trace:4: reorder: subgroup 0 sender 1 index 1 delivered before index 0" "$d" \
    $UARGS

umutate u-missing
edit "$d/member-2.trace" '$3 != 2 || $4 != 5'
expect_reject "unordered: a surviving sender's message missing at one survivor" \
    "member-2.trace: missing: subgroup 0 sender 2 (in the final view) index 5" "$d" $UARGS

umutate u-payload
edit "$d/member-1.trace" 'NR == 5 { $6 = "deadbeef" } { print }'
expect_reject "unordered: one message with two checksums" "payload differs" "$d" $UARGS

# A joiner (member 4) of view 1 starts where the member that handed it the
# state was (member 0: senders 0..2 at 3, 3, 2); one that starts where
# nobody was (sender 1 at 2, as member 1, but sender 0 at 3, as member 0)
# missed or repeats messages.
UJOIN_ARGS="--messages $M --members 5 --initial 4 --killed 3 --msg-size 10 --mode unordered"
umutate u-joiner
for m in 0 1 2; do echo "view 1 members 0,1,2,4" >"$d/member-$m.end"; done
senders 1 0 0 3 5 1 3 5 2 2 5 >"$d/member-4.1.trace"
echo "view 1 members 0,1,2,4 joined 1" >"$d/member-4.1.end"
expect_ok "unordered: a joiner starting where the state's member was" "$d" $UJOIN_ARGS
senders 1 0 0 3 5 1 2 5 2 2 5 >"$d/member-4.1.trace"
expect_reject "unordered: a joiner starting where no member was" \
    "member-4.1.trace:1: joiner of view 1 starts" "$d" $UJOIN_ARGS

mutate usage
cases=$((cases + 1))
set +e
"$CHECK" "$d" --members 4 >/dev/null 2>&1
rc=$?
set -e
if [ "$rc" -eq 2 ]; then
    echo "ok: usage error exits 2"
else
    echo "FAIL: missing --messages: want exit 2, got $rc"
    failures=$((failures + 1))
fi
expect_exit 2 "a bad --mode as a usage error" "--mode 'total' must be atomic or unordered" "$d" \
    $ARGS --mode total

echo "$cases cases, $failures failed"
[ "$failures" -eq 0 ]
