#!/bin/sh
# spindle-kv: a total restart of a logged service of two shards (docs/KV.md
# "Restart"). Six logged replicas (--local 6 --replicas 3 --log-dir:
# members 0-2 serve shard 0, 3-5 shard 1). Replica 5 is killed with
# SIGKILL; shard 1 takes writes without it (answered once persistent at
# replicas 3 and 4), shard 0 some too; then every replica is killed with
# SIGKILL and the same command restarts the service from the logs. Every
# replica of shard 1 (replica 5 too, whose log lacks the writes) must hold
# them all, and the replicas of each shard must agree on DEBUG DIGEST.
# The replica elected holds only its own shard's log: the other shard is
# kept from its replicas' logs (docs/LOGS.md "Total restart").
# With SNAPSHOT_EVERY (--snapshot-every), the replicas snapshot their store
# that often, so that replicas 3 and 4 hold shard 1 only from a snapshot
# past replica 5's end, and shard 0 takes more writes than shard 1 after
# replica 5's death, so that the replica elected is one of shard 0: replica
# 5 must then fetch shard 1's snapshot and the writes after it from shard
# 1's source before it joins.
# Usage: kv_restart_logged_shards.sh SPINDLE_KV [SNAPSHOT_EVERY]
set -u
kv=${1:?usage: kv_restart_logged_shards.sh SPINDLE_KV [SNAPSHOT_EVERY]}
every=${2:-}
snapshots=""
if [ -n "$every" ]; then
    snapshots="--snapshot-every $every"
    # The library's info lines say which snapshots a restart sent.
    SPINDLE_LOG_LEVEL=info
    export SPINDLE_LOG_LEVEL
fi
python=/usr/bin/python3
. "$(dirname "$0")/kv_lib.sh"
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "kv_restart_logged_shards: redis-cli missing (sh scripts/install-deps.sh)" >&2
    exit 1
fi
dir=$(mktemp -d /tmp/spindle-kv-restartlog-XXXXXX)
parent=""
# Every replica at once (one by one, the last would go on in new views).
kill_all() {
    pids=$(cat "$dir"/replica-*.pid 2>/dev/null)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    rm -f "$dir"/replica-*.pid
}
cleanup() {
    [ -z "$parent" ] || { kill -TERM "$parent" 2>/dev/null; wait "$parent" 2>/dev/null; }
    kill_all
    [ -n "${KV_KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "kv_restart_logged_shards: FAIL: $*" >&2
    tail -n 40 "$dir"/log* >&2 2>/dev/null
    exit 1
}

kv_ports || fail "no free ports"

start() {
    "$kv" --local 6 --replicas 3 --port "$port" --control-port "$control" \
        --log-dir "$dir/logs" --pid-dir "$dir" $snapshots >>"$dir/log" 2>&1 &
    parent=$!
    wait_serving $port $((port + 1)) $((port + 2)) $((port + 3)) $((port + 4)) $((port + 5))
}

# Keys of both shards: {foo} hashes to slot 12182 (shard 1), {b} to 3300
# (shard 0).
writes() { # PREFIX COUNT VALUE
    i=0
    while [ "$i" -lt "$2" ]; do
        i=$((i + 1))
        echo "SET $1$i $3$i"
    done
}
nkeys=200
start
writes '{foo}a' 20 v | redis-cli -p $((port + 3)) | grep -c '^OK$' | grep -qx 20 ||
    fail "writes to shard 1"
writes '{b}a' 20 v | redis-cli -p "$port" | grep -c '^OK$' | grep -qx 20 || fail "writes to shard 0"

kill -KILL "$(cat "$dir/replica-5.pid")" || fail "killing replica 5"
rm -f "$dir/replica-5.pid"
writes '{foo}k' "$nkeys" w | redis-cli -p $((port + 4)) | grep -c '^OK$' | grep -qx "$nkeys" ||
    fail "writes to shard 1 without replica 5"
# With snapshots, more of shard 0 than of shard 1, to elect one of shard 0.
nkeys0=30
[ -z "$every" ] || nkeys0=$((2 * nkeys))
writes '{b}k' "$nkeys0" s | redis-cli -p $((port + 1)) | grep -c '^OK$' | grep -qx "$nkeys0" ||
    fail "writes to shard 0 after replica 5's death"
kill -KILL "$parent"
wait "$parent" 2>/dev/null
parent=""
kill_all
echo "---- restart" >>"$dir/log"

start
for p in $((port + 3)) $((port + 4)) $((port + 5)); do
    [ "$(redis-cli -p "$p" DBSIZE)" -eq $((nkeys + 20)) ] ||
        fail "replica on port $p holds $(redis-cli -p "$p" DBSIZE) keys of shard 1 after the restart, want $((nkeys + 20))"
    [ "$(redis-cli -p "$p" GET "{foo}k$nkeys")" = "w$nkeys" ] || fail "the last write to shard 1 is missing at port $p"
done
for p in "$port" $((port + 1)) $((port + 2)); do
    [ "$(redis-cli -p "$p" DBSIZE)" -eq $((nkeys0 + 20)) ] ||
        fail "replica on port $p holds $(redis-cli -p "$p" DBSIZE) keys of shard 0 after the restart, want $((nkeys0 + 20))"
done
d0=$(redis-cli -p "$port" DEBUG DIGEST)
d1=$(redis-cli -p $((port + 3)) DEBUG DIGEST)
for i in 1 2; do
    [ "$(redis-cli -p $((port + i)) DEBUG DIGEST)" = "$d0" ] || fail "the digest of replica $i differs from shard 0's"
    [ "$(redis-cli -p $((port + 3 + i)) DEBUG DIGEST)" = "$d1" ] || fail "the digest of replica $((3 + i)) differs from shard 1's"
done
[ "$(redis-cli -p $((port + 5)) SET '{foo}after' yes)" = "OK" ] || fail "SET in shard 1 after the restart"
[ "$(redis-cli -p $((port + 3)) GET '{foo}after')" = "yes" ] || fail "a write after the restart not seen in shard 1"
if [ -n "$every" ]; then
    # Replica 5 was sent shard 1 from a snapshot: by its source (the
    # replica elected is one of shard 0) or, elected one of shard 1, by it.
    grep -q "took subgroup 1's source, member [0-9]*,'s snapshot" "$dir/log" ||
        grep -q "catch-up of joiner 5: reset, [1-9]" "$dir/log" ||
        fail "replica 5 was sent no snapshot of shard 1"
fi
kill -TERM "$parent"
wait "$parent" || fail "a replica did not exit cleanly"
parent=""
echo "kv_restart_logged_shards: both shards whole after a total restart, replica 5 caught up ($d1)"
