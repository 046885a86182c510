#!/bin/sh
# spindle-dds-perf, tiny: every QoS at one subscriber prints one JSON line
# with the fields docs/DDS.md describes and figures above zero; --baseline
# says so in the line; bad options end the run (exit 2) naming them.
# Usage: dds_perf_smoke.sh SPINDLE_DDS_PERF
set -u
PERF=$1
WORK=$(mktemp -d /tmp/spindle-dds-perf-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() {
    echo "FAIL: $*"
    exit 1
}

for qos in unordered atomic volatile logged; do
    for flag in "" --baseline; do
        # shellcheck disable=SC2086
        line=$("$PERF" --qos "$qos" --subscribers 1 --size 256 --samples 200 \
            --log-dir "$WORK/logs-$qos$flag" $flag) || fail "$qos $flag exited with $?"
        echo "$line"
        python3 - "$line" "$qos" "$flag" <<'PY' || fail "$qos $flag: $line"
import json, sys
line, qos, flag = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.loads(line)
assert d["qos"] == qos, d["qos"]
assert d["baseline"] == (flag == "--baseline"), d["baseline"]
assert d["subscribers"] == 1 and d["size"] == 256 and d["samples"] == 200
assert len(d["samples_per_s"]) == 1 and len(d["mb_per_s"]) == 1
assert d["samples_per_s_min"] > 0 and d["mb_per_s_min"] > 0
assert 0 < d["latency_p50_us"] <= d["latency_p99_us"] <= d["latency_p999_us"]
assert (d["records_per_fdatasync"] > 0) == (qos == "logged"), d["records_per_fdatasync"]
PY
    done
done

refused() {
    want=$1
    shift
    out=$("$PERF" "$@" 2>&1)
    rc=$?
    [ "$rc" -eq 2 ] || fail "$* exited with $rc, not 2"
    echo "$out" | grep -q -- "$want" || fail "$*: no \"$want\" in: $out"
}
refused "durable" --qos durable
refused "subscribers must be" --subscribers 9
refused "size must be" --size 4
refused "positive number" --samples 0
echo "spindle-dds-perf: every QoS reports, bad options are refused"
