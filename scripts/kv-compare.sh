#!/bin/sh
# spindle-kv against a single redis-server in the same run, with
# redis-benchmark: SET and GET, 50 clients, pipelines 1 and 16; the
# service is three replicas on this host (--local 3), unlogged and logged.
# Prints requests per second and the ratio to redis-server (docs/KV.md).
# Usage: sh scripts/kv-compare.sh [BUILD_DIR] [REQUESTS]
#   REQUESTS per test (default 200000); PORT (environment) the first port
#   (default 6700; redis-server on PORT, the replicas on PORT+10..PORT+12)
set -eu
BUILD=${1:-build}
REQUESTS=${2:-200000}
PORT=${PORT:-6700}
KV="$BUILD/examples/kv/spindle-kv"
for tool in redis-server redis-benchmark redis-cli; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "kv-compare: $tool not found (apt-get install redis-server redis-tools)" >&2
        exit 2
    fi
done
[ -x "$KV" ] || { echo "kv-compare: $KV not found; build first" >&2; exit 2; }
dir=$(mktemp -d /tmp/spindle-kv-compare-XXXXXX)
pid=""
stop() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
    fi
}
trap 'stop; rm -rf "$dir"' EXIT

wait_serving() {
    n=0
    until [ "$(redis-cli -p "$1" PING 2>/dev/null)" = "PONG" ]; do
        n=$((n + 1))
        [ "$n" -lt 600 ] || { echo "kv-compare: nothing serves port $1" >&2; exit 1; }
        sleep 0.1
    done
}

# One redis-benchmark run: "SET rps GET rps" for pipeline $2 against port $1.
bench() {
    redis-benchmark -p "$1" -t set,get -n "$REQUESTS" -c 50 -P "$2" -r 100000 --csv 2>/dev/null |
        awk -F'"' '$2 == "SET" || $2 == "GET" { printf "%s %s ", $2, $4 }'
}

results="$dir/results"
run_all() {
    name=$1
    port=$2
    for pipeline in 1 16; do
        echo "$name $pipeline $(bench "$port" "$pipeline")" >>"$results"
    done
}

redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
    >"$dir/redis.log" 2>&1 &
pid=$!
wait_serving "$PORT"
run_all redis-server "$PORT"
stop

kvport=$((PORT + 10))
"$KV" --local 3 --port "$kvport" >"$dir/kv.log" 2>&1 &
pid=$!
wait_serving "$kvport"
wait_serving $((kvport + 2))
run_all spindle-kv "$kvport"
stop

"$KV" --local 3 --port "$kvport" --log-dir "$dir/logs" >"$dir/kv-logged.log" 2>&1 &
pid=$!
wait_serving "$kvport"
wait_serving $((kvport + 2))
run_all spindle-kv-logged "$kvport"
stop

echo "redis-benchmark -t set,get -n $REQUESTS -c 50 -r 100000, requests per second"
echo "(spindle-kv: 3 replicas on this host, every GET ordered through the group)"
awk '
    { rps[$1 " " $2 " SET"] = $4; rps[$1 " " $2 " GET"] = $6 }
    END {
        printf "%-20s %8s %12s %12s %10s %10s\n", "server", "pipeline", "SET/s", "GET/s",
               "SET ratio", "GET ratio"
        split("redis-server spindle-kv spindle-kv-logged", names, " ")
        for (n = 1; n <= 3; n++)
            for (p = 1; p <= 16; p += 15) {
                s = rps[names[n] " " p " SET"]; g = rps[names[n] " " p " GET"]
                bs = rps["redis-server " p " SET"]; bg = rps["redis-server " p " GET"]
                printf "%-20s %8d %12.0f %12.0f %10.2f %10.2f\n", names[n], p, s, g,
                       (bs > 0 ? s / bs : 0), (bg > 0 ? g / bg : 0)
            }
    }' "$results"
echo "(etcd: sh scripts/kv-etcd-compare.sh $BUILD)"
