#!/bin/sh
# spindle-rawbench measures the raw transport reference over shm and, when
# given a second argument, over libfabric tcp: its JSON line carries positive
# bandwidth and latency; spindle-bench --raw is refused, pointing at it;
# --append measures the disk and leaves nothing behind.
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
# --append: three writers, 64-byte messages (124-byte records), 10 per
# fdatasync; the files are gone afterwards and a missing directory is named.
dir=$(mktemp -d "${TMPDIR:-/tmp}/rawappend.XXXXXX")
line=$("$rawbench" --append "$dir" --writers 3 --batch 10 --msg-size 64 --messages 200 | tail -n 1)
echo "$line"
echo "$line" | grep -q '"writers":3,"direct":false,"msg_size":64,"record_bytes":124,"batch":10,' ||
    { echo "FAIL: --append line: $line" >&2; exit 1; }
# --direct: the same with O_DIRECT block writes, where the filesystem takes
# them (tmpfs does not: then the writer says so and the run fails).
if line=$("$rawbench" --append "$dir" --writers 3 --batch 10 --msg-size 64 --messages 200 \
    --direct 2>"$dir.err" | tail -n 1); then
    echo "$line"
    echo "$line" | grep -q '"writers":3,"direct":true,"msg_size":64,' ||
        { echo "FAIL: --append --direct line: $line" >&2; exit 1; }
else
    grep -q "O_DIRECT" "$dir.err" ||
        { echo "FAIL: --append --direct failed without naming O_DIRECT: $(cat "$dir.err")" >&2; exit 1; }
    echo "note: $(cat "$dir.err")"
fi
rm -f "$dir.err"
rate=$(echo "$line" | sed -n 's/.*"append_records_per_s":\([0-9.e+]*\).*/\1/p')
awk -v v="$rate" 'BEGIN { exit !(v + 0 > 0) }' || { echo "FAIL: append rate '$rate'" >&2; exit 1; }
[ -z "$(ls -A "$dir")" ] || { echo "FAIL: --append left files: $(ls "$dir")" >&2; exit 1; }
rmdir "$dir"
if "$rawbench" --append "$dir" --messages 10 2>"${TMPDIR:-/tmp}/rawappend.$$"; then
    echo "FAIL: --append into a missing directory succeeded" >&2
    exit 1
fi
grep -q "cannot create $dir" "${TMPDIR:-/tmp}/rawappend.$$" ||
    { echo "FAIL: no reason given: $(cat "${TMPDIR:-/tmp}/rawappend.$$")" >&2; exit 1; }
rm -f "${TMPDIR:-/tmp}/rawappend.$$"
echo "ok: spindle-rawbench reports the references; spindle-bench --raw points at it"
