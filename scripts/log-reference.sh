#!/bin/bash
# Logged delivery against its two references, in one run (docs/PERFORMANCE.md
# "Logged delivery"): three local members over shared memory, all sending,
# every subgroup logged (spindle-bench --log-dir), against
#   - the same run without logs, and
#   - the raw append rate of the same disk: three concurrent writers, one per
#     member, appending records of the same size in batches of the size the
#     logged run had, one fdatasync per batch (spindle-rawbench --append
#     --direct: whole blocks with O_DIRECT as the log's writer appends, so the
#     reference does not depend on the page cache a previous run left; RAW_IO=
#     buffered for one buffered pwrite per batch instead).
# Rounds alternate plain, logged and raw for each size; the medians and the
# ratios (logged / plain in messages, logged / raw in records) are printed as
# a markdown table, every run's JSON line kept in OUT/results.jsonl.
#
# Usage: bash scripts/log-reference.sh [BUILD_DIR] [LOG_DIR]
#   LOG_DIR   where the logs and raw files go (default BUILD_DIR/log-reference);
#             a real disk, not tmpfs, or the comparison says nothing
#   RUNS=3    rounds; SIZES="1024 10240" message sizes
#   MESSAGES  messages per sender (default 20000 up to 1 KB, 5000 above)
set -euo pipefail
direct=yes
[ "${RAW_IO:-direct}" = buffered ] && direct=
BUILD=${1:-build}
DIR=${2:-$BUILD/log-reference}
RUNS=${RUNS:-3}
read -r -a SIZES <<<"${SIZES:-1024 10240}"
BENCH=$BUILD/tools/bench/spindle-bench
RAW=$BUILD/tools/rawbench/spindle-rawbench
die() {
    echo "log-reference: $*" >&2
    exit 1
}
for tool in "$BENCH" "$RAW"; do
    [ -x "$tool" ] || die "$tool not found (make build first)"
done
command -v jq >/dev/null || die "needs jq (apt-get install jq)"
mkdir -p "$DIR"
FS=$(df -T "$DIR" | awk 'NR == 2 { print $2 " on " $1 }')
case $FS in tmpfs*) echo "log-reference: warning: $DIR is on tmpfs: no disk is measured" >&2 ;; esac
RESULTS=$DIR/results.jsonl
: >"$RESULTS"

# keep SIZE KIND RUN: appends the last line of standard input, tagged.
keep() {
    local line
    line=$(tail -n 1)
    [ "${line:0:1}" = "{" ] || die "$2 run $3 at $1 bytes printed no figures"
    jq -c --argjson size "$1" --arg kind "$2" --argjson run "$3" \
        '. + {size: $size, kind: $kind, run: $run}' <<<"$line" >>"$RESULTS"
}

messages_for() { if [ "$1" -le 1024 ]; then echo "${MESSAGES:-20000}"; else echo "${MESSAGES:-5000}"; fi; }

echo "log-reference: $RUNS rounds, sizes ${SIZES[*]}, logs in $DIR ($FS)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((run = 1; run <= RUNS; run++)); do
    for size in "${SIZES[@]}"; do
        n=$(messages_for "$size")
        common=(--local 3 --messages "$n" --msg-size "$size" --timeout 300)
        "$BENCH" "${common[@]}" 2>/dev/null | keep "$size" plain "$run"
        rm -rf "$DIR/logs"
        "$BENCH" "${common[@]}" --log-dir "$DIR/logs" 2>/dev/null | keep "$size" logged "$run"
        rm -rf "$DIR/logs"
        logged=$(jq -c "select(.size == $size and .kind == \"logged\" and .run == $run)" "$RESULTS")
        batch=$(jq -r '1 / .fdatasync_per_record | round | if . < 1 then 1 else . end' <<<"$logged")
        records=$(jq -r '.log_records / 3 | floor' <<<"$logged")
        mkdir -p "$DIR/raw"
        "$RAW" --append "$DIR/raw" --writers 3 --batch "$batch" --msg-size "$size" \
            --messages "$records" ${direct:+--direct} | keep "$size" raw "$run"
        echo "log-reference: round $run, $size bytes done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
done

jq -rs --arg fs "$FS" '
    def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
    def r(x): if x == null then "-" else (x * 100 | round / 100 | tostring) end;
    def k(x): if x == null then "-" else (x / 1000 | round | tostring + "k") end;
    "| message | plain, msgs/s per member | logged, msgs/s per member | logged / plain | logged, records/s per member | raw append, records/s per writer | logged / raw | fdatasync per record | records per fdatasync |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    (group_by(.size)[] |
        . as $all | $all[0].size as $size |
        [range(1; ($all | map(.run) | max) + 1)] as $runs |
        ($runs | map(. as $i | $all | map(select(.run == $i))) ) as $rounds |
        ($rounds | map((map(select(.kind == "logged"))[0].msgs_per_s) /
                       (map(select(.kind == "plain"))[0].msgs_per_s)) | median) as $lp |
        ($rounds | map((map(select(.kind == "logged"))[0].log_records_per_s) /
                       (map(select(.kind == "raw"))[0].append_records_per_s)) | median) as $lr |
        "| \($size) B | \(k($all | map(select(.kind == "plain").msgs_per_s) | median)) | \(k($all | map(select(.kind == "logged").msgs_per_s) | median)) | \(r($lp)) | \(k($all | map(select(.kind == "logged").log_records_per_s) | median)) | \(k($all | map(select(.kind == "raw").append_records_per_s) | median)) | \(r($lr)) | \($all | map(select(.kind == "logged").fdatasync_per_record) | median) | \($all | map(select(.kind == "raw").batch) | median) |"),
    "",
    "Medians of \($all_runs) rounds; the ratios are medians of each round'"'"'s own ratio. Disk: \($fs)."
' --argjson all_runs "$RUNS" "$RESULTS"
rm -rf "$DIR/raw" "$DIR/logs"
