#!/bin/sh
# Drives spindle-bench --local with --trace and checks that every member of
# a group delivered the same sequence, per subgroup, for 2, 3 and 4 members,
# message sizes 1, 128, 1024 and 10240 bytes, three overlapping subgroups
# (two active) and small windows (many ring wrap-arounds).
# Usage: smc_traces.sh SPINDLE_BENCH
# The environment may narrow or redirect the runs (fabric_hosts.cmake does):
#   SPINDLE_TRACE_MEMBERS, SPINDLE_TRACE_SIZES, SPINDLE_TRACE_WINDOWS  lists to run
#   SPINDLE_TRACE_MESSAGES    messages per sender (default 120)
#   SPINDLE_TRACE_BENCH_ARGS  extra spindle-bench flags (e.g. --transport fabric)
set -eu
BENCH=$1
MEMBER_COUNTS=${SPINDLE_TRACE_MEMBERS:-2 3 4}
SIZES=${SPINDLE_TRACE_SIZES:-1 128 1024 10240}
WINDOWS=${SPINDLE_TRACE_WINDOWS:-7}
BENCH_ARGS=${SPINDLE_TRACE_BENCH_ARGS:-}
WORK=$(mktemp -d /tmp/spindle-traces-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
MESSAGES=${SPINDLE_TRACE_MESSAGES:-120}

check() { # members size window
    members=$1 size=$2 window=$3
    dir="$WORK/n$members-s$size-w$window"
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    if ! "$BENCH" --local "$members" --msg-size "$size" --window "$window" \
        --messages $MESSAGES --subgroups 3 --active-subgroups 2 --trace "$dir" \
        --timeout 60 $BENCH_ARGS >"$dir/out" 2>&1; then
        echo "FAIL: spindle-bench --local $members --msg-size $size --window $window $BENCH_ARGS exited non-zero"
        cat "$dir/out"
        exit 1
    fi
    for sg in 0 1; do
        ref=""
        for m in $(seq 0 $((members - 1))); do
            f="$dir/member-$m.trace"
            [ -s "$f" ] || { echo "FAIL: $f missing or empty"; exit 1; }
            awk -v g=$sg '$2 == g' "$f" >"$f.$sg"
            lines=$(wc -l <"$f.$sg")
            want=$((members * MESSAGES))
            if [ "$lines" -ne "$want" ]; then
                echo "FAIL: $f subgroup $sg has $lines deliveries, want $want"
                exit 1
            fi
            # Every line: view 0, the right length, per-sender indexes 0.. in order.
            awk -v g=$sg -v size=$size -v msgs=$MESSAGES '
                $1 != 0 || $5 != size { print "bad line " NR ": " $0; exit 1 }
                { if ($4 != next_index[$3]) { print "sender " $3 " index " $4 " out of order"; exit 1 }
                  next_index[$3]++ }' "$f.$sg" || { echo "FAIL: $f"; exit 1; }
            if [ -z "$ref" ]; then
                ref="$f.$sg"
            elif ! cmp -s "$ref" "$f.$sg"; then
                echo "FAIL: $f.$sg differs from $ref"
                diff "$ref" "$f.$sg" | head -5
                exit 1
            fi
        done
    done
    echo "ok: $members members, $size B, window $window $BENCH_ARGS: identical traces"
}

for members in $MEMBER_COUNTS; do
    for size in $SIZES; do
        for window in $WINDOWS; do
            check "$members" "$size" "$window"
        done
    done
done
