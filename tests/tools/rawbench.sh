#!/bin/sh
# spindle-rawbench measures the raw transport reference over shm and, when
# given a second argument, over libfabric tcp: its JSON line carries positive
# bandwidth and latency; spindle-bench --raw is refused, pointing at it.
set -eu
rawbench=$1
bench=$2
fabric=${3:-}
check() {
    line=$("$rawbench" --local 2 --msg-size 256 --window 16 --messages 2000 "$@" | tail -n 1)
    echo "$line"
    for key in raw_msgs_per_s raw_mb_per_s raw_latency_us; do
        value=$(echo "$line" | sed -n "s/.*\"$key\":\([0-9.e+]*\).*/\1/p")
        if [ -z "$value" ] || ! awk -v v="$value" 'BEGIN { exit !(v + 0 > 0) }'; then
            echo "FAIL: $key is '$value' in: $line" >&2
            exit 1
        fi
    done
}
check
[ -n "$fabric" ] && check --transport fabric --provider tcp
if "$bench" --local 2 --raw >/dev/null 2>"${TMPDIR:-/tmp}/rawbench.$$"; then
    echo "FAIL: spindle-bench --raw was accepted" >&2
    exit 1
fi
grep -q "spindle-rawbench" "${TMPDIR:-/tmp}/rawbench.$$"
rm -f "${TMPDIR:-/tmp}/rawbench.$$"
"$rawbench" --local 3 >/dev/null 2>&1 && { echo "FAIL: --local 3 accepted" >&2; exit 1; }
echo "ok: spindle-rawbench reports the reference; spindle-bench --raw points at it"
