#!/bin/sh
# spindle-kv: a logged joiner of a service of two shards (docs/KV.md
# "Joining a shard"). Six logged replicas (--local 6 --replicas 3
# --log-dir: members 0-2 serve shard 0, 3-5 shard 1); a replica with a log
# directory joins shard 1 through member 0, the view's leader, which serves
# shard 0 and whose log holds none of shard 1's messages. The joiner must
# take shard 1's state from a replica of shard 1, hold shard 1's keys with
# their values and none of shard 0's, agree with shard 1's replicas on
# DEBUG DIGEST and have written the state into its log as a snapshot. It is
# then killed with SIGKILL, shard 1 takes writes without it, and it is
# started again with the same command and log directory: it replays its
# log, takes what it missed, and agrees again.
# Usage: kv_join_logged_shards.sh SPINDLE_KV
set -u
kv=${1:?usage: kv_join_logged_shards.sh SPINDLE_KV}
python=/usr/bin/python3
. "$(dirname "$0")/kv_lib.sh"
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "kv_join_logged_shards: redis-cli missing (sh scripts/install-deps.sh)" >&2
    exit 1
fi
dir=$(mktemp -d /tmp/spindle-kv-joinlog-XXXXXX)
parent=""
joiner=""
cleanup() {
    [ -z "$joiner" ] || { kill -TERM "$joiner" 2>/dev/null; wait "$joiner" 2>/dev/null; }
    [ -z "$parent" ] || { kill -TERM "$parent" 2>/dev/null; wait "$parent" 2>/dev/null; }
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "kv_join_logged_shards: FAIL: $*" >&2
    tail -n 30 "$dir"/log* >&2 2>/dev/null
    exit 1
}

kv_ports || fail "no free ports"
p0=$port
p3=$((port + 3))
p4=$((port + 4))
p5=$((port + 5))
p6=$((port + 6))

"$kv" --local 6 --replicas 3 --port "$port" --control-port "$control" --log-dir "$dir/logs" \
    --pid-dir "$dir" >"$dir/log" 2>&1 &
parent=$!
wait_serving "$p0" "$p3" "$p4" "$p5"

# Keys of both shards: {foo} hashes to slot 12182 (shard 1), {b} to 3300
# (shard 0).
i=0
while [ "$i" -lt 50 ]; do
    i=$((i + 1))
    echo "SET {foo}k$i v$i"
done >"$dir/writes1"
i=0
while [ "$i" -lt 30 ]; do
    i=$((i + 1))
    echo "SET {b}k$i s0-$i"
done >"$dir/writes0"
redis-cli -p "$p3" <"$dir/writes1" | grep -c '^OK$' | grep -qx 50 || fail "writes to shard 1"
redis-cli -p "$p0" <"$dir/writes0" | grep -c '^OK$' | grep -qx 30 || fail "writes to shard 0"

join() {
    "$kv" --join "127.0.0.1:$control" --listen "127.0.0.1:$((control + 6))" --port "$p6" \
        --shards 2 --shard 1 --log-dir "$dir/joiner-log" \
        >>"$dir/log-joiner" 2>&1 &
    joiner=$!
    n=0
    until redis-cli -p "$p6" INFO 2>/dev/null | grep -q "^loading:0"; do
        n=$((n + 1))
        [ "$n" -lt 600 ] || fail "the joiner never took shard 1's state"
        kill -0 "$joiner" 2>/dev/null || fail "the joiner exited"
        sleep 0.1
    done
}

# Shard 1's replicas (and the joiner) agree on the digest and the key count.
agree() {
    d=$(redis-cli -p "$p3" DEBUG DIGEST)
    for p in "$p4" "$p5" "$p6"; do
        [ "$(redis-cli -p "$p" DEBUG DIGEST)" = "$d" ] || fail "$1: the digest at port $p differs from shard 1's"
    done
    [ "$(redis-cli -p "$p6" DBSIZE)" = "$(redis-cli -p "$p3" DBSIZE)" ] || fail "$1: DBSIZE at the joiner"
}

join
[ "$(grep -c "took shard 1's state" "$dir/log-joiner")" -eq 1 ] || fail "the joiner did not take shard 1's state from a replica of shard 1"
[ "$(redis-cli -p "$p6" GET '{foo}k17')" = "v17" ] || fail "GET at the joiner: $(redis-cli -p "$p6" GET '{foo}k17')"
[ "$(redis-cli -p "$p6" SET '{foo}j' joined)" = "OK" ] || fail "SET at the joiner"
[ "$(redis-cli -p "$p4" GET '{foo}j')" = "joined" ] || fail "a write taken by the joiner not seen in shard 1"
[ "$(redis-cli -p "$p6" DBSIZE)" -eq 51 ] || fail "the joiner holds $(redis-cli -p "$p6" DBSIZE) keys, want shard 1's 51"
agree "after the join"
ls "$dir/joiner-log/"001-*.snap >/dev/null 2>&1 || fail "no snapshot of shard 1 in the joiner's log: $(ls "$dir/joiner-log")"

# Killed, it misses writes (answered once the view without it is
# installed), then comes back with its log.
kill -KILL "$joiner"
wait "$joiner" 2>/dev/null
joiner=""
i=0
while [ "$i" -lt 20 ]; do
    i=$((i + 1))
    echo "SET {foo}d$i w$i"
done >"$dir/writes2"
echo "SET {foo}k3 changed" >>"$dir/writes2"
redis-cli -p "$p4" <"$dir/writes2" | grep -c '^OK$' | grep -qx 21 || fail "writes to shard 1 while the joiner is down"
join
grep -q "replayed shard 1 from its log: [1-9]" "$dir/log-joiner" || fail "the joiner did not replay its log's snapshot"
[ "$(grep -c "took shard 1's state" "$dir/log-joiner")" -eq 2 ] || fail "the restarted joiner did not take shard 1's state"
[ "$(redis-cli -p "$p6" GET '{foo}d20')" = "w20" ] || fail "a write made while the joiner was down is missing there"
[ "$(redis-cli -p "$p6" GET '{foo}k3')" = "changed" ] || fail "an overwrite made while the joiner was down is missing there"
[ "$(redis-cli -p "$p6" GET '{foo}j')" = "joined" ] || fail "the joiner's own write lost in its restart"
[ "$(redis-cli -p "$p6" SET '{foo}j' again)" = "OK" ] || fail "SET at the restarted joiner"
agree "after the restart"
kill -TERM "$joiner"
wait "$joiner" || fail "the joiner did not exit cleanly"
joiner=""
kill -TERM "$parent"
wait "$parent" || fail "a replica did not exit cleanly"
parent=""
echo "kv_join_logged_shards: the logged joiner of shard 1 agrees with its shard ($d), also after a restart from its log"
