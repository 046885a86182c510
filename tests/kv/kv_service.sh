#!/bin/sh
# spindle-kv end to end: three replicas started with --local 3 on free
# loopback ports, driven by redis-cli and a python3-redis program
# (kv_redis_client.py): equal DEBUG DIGEST on every replica after a
# workload with expiring keys; then one replica is killed with SIGKILL,
# the others go on serving, and an INCR retried there under the same
# SESSION request id is applied once, and a new replica joins with the
# state of the others. Then two shards of three replicas
# (-MOVED, redis-cli -c, -CROSSSLOT also in MULTI, equal digests within
# each shard), and
# a replica joining each shard while writes go on, each taking its
# shard's state from a replica of that shard (the leader serves shard 0),
# also when that replica dies during the transfer.
# Last, AUTH with --requirepass.
# Usage: kv_service.sh SPINDLE_KV KV_REDIS_CLIENT_PY
# (kv_cluster_client.py is taken from beside KV_REDIS_CLIENT_PY)
set -u
kv=${1:?usage: kv_service.sh SPINDLE_KV KV_REDIS_CLIENT_PY}
client_py=${2:?usage: kv_service.sh SPINDLE_KV KV_REDIS_CLIENT_PY}
cluster_py=$(dirname "$client_py")/kv_cluster_client.py
python=/usr/bin/python3 # Debian's, with python3-redis (not a pyenv shim)
. "$(dirname "$0")/kv_lib.sh"
if ! command -v redis-cli >/dev/null 2>&1 || ! "$python" -c 'import redis' 2>/dev/null; then
    echo "kv_service: redis-cli or python3-redis missing (sh scripts/install-deps.sh)" >&2
    exit 1
fi
dir=$(mktemp -d /tmp/spindle-kv-test-XXXXXX)
parent=""
joiner=""
joiner0=""
cleanup() {
    for j in $joiner $joiner0; do
        kill -TERM "$j" 2>/dev/null
        wait "$j" 2>/dev/null
    done
    if [ -n "$parent" ]; then
        kill -TERM "$parent" 2>/dev/null
        wait "$parent" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
fail() {
    echo "kv_service: FAIL: $*" >&2
    cat "$dir"/log* >&2 2>/dev/null
    exit 1
}

kv_ports || fail "no free ports"
p0=$port
p1=$((port + 1))
p2=$((port + 2))

# Stops the service; every replica must have exited cleanly (a sanitizer
# report makes its exit status non-zero).
stop_service() {
    kill -TERM "$parent"
    wait "$parent" || fail "a replica did not exit cleanly"
    parent=""
}

"$kv" --local 3 --port "$port" --control-port "$control" --pid-dir "$dir" \
    --failure-timeout-ms 10000 >"$dir/log" 2>&1 &
parent=$!
wait_serving "$p0" "$p1" "$p2"

# redis-cli, unchanged: replies, errors, pipelining through --pipe.
[ "$(redis-cli -p "$p0" SET cli:k hello)" = "OK" ] || fail "SET through redis-cli"
[ "$(redis-cli -p "$p2" GET cli:k)" = "hello" ] || fail "GET at another replica"
redis-cli -p "$p1" BOGUS 2>&1 | grep -q "ERR unknown command 'BOGUS'" || fail "unknown command reply"
printf 'INCR cli:n\r\nINCR cli:n\r\nINCR cli:n\r\n' | redis-cli -p "$p1" --pipe >"$dir/pipe.out" 2>&1 ||
    fail "redis-cli --pipe: $(cat "$dir/pipe.out")"
[ "$(redis-cli -p "$p0" GET cli:n)" = "3" ] || fail "pipelined INCRs applied $(redis-cli -p "$p0" GET cli:n) times, want 3"

"$python" "$client_py" "$p0" "$p1" "$p2" || fail "python3-redis program"

# Exactly once across the death of a replica: the request is taken by
# replica 2, which then dies; the client retries at replica 1.
[ "$(redis-cli -p "$p2" SESSION 42 1 INCR once)" = "1" ] || fail "SESSION INCR at replica 2"
kill -KILL "$(cat "$dir/replica-2.pid")" || fail "killing replica 2"
[ "$(redis-cli -p "$p1" SESSION 42 1 INCR once)" = "1" ] || fail "the retried INCR was applied again"
[ "$(redis-cli -p "$p0" GET once)" = "1" ] || fail "GET once after the retry: $(redis-cli -p "$p0" GET once)"
[ "$(redis-cli -p "$p0" SESSION 42 2 INCR once)" = "2" ] || fail "the next request of the session"
n=0
until redis-cli -p "$p0" INFO replication | grep -q "state=degraded"; do
    n=$((n + 1))
    [ "$n" -lt 300 ] || fail "INFO never reported the lost replica"
    sleep 0.1
done
redis-cli -p "$p0" INFO replication | grep -q "^members:0,1" || fail "INFO members after the kill"
for i in 1 2 3 4 5; do
    redis-cli -p "$p1" SET "after:$i" "$i" >/dev/null || fail "SET after the kill"
done
[ "$(redis-cli -p "$p0" MGET after:1 after:5 | tr '\n' ' ')" = "1 5 " ] || fail "reads after the kill"
d0=$(redis-cli -p "$p0" DEBUG DIGEST)
d1=$(redis-cli -p "$p1" DEBUG DIGEST)
[ -n "$d0" ] && [ "$d0" = "$d1" ] || fail "survivors' digests differ: $d0 $d1"
# A new replica joins through replica 0 and is handed the state.
p5=$((port + 5))
"$kv" --join "127.0.0.1:$control" --listen "127.0.0.1:$((control + 5))" --port "$p5" \
    >"$dir/log-joiner" 2>&1 &
joiner=$!
wait_serving "$p5"
[ "$(redis-cli -p "$p5" DEBUG DIGEST)" = "$d0" ] || fail "the joiner's state differs from the others'"
[ "$(redis-cli -p "$p5" SESSION 42 1 INCR once)" = "1" ] || fail "the joiner ran a session's request again"
[ "$(redis-cli -p "$p5" SET joined yes)" = "OK" ] || fail "SET at the joiner"
[ "$(redis-cli -p "$p1" GET joined)" = "yes" ] || fail "a write taken by the joiner not seen at replica 1"
redis-cli -p "$p0" INFO replication | grep -q "state=ok" || fail "INFO after the join: $(redis-cli -p "$p0" INFO replication | grep shard0)"
kill -TERM "$joiner"
wait "$joiner" || fail "the joiner did not exit cleanly"
joiner=""
stop_service

# Two shards of three replicas (--local 6 --replicas 3): keys go by hash
# slot; a replica of the other shard answers -MOVED, which redis-cli -c
# follows; keys of two shards in one command are -CROSSSLOT; redis-py's
# RedisCluster finds the shards through CLUSTER SLOTS and COMMAND.
"$kv" --local 6 --replicas 3 --port "$port" --control-port "$control" --pid-dir "$dir" \
    >"$dir/log-shards" 2>&1 &
parent=$!
p3=$((port + 3))
p4=$((port + 4))
p5=$((port + 5))
wait_serving "$p0" "$p1" "$p2" "$p3" "$p4" "$p5"
# "foo" is slot 12182 (shard 1, replicas 3-5), "b" slot 3300 (shard 0).
[ "$(redis-cli -p "$p0" GET foo)" = "MOVED 12182 127.0.0.1:$p3" ] || fail "MOVED for a key of shard 1: $(redis-cli -p "$p0" GET foo)"
[ "$(redis-cli -c -p "$p0" SET foo bar)" = "OK" ] || fail "redis-cli -c following MOVED"
[ "$(redis-cli -p "$p5" GET foo)" = "bar" ] || fail "GET at another replica of shard 1"
[ "$(redis-cli -p "$p1" SET b 1)" = "OK" ] || fail "SET of a key of shard 0"
redis-cli -p "$p0" MSET b 2 foo 3 2>&1 | grep -q "^CROSSSLOT" || fail "MSET across shards was not refused"
[ "$(redis-cli -p "$p0" MSET b 2 '{b}x' 3)" = "OK" ] || fail "MSET within one hash tag"
# A transaction's keys must all be in one shard: a command with a key of
# the other shard is -CROSSSLOT when queued, and EXEC then -EXECABORT,
# applying nothing; one within shard 1, sent to a replica of shard 1, runs.
# (redis-cli prints an empty line after an error reply: dropped.)
multi=$(printf 'MULTI\r\nSET b tx\r\nSET foo tx\r\nEXEC\r\nGET b\r\n' | redis-cli -p "$p0" 2>&1 |
    grep -v '^$' | tr '\n' '|')
[ "$multi" = "OK|QUEUED|CROSSSLOT Keys in request don't hash to the same shard|EXECABORT Transaction discarded because of previous errors.|2|" ] ||
    fail "MULTI across shards: $multi"
multi=$(printf 'MULTI\r\nSET foo 7\r\nINCR foo\r\nEXEC\r\n' | redis-cli -p "$p4" 2>&1 | tr '\n' '|')
[ "$multi" = "OK|QUEUED|QUEUED|OK|8|" ] || fail "MULTI in shard 1: $multi"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    redis-cli -c -p "$((port + i % 6))" SET "k$i" "$i" EX 1000 >/dev/null || fail "SET k$i through redis-cli -c"
done
sum=0
for p in "$p0" "$p3"; do
    sum=$((sum + $(redis-cli -p "$p" DBSIZE)))
done
[ "$sum" -eq 15 ] || fail "the two shards hold $sum keys, want 15"
redis-cli -p "$p4" INFO replication | grep -q "^shards:2" || fail "INFO shards"
# CLUSTER NODES: each shard's lowest-ranked replica as its master, holding
# its slots; redis-cli --cluster reads it and finds every slot covered.
[ "$(redis-cli -p "$p1" CLUSTER NODES | grep -c ' master - .* connected ')" -eq 2 ] || fail "CLUSTER NODES: $(redis-cli -p "$p1" CLUSTER NODES)"
redis-cli -p "$p1" CLUSTER NODES | grep -q "127.0.0.1:$p3@0 master - .* 8192-16383$" || fail "CLUSTER NODES does not give shard 1's slots to replica 3"
redis-cli --cluster check "127.0.0.1:$p2" >"$dir/cluster-check" 2>&1 || fail "redis-cli --cluster check: $(cat "$dir/cluster-check")"
grep -q "All 16384 slots covered" "$dir/cluster-check" || fail "redis-cli --cluster check: $(cat "$dir/cluster-check")"
for shard in "$p0 $p1 $p2" "$p3 $p4 $p5"; do
    set -- $shard
    da=$(redis-cli -p "$1" DEBUG DIGEST)
    for p in "$2" "$3"; do
        [ "$(redis-cli -p "$p" DEBUG DIGEST)" = "$da" ] || fail "digests differ within the shard of port $1"
    done
done
[ "$(redis-cli -p "$p0" DEBUG DIGEST)" != "$(redis-cli -p "$p3" DEBUG DIGEST)" ] || fail "the two shards hold the same map"
# A replica joins shard 1 through member 0, which serves shard 0, and
# another joins shard 0, while writes to both shards go on: each takes its
# shard's state from a replica of that shard.
p6=$((port + 6))
p7=$((port + 7))
i=0
while [ "$i" -lt 400 ]; do
    i=$((i + 1))
    echo "SET w$i $i"
done >"$dir/writes"
redis-cli -c -p "$p4" <"$dir/writes" >"$dir/writes.out" 2>&1 &
writer=$!
"$kv" --join "127.0.0.1:$control" --listen "127.0.0.1:$((control + 6))" --port "$p6" \
    --shards 2 --shard 1 >"$dir/log-join1" 2>&1 &
joiner=$!
"$kv" --join "127.0.0.1:$((control + 1))" --listen "127.0.0.1:$((control + 7))" --port "$p7" \
    --shards 2 --shard 0 >"$dir/log-join0" 2>&1 &
joiner0=$!
for p in "$p6" "$p7"; do
    n=0
    until redis-cli -p "$p" INFO 2>/dev/null | grep -q "^loading:0"; do
        n=$((n + 1))
        [ "$n" -lt 600 ] || fail "the joiner on port $p never took its shard's state"
        kill -0 "$joiner" 2>/dev/null && kill -0 "$joiner0" 2>/dev/null || fail "a joiner exited"
        sleep 0.1
    done
done
wait "$writer" || fail "redis-cli -c writing during the joins"
[ "$(grep -c '^OK$' "$dir/writes.out")" -eq 400 ] || fail "writes during the joins: $(sort "$dir/writes.out" | uniq -c | sort -rn | head -3)"
grep -q "took shard 1's state" "$dir/log-join1" || fail "the joiner of shard 1 did not take the state from its shard"
grep -q "took shard 0's state" "$dir/log-join0" || fail "the joiner of shard 0 did not take the state from its shard"
[ "$(redis-cli -p "$p6" SET foo joined)" = "OK" ] || fail "SET at the joiner of shard 1"
[ "$(redis-cli -p "$p3" GET foo)" = "joined" ] || fail "a write taken by the joiner of shard 1 not seen in shard 1"
[ "$(redis-cli -p "$p6" GET b)" = "MOVED 3300 127.0.0.1:$p0" ] || fail "MOVED from the joiner: $(redis-cli -p "$p6" GET b)"
redis-cli -p "$p0" CLUSTER SLOTS | grep -qx "$p6" || fail "CLUSTER SLOTS does not list the joiner of shard 1"
for shard in "$p0 $p1 $p2 $p7" "$p3 $p4 $p5 $p6"; do
    set -- $shard
    da=$(redis-cli -p "$1" DEBUG DIGEST)
    for p in "$2" "$3" "$4"; do
        [ "$(redis-cli -p "$p" DEBUG DIGEST)" = "$da" ] || fail "digests differ within the shard of port $1 after the joins"
    done
done
[ "$(( $(redis-cli -p "$p7" DBSIZE) + $(redis-cli -p "$p6" DBSIZE) ))" -eq 415 ] || fail "the joiners hold $(redis-cli -p "$p7" DBSIZE) + $(redis-cli -p "$p6" DBSIZE) keys, want 415"
for j in "$joiner" "$joiner0"; do
    kill -TERM "$j"
    wait "$j" || fail "a joiner did not exit cleanly"
done
joiner=""
joiner0=""
# The replica a joiner asks for the state (shard 1's lowest-ranked, member
# 3) is killed once the joiner is admitted, most likely while it hands a
# state of 20,000 keys over: the joiner asks another replica of the shard
# and ends with the survivors' digest.
"$python" - "$p4" <<'PY' || fail "loading 20,000 keys into shard 1"
import sys, redis
r = redis.Redis(port=int(sys.argv[1]))
pipe = r.pipeline(transaction=False)
for i in range(20000):
    pipe.set("{foo}big%d" % i, "x" * 100)
assert all(pipe.execute())
PY
"$kv" --join "127.0.0.1:$((control + 1))" --listen "127.0.0.1:$((control + 6))" --port "$p6" \
    --shards 2 --shard 1 >"$dir/log-join2" 2>&1 &
joiner=$!
n=0
until grep -q "view" "$dir/log-join2"; do
    n=$((n + 1))
    [ "$n" -lt 6000 ] || fail "the third joiner was never admitted"
    kill -0 "$joiner" 2>/dev/null || fail "the third joiner exited"
    sleep 0.01
done
kill -KILL "$(cat "$dir/replica-3.pid")" || fail "killing replica 3"
n=0
until redis-cli -p "$p6" INFO 2>/dev/null | grep -q "^loading:0"; do
    n=$((n + 1))
    [ "$n" -lt 600 ] || fail "the third joiner never took shard 1's state"
    kill -0 "$joiner" 2>/dev/null || fail "the third joiner exited"
    sleep 0.1
done
d4=$(redis-cli -p "$p4" DEBUG DIGEST)
for p in "$p5" "$p6"; do
    [ "$(redis-cli -p "$p" DEBUG DIGEST)" = "$d4" ] || fail "digest at port $p differs after the donor's death"
done
[ "$(redis-cli -p "$p6" DBSIZE)" -eq "$(redis-cli -p "$p4" DBSIZE)" ] || fail "DBSIZE at the third joiner"
kill -TERM "$joiner"
wait "$joiner" || fail "the third joiner did not exit cleanly"
joiner=""
"$python" "$cluster_py" "$p2" || fail "redis-py's RedisCluster"
stop_service

# Logged shards: writes answered once persistent; after every replica
# stopped, the same command restarts the service from the logs.
start_logged() {
    "$kv" --local 3 --port "$port" --control-port "$control" --log-dir "$dir/logs" \
        >>"$dir/log-logged" 2>&1 &
    parent=$!
    wait_serving "$p0" "$p1" "$p2"
}
start_logged
[ "$(redis-cli -p "$p0" SET durable yes)" = "OK" ] || fail "SET in a logged shard"
[ "$(redis-cli -p "$p1" SESSION 5 1 INCR logged:n)" = "1" ] || fail "SESSION INCR in a logged shard"
[ "$(redis-cli -p "$p2" SET lasting v EX 1000)" = "OK" ] || fail "SET EX in a logged shard"
session_exec() {
    printf 'MULTI\r\nINCR logged:t\r\nSESSION 6 1 EXEC\r\n' | redis-cli -p "$1" | tr '\n' '|'
}
[ "$(session_exec "$p2")" = "OK|QUEUED|1|" ] || fail "SESSION EXEC in a logged shard"
redis-cli -p "$p1" INFO replication | grep -q "^logged:yes" || fail "INFO does not say the shard is logged"
before=$(redis-cli -p "$p0" DEBUG DIGEST)
stop_service
start_logged
[ "$(redis-cli -p "$p2" GET durable)" = "yes" ] || fail "a logged write lost in the restart"
[ "$(redis-cli -p "$p0" SESSION 5 1 INCR logged:n)" = "1" ] || fail "a session's request ran again after the restart"
[ "$(session_exec "$p0")" = "OK|QUEUED|1|" ] || fail "a session's EXEC ran again after the restart"
[ "$(redis-cli -p "$p1" TTL lasting | awk '$1 > 900')" != "" ] || fail "expiry lost in the restart"
for p in "$p0" "$p1" "$p2"; do
    [ "$(redis-cli -p "$p" DEBUG DIGEST)" = "$before" ] || fail "digest at port $p after the restart differs"
done
stop_service

# AUTH: a replica with --requirepass refuses commands until AUTH.
"$kv" --local 1 --port "$p0" --control-port "$control" --requirepass sesame \
    >"$dir/log-auth" 2>&1 &
parent=$!
n=0
until redis-cli -p "$p0" PING 2>/dev/null | grep -q NOAUTH; do
    n=$((n + 1))
    [ "$n" -lt 600 ] || fail "the --requirepass replica never served"
    sleep 0.1
done
redis-cli -p "$p0" GET k 2>&1 | grep -q "NOAUTH" || fail "GET without AUTH was not refused"
redis-cli -p "$p0" --no-auth-warning -a wrong PING 2>&1 | grep -q "WRONGPASS" || fail "a wrong password was not refused"
[ "$(redis-cli -p "$p0" --no-auth-warning -a sesame SET k v)" = "OK" ] || fail "SET after AUTH"
stop_service
echo "kv_service: digests agree ($d0), the retried INCR ran once, AUTH is enforced"
