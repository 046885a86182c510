#!/bin/sh
# spindle-kv against a single redis-server in the same run, with
# redis-benchmark: SET and GET, 50 clients, pipelines 1 and 16; the
# service is three replicas on this host (--local 3), unlogged and logged.
# Each round starts each server afresh and runs both pipelines; prints the
# medians over the rounds of requests per second and of p50 latency, and
# their ratios to redis-server's (docs/KV.md).
# Usage: sh scripts/kv-compare.sh [BUILD_DIR] [REQUESTS] [ROUNDS]
#   REQUESTS per test (default 200000), ROUNDS (default 3); PORT
#   (environment) the first port (default 6700; redis-server on PORT, the
#   replicas on PORT+10..PORT+12)
set -eu
BUILD=${1:-build}
REQUESTS=${2:-200000}
ROUNDS=${3:-3}
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

# One redis-benchmark run against port $1 with pipeline $3: a line
# "NAME PIPELINE TEST RPS P50_MS" per test, appended to the results.
bench() {
    redis-benchmark -p "$1" -t set,get -n "$REQUESTS" -c 50 -P "$3" -r 100000 --csv 2>/dev/null |
        awk -F'"' -v name="$2" -v p="$3" '$2 == "SET" || $2 == "GET" { print name, p, $2, $4, $10 }' \
            >>"$results"
}

results="$dir/results"
run_all() {
    for pipeline in 1 16; do
        bench "$2" "$1" "$pipeline"
    done
}

kvport=$((PORT + 10))
round=0
while [ "$round" -lt "$ROUNDS" ]; do
    round=$((round + 1))
    redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
        >"$dir/redis.log" 2>&1 &
    pid=$!
    wait_serving "$PORT"
    run_all redis-server "$PORT"
    stop

    "$KV" --local 3 --port "$kvport" >"$dir/kv.log" 2>&1 &
    pid=$!
    wait_serving "$kvport"
    wait_serving $((kvport + 2))
    run_all spindle-kv "$kvport"
    stop

    rm -rf "$dir/logs"
    "$KV" --local 3 --port "$kvport" --log-dir "$dir/logs" >"$dir/kv-logged.log" 2>&1 &
    pid=$!
    wait_serving "$kvport"
    wait_serving $((kvport + 2))
    run_all spindle-kv-logged "$kvport"
    stop
done

echo "redis-benchmark -t set,get -n $REQUESTS -c 50 -r 100000, $ROUNDS rounds, medians"
echo "(spindle-kv: 3 replicas on this host, every GET ordered through the group)"
awk '
    function median(key,    n, i, j, t, v) {
        n = split(all[key], v, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
        return n == 0 ? 0 : (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2)
    }
    { all[$1 " " $2 " " $3 " rps"] = all[$1 " " $2 " " $3 " rps"] " " $4
      all[$1 " " $2 " " $3 " p50"] = all[$1 " " $2 " " $3 " p50"] " " $5 }
    END {
        printf "%-18s %3s %10s %10s %8s %8s %9s %9s %8s\n", "server", "P", "SET/s", "GET/s",
               "SET x", "GET x", "SET p50", "GET p50", "p50 x"
        split("redis-server spindle-kv spindle-kv-logged", names, " ")
        for (n = 1; n <= 3; n++)
            for (p = 1; p <= 16; p += 15) {
                s = median(names[n] " " p " SET rps"); g = median(names[n] " " p " GET rps")
                bs = median("redis-server " p " SET rps"); bg = median("redis-server " p " GET rps")
                ls = median(names[n] " " p " SET p50"); lg = median(names[n] " " p " GET p50")
                bl = median("redis-server " p " SET p50")
                printf "%-18s %3d %10.0f %10.0f %8.2f %8.2f %7.3fms %7.3fms %8.2f\n", names[n], p,
                       s, g, (bs > 0 ? s / bs : 0), (bg > 0 ? g / bg : 0), ls, lg,
                       (bl > 0 ? ls / bl : 0)
            }
    }' "$results"
echo "(x: against redis-server in the same run; p50 x: SET p50 latency against redis-server's)"
echo "(etcd: sh scripts/kv-etcd-compare.sh $BUILD)"
