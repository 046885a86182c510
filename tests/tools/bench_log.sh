#!/bin/sh
# spindle-bench --log-dir: three local members log every subgroup, each in
# DIR/member-<id>; the JSON line reports every record durable with far
# fewer fdatasync calls than records and the persistence frontier's lag
# (p50 above 0, p99 at least p50, both below the run's 120 s limit; the
# text report names them too), spindle-log finds the three logs in
# agreement, and an unordered run is refused by name.
set -eu
bench=$1
tool=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/spindle-benchlog.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$bench" --local 3 --messages 3000 --msg-size 64 --log-dir "$work/logs" >"$work/out"
line=$(tail -n 1 "$work/out")
echo "$line"
grep -q "persistence frontier lag (delivery here to durable at every member): p50 " "$work/out"
field() {
    echo "$line" | sed -n "s/.*\"$1\":\([0-9.e+]*\).*/\1/p"
}
# 3 members x 9000 delivered messages, plus each member's first view.
if [ "$(field log_records)" != 27003 ]; then
    echo "FAIL: log_records is '$(field log_records)', not 27003" >&2
    exit 1
fi
syncs=$(field log_syncs)
if [ -z "$syncs" ] || [ "$syncs" -lt 3 ] || [ "$syncs" -gt 6750 ]; then
    echo "FAIL: log_syncs '$syncs' is not between 3 and 6750 (one per 4 records)" >&2
    exit 1
fi
p50=$(field frontier_lag_p50_us)
p99=$(field frontier_lag_p99_us)
per_message=$(field fdatasync_per_message)
if ! awk -v a="$p50" -v b="$p99" -v s="$per_message" 'BEGIN {
        exit !(a != "" && b != "" && s != "" && a > 0 && b >= a && b < 120e6 && s > 0 && s <= 0.25)
    }'; then
    echo "FAIL: frontier lag p50 '$p50' us, p99 '$p99' us, fdatasync per message '$per_message'" >&2
    exit 1
fi
"$tool" compare "$work/logs/member-0" "$work/logs/member-1" "$work/logs/member-2" |
    grep -q "agree: 9000 messages and 1 views"
if "$bench" --local 2 --messages 10 --mode unordered --log-dir "$work/unordered" \
    >/dev/null 2>"$work/err"; then
    echo "FAIL: an unordered logged run was accepted" >&2
    exit 1
fi
grep -q "unordered and cannot be logged" "$work/err"
echo "ok: spindle-bench --log-dir logs every delivered message, in agreement"
