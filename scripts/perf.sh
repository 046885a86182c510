#!/bin/sh
# Runs the docs/PERFORMANCE.md experiments with spindle-bench (and the raw
# transport reference with spindle-rawbench), RUNS times each, and prints
# markdown tables of the medians (from the JSON line each run prints last).
# Also draws the batch-size histogram with gnuplot.
#
# Usage: sh scripts/perf.sh [BUILD_DIR] [OUT_DIR]
#   RUNS=3 (default) repetitions per experiment; QUICK=1 shrinks message counts.
#   TRANSPORT=fabric [PROVIDER=tcp] runs every experiment, raw reference
#   included, over libfabric instead of shared memory; labels and table rows
#   then carry "fabric/PROVIDER".
# Raw results: OUT_DIR/results.tsv (label <TAB> command <TAB> JSON line).
set -eu
BUILD=${1:-build}
OUT=${2:-$BUILD/perf}
RUNS=${RUNS:-3}
BENCH="$BUILD/tools/bench/spindle-bench"
RAWBENCH="$BUILD/tools/rawbench/spindle-rawbench"
for tool in "$BENCH" "$RAWBENCH"; do
    [ -x "$tool" ] || { echo "perf: $tool not found (build first)" >&2; exit 1; }
done
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"
: >"$RESULTS"
N=${MESSAGES:-20000}
[ "${QUICK:-0}" = 1 ] && N=3000
TRANSPORT=${TRANSPORT:-shm}
if [ "$TRANSPORT" = shm ]; then
    TARGS="" TAG=""
else
    PROVIDER=${PROVIDER:-tcp}
    TARGS="--transport $TRANSPORT --provider $PROVIDER" TAG="$TRANSPORT/$PROVIDER "
fi

# run_tool TOOL LABEL ARGS...: RUNS repetitions, each appending one line.
run_tool() {
    tool=$1
    label=$2
    shift 2
    i=0
    while [ $i -lt "$RUNS" ]; do
        # shellcheck disable=SC2086
        line=$("$tool" "$@" $TARGS | tail -n 1) ||
            { echo "perf: FAILED: $(basename "$tool") $* $TARGS" >&2; exit 1; }
        printf '%s\t%s\t%s\n' "$label" "$(basename "$tool") $* $TARGS" "$line" >>"$RESULTS"
        i=$((i + 1))
    done
    echo "perf: $label done" >&2
}
run() { run_tool "$BENCH" "$@"; }

msgs_for() { # size -> messages per sender (10 KB runs move 10x the bytes)
    if [ "$1" -ge 10240 ]; then echo $((N / 4)); else echo "$N"; fi
}

# 1. raw transport reference, per size (same run of this script)
for size in 1 128 1024 10240; do
    run_tool "$RAWBENCH" "raw-$size" --local 2 --msg-size "$size" --window 100 \
        --messages "$(msgs_for "$size")"
done
# 2. members x senders x sizes (window 100)
for members in 2 3 4; do
    for senders in all half one; do
        for size in 1 128 1024 10240; do
            [ "$members" = 3 ] || [ "$size" = 1024 ] || continue
            run "m$members-$senders-$size" --local "$members" --senders "$senders" \
                --msg-size "$size" --window 100 --messages "$(msgs_for "$size")"
        done
    done
done
# 3. window sizes (3 members, all senders, 1 KB)
for window in 5 20 100 1000; do
    run "window-$window" --local 3 --msg-size 1024 --window "$window" --messages "$N"
done
# 4. one sender delayed after every send
for delay in 1 100; do
    count=$N
    [ "$delay" = 100 ] && count=$((N / 4))
    run "delay-$delay" --local 3 --msg-size 1024 --window 100 --messages "$count" \
        --delay-us "$delay" --delayed-senders 1
    run "delay-$delay-nonulls" --local 3 --msg-size 1024 --window 100 --messages "$count" \
        --delay-us "$delay" --delayed-senders 1 --no-nulls
done
# 5. one active subgroup among 10 and 50
for groups in 1 10 50; do
    run "subgroups-$groups" --local 3 --msg-size 1024 --window 100 --messages "$N" \
        --subgroups "$groups" --active-subgroups 1
done
# 6. ablation (3 members, all senders, 1 KB)
A="--local 3 --msg-size 1024 --window 100 --messages $((N / 2))"
run "abl-baseline" $A --baseline
run "abl-batching" $A --no-nulls --no-early-unlock
run "abl-nulls" $A --no-early-unlock
run "abl-unlock" $A

# ---- medians ---------------------------------------------------------
# median LABEL FIELD
median() {
    awk -F '\t' -v label="$1" -v field="$2" '
        $1 == label {
            if (match($3, "\"" field "\":[-0-9.e+]+")) {
                v = substr($3, RSTART + length(field) + 3, RLENGTH - length(field) - 3)
                vals[n++] = v + 0
            }
        }
        END {
            if (n == 0) { print "-"; exit }
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
                if (vals[j] < vals[i]) { t = vals[i]; vals[i] = vals[j]; vals[j] = t }
            printf "%.6g\n", vals[int(n / 2)]
        }' "$RESULTS"
}
cmd_of() { awk -F '\t' -v label="$1" '$1 == label { print $2; exit }' "$RESULTS"; }

echo "## Results ${TAG}(median of $RUNS runs; $(nproc) cores; $(date -u +%Y-%m-%d))"
echo
echo "### Raw transport reference (spindle-rawbench)"
echo
echo "| size | raw MB/s | raw writes/s | 8-byte latency us | command |"
echo "| --- | ---: | ---: | ---: | --- |"
for size in 1 128 1024 10240; do
    echo "| $TAG$size | $(median raw-$size raw_mb_per_s) | $(median raw-$size raw_msgs_per_s) |" \
        "$(median raw-$size raw_latency_us) | \`$(cmd_of raw-$size)\` |"
done
echo
table_header() {
    echo "| experiment | msgs/s per member | MB/s per member | efficiency vs raw | p50 us | p99 us | writes/msg | nulls | batch send/recv/deliv | command |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
}
row() { # label size
    mb=$(median "$1" mb_per_s)
    raw=$(median "raw-$2" raw_mb_per_s)
    eff=$(awk -v a="$mb" -v b="$raw" 'BEGIN { if (b + 0 > 0) printf "%.1f%%", 100 * a / b; else print "-" }')
    echo "| $TAG$1 | $(median "$1" msgs_per_s) | $mb | $eff | $(median "$1" p50_latency_us) |" \
        "$(median "$1" p99_latency_us) | $(median "$1" writes_per_message) |" \
        "$(median "$1" nulls_sent) | $(median "$1" send_batch_mean)/$(median "$1" receive_batch_mean)/$(median "$1" delivery_batch_mean) |" \
        "\`$(cmd_of "$1")\` |"
}
echo "### Members, senders and message sizes (window 100)"
echo
table_header
for members in 2 3 4; do
    for senders in all half one; do
        for size in 1 128 1024 10240; do
            [ "$members" = 3 ] || [ "$size" = 1024 ] || continue
            row "m$members-$senders-$size" "$size"
        done
    done
done
echo
echo "### Window size (3 members, all senders, 1 KB)"
echo
table_header
for window in 5 20 100 1000; do row "window-$window" 1024; done
echo
echo "### One delayed sender (3 members, all senders, 1 KB)"
echo
table_header
for label in m3-all-1024 delay-1 delay-1-nonulls delay-100 delay-100-nonulls; do row "$label" 1024; done
echo
echo "### One active subgroup among many (3 members, all senders, 1 KB)"
echo
table_header
for groups in 1 10 50; do row "subgroups-$groups" 1024; done
echo
echo "### Ablation (3 members, all senders, 1 KB, window 100)"
echo
table_header
for label in abl-baseline abl-batching abl-nulls abl-unlock; do row "$label" 1024; done

# ---- batch-size histogram (first run of m3-all-1024) ------------------
if command -v gnuplot >/dev/null 2>&1; then
    line=$(awk -F '\t' '$1 == "m3-all-1024" { print $3; exit }' "$RESULTS")
    hist() { printf '%s\n' "$line" | sed -n "s/.*\"$1\":\[\([0-9,]*\)\].*/\1/p" | tr ',' '\n'; }
    hist send_hist >"$OUT/send.dat"
    hist receive_hist >"$OUT/receive.dat"
    hist delivery_hist >"$OUT/delivery.dat"
    paste "$OUT/send.dat" "$OUT/receive.dat" "$OUT/delivery.dat" |
        awk '{ printf "%d %s %s %s\n", NR - 1, ($1 == "" ? 0 : $1), ($2 == "" ? 0 : $2), ($3 == "" ? 0 : $3) }' \
            >"$OUT/hist.dat"
    PNG=${PNG:-$OUT/batch-histogram.png}
    gnuplot <<EOF
set terminal png size 900,500
set output "$PNG"
set title "Batch sizes: 3 members, all senders, 1 KB, window 100 (all members)"
set xlabel "batch size bucket: [2^b, 2^(b+1)) messages"
set ylabel "batches"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics ("1" 0, "2-3" 1, "4-7" 2, "8-15" 3, "16-31" 4, "32-63" 5, "64-127" 6, "128-255" 7, "256-511" 8, "512+" 9)
plot "$OUT/hist.dat" using 2 title "send", "" using 3 title "receive", "" using 4 title "delivery"
EOF
    echo
    echo "Histogram: $PNG" >&2
fi
