#!/bin/sh
# Logged spindle-kv against a three-member etcd cluster, both on this host
# on loopback, under the same write workload (spindle-kv-writeload,
# examples/kv/kv_writeload.c: random keys of 100,000, 16-byte values,
# CONNECTIONS connections spread over the three servers, one request
# outstanding on each, THREADS generator threads). etcd answers a
# put once a majority has it in its fsynced log; spindle-kv with --log-dir
# answers a SET once every replica has it on stable storage. Installs
# etcd-server (Debian 12's) when etcd is missing. Prints writes/s of each
# and the ratio, for RUNS runs and their medians (docs/KV.md).
# Usage: sh scripts/kv-etcd-compare.sh [BUILD_DIR] [REQUESTS] [RUNS]
#   (defaults: build, 100000, 3); CONNECTIONS (environment, default 256)
#   and THREADS (default 2: with every core busy, one thread's share of the
#   CPU would bound the rate it can drive)
set -eu
BUILD=${1:-build}
REQUESTS=${2:-100000}
RUNS=${3:-3}
CONNECTIONS=${CONNECTIONS:-256}
THREADS=${THREADS:-2}
KV="$BUILD/examples/kv/spindle-kv"
LOAD="$BUILD/examples/kv/spindle-kv-writeload"
python=/usr/bin/python3
for program in "$KV" "$LOAD"; do
    [ -x "$program" ] || { echo "kv-etcd-compare: $program not found; build first" >&2; exit 2; }
done
# etcd and etcdctl (the health check) and redis-cli (the replicas' readiness) are
# Debian packages; install the ones missing.
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "kv-etcd-compare: installing $2 (for $1)" >&2
    apt-get install -y "$2" >/dev/null ||
        { echo "kv-etcd-compare: apt-get install $2 failed; $1 is needed" >&2; exit 2; }
}
need etcd etcd-server
need etcdctl etcd-client
need redis-cli redis-tools

dir=$(mktemp -d /tmp/spindle-kv-etcd-XXXXXX)
pids=""
stop() {
    for p in $pids; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in $pids; do
        wait "$p" 2>/dev/null || true
    done
    pids=""
}
trap 'stop; rm -rf "$dir"' EXIT

# Free loopback ports: six consecutive at P (etcd clients and peers,
# spindle-kv RESP) and six at P+6 (spindle-kv's bootstrap), all below the
# ephemeral range (net.ipv4.ip_local_port_range starts at 32768), where the
# connections of etcd and of the load generator could take one between this
# check and the bind.
ports=$("$python" - <<'PY'
import random, socket
def free(base):
    for p in range(base, base + 6):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            return False
        finally:
            s.close()
    return True
for _ in range(200):
    base = random.randrange(10000, 20468, 12)
    if free(base) and free(base + 6):
        print(base, base + 6)
        break
PY
)
[ -n "$ports" ] || { echo "kv-etcd-compare: no free ports" >&2; exit 1; }
# shellcheck disable=SC2086 # two numbers, split on purpose
set -- $ports
base=$1
control=$2

wait_until() { # what, command...
    what=$1
    shift
    n=0
    until "$@" >/dev/null 2>&1; do
        n=$((n + 1))
        if [ "$n" -ge 600 ]; then
            echo "kv-etcd-compare: timed out waiting for $what; the ends of the logs:" >&2
            tail -n 20 "$dir/kv.log" "$dir"/etcd-m*.log >&2 2>/dev/null || true
            exit 1
        fi
        sleep 0.1
    done
}

start_etcd() {
    cluster=""
    for i in 0 1 2; do
        cluster="${cluster:+$cluster,}m$i=http://127.0.0.1:$((base + 3 + i))"
    done
    for i in 0 1 2; do
        client=$((base + i))
        peer=$((base + 3 + i))
        etcd --name "m$i" --data-dir "$dir/etcd/m$i" \
            --listen-client-urls "http://127.0.0.1:$client" \
            --advertise-client-urls "http://127.0.0.1:$client" \
            --listen-peer-urls "http://127.0.0.1:$peer" \
            --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
            --initial-cluster "$cluster" --initial-cluster-state new \
            --initial-cluster-token spindle-kv-compare >"$dir/etcd-m$i.log" 2>&1 &
        pids="$pids $!"
    done
    endpoints="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
    wait_until "a healthy etcd cluster" env ETCDCTL_API=3 etcdctl --endpoints "$endpoints" \
        endpoint health
}

start_kv() {
    "$KV" --local 3 --port "$base" --control-port "$control" --log-dir "$dir/kv" \
        >"$dir/kv.log" 2>&1 &
    pids="$!"
    for i in 0 1 2; do
        wait_until "spindle-kv on port $((base + i))" sh -c \
            "[ \"\$(redis-cli -p $((base + i)) PING)\" = PONG ]"
    done
}

servers="127.0.0.1:$base 127.0.0.1:$((base + 1)) 127.0.0.1:$((base + 2))"
results="$dir/results"
run=1
while [ "$run" -le "$RUNS" ]; do
    rm -rf "$dir/etcd" "$dir/kv"
    start_etcd
    # shellcheck disable=SC2086 # $servers: one argument per server
    out=$("$LOAD" etcd "$REQUESTS" "$CONNECTIONS" "$THREADS" $servers) ||
        { echo "kv-etcd-compare: the load generator failed against etcd" >&2; exit 1; }
    etcd_rate=$(echo "$out" | awk '{ print $2 }')
    etcd_p50=$(echo "$out" | awk '{ print $9 }')
    stop
    start_kv
    # shellcheck disable=SC2086
    out=$("$LOAD" resp "$REQUESTS" "$CONNECTIONS" "$THREADS" $servers) ||
        { echo "kv-etcd-compare: the load generator failed against spindle-kv" >&2; exit 1; }
    kv_rate=$(echo "$out" | awk '{ print $2 }')
    kv_p50=$(echo "$out" | awk '{ print $9 }')
    stop
    echo "$run $etcd_rate $kv_rate" >>"$results"
    echo "run $run: etcd $etcd_rate writes/s (p50 $etcd_p50 ms)," \
        "logged spindle-kv $kv_rate writes/s (p50 $kv_p50 ms)," \
        "ratio $(awk -v e="$etcd_rate" -v k="$kv_rate" 'BEGIN { printf "%.1f", k / e }')x" \
        "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
    run=$((run + 1))
done
echo "$REQUESTS writes per run, $CONNECTIONS connections, $THREADS generator threads;" \
    "3 etcd members vs 3 logged spindle-kv replicas"
sort -n -k2 "$results" | awk '{ e[NR] = $2 } END { m = e[int((NR + 1) / 2)]; print m }' >"$dir/etcd.med"
sort -n -k3 "$results" | awk '{ k[NR] = $3 } END { m = k[int((NR + 1) / 2)]; print m }' >"$dir/kv.med"
awk -v e="$(cat "$dir/etcd.med")" -v k="$(cat "$dir/kv.med")" 'BEGIN {
    printf "median: etcd %.0f writes/s, logged spindle-kv %.0f writes/s, ratio %.1fx\n",
           e, k, (e > 0 ? k / e : 0) }'
