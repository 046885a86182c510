#!/bin/bash
# Three hosts for real: three network namespaces, each with its own veth
# pair into one bridge and its own 10.x address. A config file names the
# three members (fabric, tcp provider, one member per namespace); each
# namespace runs `spindle-bench --config FILE --id N --trace DIR` through
# `ip netns exec`. Passes when every member exits 0, the three traces are
# identical and complete (3 senders x MESSAGES lines, per-sender indexes in
# order, the right length), and the traffic crossed the veths. Runs for
# 128 B and 10 KB messages.
#
# Needs root and iproute2; without them it FAILS and says why (it never
# skips). Every name carries the PID, so parallel runs do not collide, and
# the namespaces, veths and bridge are removed on any exit.
#
# Usage: netns_hosts.sh SPINDLE_BENCH [MESSAGES]
set -u
BENCH=$1
MESSAGES=${2:-1000}
SIZES="128 10240"
TAG=$$
BRIDGE="spbr$TAG"
# A 10.x /24 picked from the PID (namespaces have their own stacks; this only
# keeps captures of parallel runs apart).
NET="10.$((100 + TAG % 100)).$((TAG / 100 % 250))"
WORK=""

fail() {
    echo "FAIL: $*"
    exit 1
}

ns() { echo "spindle-$TAG-$1"; }
veth_host() { echo "sp${TAG}h$1"; }
veth_ns() { echo "sp${TAG}n$1"; }

# shellcheck disable=SC2317 # called from the trap
cleanup() {
    for i in 0 1 2; do
        if ip netns list 2>/dev/null | grep -qw "$(ns "$i")"; then
            # Only our own members run there; end them before the namespace.
            for pid in $(ip netns pids "$(ns "$i")" 2>/dev/null); do
                kill -9 "$pid" 2>/dev/null
            done
            ip netns del "$(ns "$i")" 2>/dev/null
        fi
        ip link del "$(veth_host "$i")" 2>/dev/null
    done
    ip link del "$BRIDGE" 2>/dev/null
    [ -n "$WORK" ] && rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

[ -x "$BENCH" ] || fail "spindle-bench '$BENCH' is not executable"
[ "$EUID" -eq 0 ] ||
    fail "network namespaces need root (running as uid $EUID); run this test as root"
command -v ip >/dev/null 2>&1 || fail "the ip tool is missing (install iproute2)"

run() { # command... ; fails the test naming the command and its error
    local out
    if ! out=$("$@" 2>&1); then
        fail "cannot set up the namespaces: '$*': $out"
    fi
}

WORK=$(mktemp -d /tmp/spindle-netns-XXXXXX) || fail "mktemp"
run ip link add "$BRIDGE" type bridge
run ip link set "$BRIDGE" up
for i in 0 1 2; do
    run ip netns add "$(ns "$i")"
    run ip link add "$(veth_host "$i")" type veth peer name "$(veth_ns "$i")"
    run ip link set "$(veth_ns "$i")" netns "$(ns "$i")"
    run ip link set "$(veth_host "$i")" master "$BRIDGE"
    run ip link set "$(veth_host "$i")" up
    run ip netns exec "$(ns "$i")" ip link set lo up
    run ip netns exec "$(ns "$i")" ip addr add "$NET.$((i + 1))/24" dev "$(veth_ns "$i")"
    run ip netns exec "$(ns "$i")" ip link set "$(veth_ns "$i")" up
done

CONFIG="$WORK/hosts.ini"
{
    printf '[group]\nname = netns-%s\ntransport = fabric\nprovider = tcp\n' "$TAG"
    printf 'failure_timeout_ms = 5000\n\n'
    for i in 0 1 2; do
        printf '[member.%d]\nhost = %s.%d\nport = %d\n\n' "$i" "$NET" $((i + 1)) $((7400 + i))
    done
    printf '[subgroup.0]\nmembers = 0, 1, 2\nwindow_size = 100\nmax_payload = 10240\n'
    printf 'mode = atomic\n\n[bench]\nmessages = %d\nmessage_size = 128\n' "$MESSAGES"
} >"$CONFIG"

rx_bytes() { cat "/sys/class/net/$(veth_host "$1")/statistics/rx_bytes"; }

check_traces() { # dir size
    local dir=$1 size=$2 ref="" f lines want=$((3 * MESSAGES))
    for i in 0 1 2; do
        f="$dir/member-$i.trace"
        [ -s "$f" ] || fail "$size B: $f is missing or empty"
        lines=$(wc -l <"$f")
        [ "$lines" -eq "$want" ] || fail "$size B: $f has $lines deliveries, want $want"
        awk -v size="$size" -v msgs="$MESSAGES" '
            $1 != 0 || $2 != 0 || $5 != size { print "bad line " NR ": " $0; exit 1 }
            { if ($4 != next_index[$3]) { print "sender " $3 " index " $4 " out of order"; exit 1 }
              next_index[$3]++ }
            END { for (s = 0; s < 3; s++) if (next_index[s] != msgs) {
                      print "sender " s " delivered " next_index[s] + 0 " of " msgs; exit 1 } }' \
            "$f" || fail "$size B: $f is not a complete atomic trace"
        if [ -z "$ref" ]; then
            ref=$f
        elif ! cmp -s "$ref" "$f"; then
            diff "$ref" "$f" | head -5
            fail "$size B: $f differs from $ref"
        fi
    done
}

for size in $SIZES; do
    dir="$WORK/trace-$size"
    mkdir -p "$dir"
    declare -a before pids
    for i in 0 1 2; do
        before[i]=$(rx_bytes "$i")
    done
    for i in 0 1 2; do
        ip netns exec "$(ns "$i")" "$BENCH" --config "$CONFIG" --id "$i" --msg-size "$size" \
            --trace "$dir" --timeout 60 >"$dir/out-$i" 2>&1 &
        pids[i]=$!
    done
    failed=""
    for i in 0 1 2; do
        if ! wait "${pids[i]}"; then
            failed="$failed $i"
        fi
    done
    if [ -n "$failed" ]; then
        for i in 0 1 2; do
            echo "--- member $i (namespace $(ns "$i"), $NET.$((i + 1))):"
            cat "$dir/out-$i"
        done
        fail "$size B: members$failed exited non-zero"
    fi
    check_traces "$dir" "$size"
    # Each member sent its messages to two peers through its own veth.
    for i in 0 1 2; do
        sent=$(($(rx_bytes "$i") - before[i]))
        [ "$sent" -ge $((2 * MESSAGES * size)) ] ||
            fail "$size B: member $i put only $sent bytes on its veth, want >= $((2 * MESSAGES * size))"
    done
    grep -h "delivered" "$dir/out-0" | head -1
    echo "ok: $size B: 3 namespaces ($NET.1-3), identical traces of $((3 * MESSAGES)) deliveries"
done
exit 0
