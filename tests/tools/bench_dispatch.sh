#!/bin/sh
# spindle-bench --dispatch: three local members take every delivery on a
# dispatching thread of their own, atomic and unordered; with --log-dir
# too, delivery is bounded by the log's queue and the dispatch queue at
# once, and every delivered message is still logged.
set -eu
bench=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/spindle-benchdispatch.XXXXXX")
trap 'rm -rf "$work"' EXIT
field() {
    echo "$1" | sed -n "s/.*\"$2\":\([0-9.e+]*\).*/\1/p"
}
for mode in atomic unordered; do
    line=$("$bench" --local 3 --messages 5000 --msg-size 256 --mode "$mode" --dispatch | tail -n 1)
    if [ "$(field "$line" messages_delivered_total)" != 45000 ]; then
        echo "FAIL: $mode: messages_delivered_total '$(field "$line" messages_delivered_total)', not 45000" >&2
        exit 1
    fi
done
line=$("$bench" --local 3 --messages 3000 --msg-size 64 --dispatch --log-dir "$work/logs" | tail -n 1)
echo "$line"
# 3 members x 9000 delivered messages, plus each member's first view.
if [ "$(field "$line" log_records)" != 27003 ]; then
    echo "FAIL: log_records is '$(field "$line" log_records)', not 27003" >&2
    exit 1
fi
echo "ok: spindle-bench --dispatch delivers everything, logged or not"
