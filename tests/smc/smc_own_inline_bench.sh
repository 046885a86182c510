#!/bin/sh
# Unordered, own deliveries inline, a small window, every member sending:
# the committing thread's own passes and the predicate thread both push, and
# sent_num must never reach a peer before the ring data it covers (a
# receiver would skip those messages as nulls). Every member must deliver
# every message, in three runs. Usage: smc_own_inline_bench.sh SPINDLE_BENCH
set -eu
BENCH=$1
for run in 1 2 3; do
    line=$("$BENCH" --local 3 --mode unordered --own-inline --msg-size 64 --window 8 \
        --messages 5000 --timeout 60 | tail -n 1) || { echo "FAIL: run $run: spindle-bench failed"; exit 1; }
    n=$(printf '%s\n' "$line" | sed -n 's/.*"messages_delivered":\([0-9]*\).*/\1/p')
    [ "$n" = 45000 ] || { echo "FAIL: run $run delivered $n, want 45000"; exit 1; }
done
echo "ok: 3 runs, every member delivered all 15000 messages"
