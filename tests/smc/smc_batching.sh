#!/bin/sh
# With batching on, the number of writes posted per delivered message must be
# far below the baseline's (one write per message, per acknowledgement, per
# delivery). Usage: smc_batching.sh SPINDLE_BENCH
set -eu
BENCH=$1
field() { # json-line name
    printf '%s\n' "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"
}
run() {
    "$BENCH" --local 3 --msg-size 64 --window 50 --messages 3000 --timeout 60 "$@" | tail -n 1
}
opt=$(run)
base=$(run --baseline)
opt_wpm=$(field "$opt" writes_per_message)
base_wpm=$(field "$base" writes_per_message)
opt_n=$(field "$opt" messages_delivered)
base_n=$(field "$base" messages_delivered)
echo "writes per delivered message: batching $opt_wpm, baseline $base_wpm"
[ "$opt_n" = 27000 ] && [ "$base_n" = 27000 ] || { echo "FAIL: delivered $opt_n / $base_n, want 27000"; exit 1; }
# Baseline posts >= 2 writes per message per peer; require batching to cut
# that at least threefold (typically far more).
awk -v o="$opt_wpm" -v b="$base_wpm" 'BEGIN { exit !(b >= 1.0 && o * 3 < b) }' ||
    { echo "FAIL: batching does not reduce writes enough"; exit 1; }
echo "ok"
