#!/bin/sh
# Drives spindle-bench --local with --trace and checks that every member of
# a group delivered the same sequence, per subgroup, for 2, 3 and 4 members,
# message sizes 1, 128, 1024 and 10240 bytes, three overlapping subgroups
# (two active) and small windows (many ring wrap-arounds).
# Usage: smc_traces.sh SPINDLE_BENCH
set -eu
BENCH=$1
WORK=$(mktemp -d /tmp/spindle-traces-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
MESSAGES=120

check() { # members size window
    members=$1 size=$2 window=$3
    dir="$WORK/n$members-s$size"
    mkdir -p "$dir"
    if ! "$BENCH" --local "$members" --msg-size "$size" --window "$window" \
        --messages $MESSAGES --subgroups 3 --active-subgroups 2 --trace "$dir" \
        --timeout 60 >"$dir/out" 2>&1; then
        echo "FAIL: spindle-bench --local $members --msg-size $size exited non-zero"
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
    echo "ok: $members members, $size B, window $window: identical traces"
}

for members in 2 3 4; do
    for size in 1 128 1024 10240; do
        check "$members" "$size" 7
    done
done
