#!/bin/sh
# `make kv-demo`: three spindle-kv replicas on this host (RESP on 6400,
# 6401, 6402), a short redis-cli session against them, then a clean stop.
# Usage: sh scripts/kv-demo.sh BUILD_DIR [PORT]
set -eu
BUILD=${1:-build}
PORT=${2:-6400}
KV="$BUILD/examples/kv/spindle-kv"
if [ ! -x "$KV" ]; then
    echo "kv-demo: $KV not found; build first (make build)" >&2
    exit 1
fi
if ! command -v redis-cli >/dev/null 2>&1; then
    echo "kv-demo: redis-cli not found (sh scripts/install-deps.sh installs redis-tools)" >&2
    exit 1
fi
"$KV" --local 3 --port "$PORT" &
service=$!
trap 'kill -TERM $service 2>/dev/null; wait $service 2>/dev/null || true' EXIT
for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do
    n=0
    until [ "$(redis-cli -p "$p" PING 2>/dev/null)" = "PONG" ]; do
        n=$((n + 1))
        if [ "$n" -ge 300 ] || ! kill -0 "$service" 2>/dev/null; then
            echo "kv-demo: the replica on port $p did not start" >&2
            exit 1
        fi
        sleep 0.1
    done
done
run() {
    echo "redis-cli -p $1 $(shift; echo "$@")"
    port=$1
    shift
    redis-cli -p "$port" "$@" | sed 's/^/    /'
}
run "$PORT" SET greeting "hello, replicated world"
run $((PORT + 1)) GET greeting
run $((PORT + 2)) INCR visits
run "$PORT" INCR visits
run $((PORT + 1)) SET session-token abc EX 60
run $((PORT + 2)) TTL session-token
run "$PORT" MSET a 1 b 2
run $((PORT + 1)) MGET a b greeting
run $((PORT + 2)) SESSION 1 1 INCR once
run "$PORT" SESSION 1 1 INCR once
run $((PORT + 1)) DBSIZE
for p in "$PORT" $((PORT + 1)) $((PORT + 2)); do
    run "$p" DEBUG DIGEST
done
redis-cli -p "$PORT" INFO replication | tr -d '\r' | sed -n '/^# Replication/,/^$/p'
