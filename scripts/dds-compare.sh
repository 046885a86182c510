#!/bin/bash
# Figure 18 of the Spindle paper on this host (docs/DDS.md "Performance"):
# one publisher and 1 to 3 subscribers, each a process, 10 KB samples, for
# each QoS spindle-dds-perf optimized and --baseline, and the same cases
# through Cyclone DDS ddsperf (reliable, keep-all, UDP unicast on
# loopback), all in one run; for the logged QoS at 2 subscribers also the
# raw append rate of the same disk (spindle-rawbench --append --direct,
# three writers batching as the logged run's log did, as
# scripts/log-reference.sh measures it).
#
# Rounds interleave every case so that drift in the machine's load falls
# on all of them; the medians over rounds and the ratios (medians of each
# round's own ratio) are printed as a markdown table, every run's JSON
# line kept in OUT/results.jsonl.
#
# Usage: bash scripts/dds-compare.sh [BUILD_DIR] [OUT_DIR]
#   RUNS=3              rounds
#   SUBSCRIBERS="1 2 3" subscriber counts
#   SIZE=10240          sample bytes
#   SAMPLES=100000      samples per spindle-dds-perf run (LOGGED_SAMPLES=20000
#                       for the logged QoS, which writes them to disk)
#   DDS_SECONDS=5       ddsperf's measured seconds (after a 1 s warm-up)
#   OUT_DIR             results and logs (default BUILD_DIR/dds-compare); a
#                       real disk, not tmpfs, or the logged figures say nothing
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$BUILD/dds-compare}
RUNS=${RUNS:-3}
read -r -a COUNTS <<<"${SUBSCRIBERS:-1 2 3}"
SIZE=${SIZE:-10240}
SAMPLES=${SAMPLES:-100000}
LOGGED_SAMPLES=${LOGGED_SAMPLES:-20000}
DDS_SECONDS=${DDS_SECONDS:-5}
WARMUP=1
PERF=$BUILD/examples/dds/spindle-dds-perf
RAW=$BUILD/tools/rawbench/spindle-rawbench
die() {
    echo "dds-compare: $*" >&2
    exit 1
}
for tool in "$PERF" "$RAW"; do
    [ -x "$tool" ] || die "$tool not found (make build first)"
done
command -v jq >/dev/null || die "needs jq (apt-get install jq)"
command -v ddsperf >/dev/null || die "needs ddsperf (apt-get install cyclonedds-tools)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
FS=$(df -T "$OUT" | awk 'NR == 2 { print $2 " on " $1 }')
case $FS in tmpfs*) echo "dds-compare: warning: $OUT is on tmpfs: no disk is measured" >&2 ;; esac
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

# Cyclone on the loopback interface, unicast only (as scripts/compare-peers.sh).
cat >"$OUT/cyclonedds.xml" <<'EOF'
<CycloneDDS>
  <Domain id="any">
    <General>
      <Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>
      <AllowMulticast>false</AllowMulticast>
    </General>
    <Discovery>
      <ParticipantIndex>auto</ParticipantIndex>
      <MaxAutoParticipantIndex>20</MaxAutoParticipantIndex>
      <Peers><Peer address="127.0.0.1"/></Peers>
    </Discovery>
  </Domain>
</CycloneDDS>
EOF
export CYCLONEDDS_URI="file://$OUT/cyclonedds.xml"

# keep KIND SUBSCRIBERS RUN: appends the last line of standard input, tagged.
keep() {
    local line
    line=$(tail -n 1)
    [ "${line:0:1}" = "{" ] || die "$1 run $3 with $2 subscribers printed no figures"
    jq -c --arg kind "$1" --argjson n "$2" --argjson run "$3" \
        '. + {kind: $kind, n: $n, run: $run}' <<<"$line" >>"$RESULTS"
}

# cyclone N: one ddsperf publisher and N subscribers; each subscriber's
# mean per-second rate after the warm-up, the slowest subscriber's.
cyclone() {
    local i pids=() seconds=$((WARMUP + DDS_SECONDS + 1))
    rm -f "$OUT"/dds-*.out
    for ((i = 1; i <= $1; i++)); do
        ddsperf -k all -D "$seconds" -Q minmatch:1 -Q initwait:20 sub >"$OUT/dds-$i.out" 2>&1 &
        pids+=($!)
    done
    ddsperf -k all -D "$seconds" -Q "minmatch:$1" -Q initwait:20 pub size "$SIZE" \
        >"$OUT/dds-pub.out" 2>&1 || die "ddsperf pub failed: $(tail -n 3 "$OUT/dds-pub.out")"
    for i in "${pids[@]}"; do
        wait "$i" || die "ddsperf sub exited with an error: $(tail -n 3 "$OUT"/dds-*.out)"
    done
    for ((i = 1; i <= $1; i++)); do
        awk -v w="$WARMUP" -v d="$DDS_SECONDS" '
            # "[pid] T  size S total N lost L delta D lost L rate X kS/s ..."
            $3 == "size" && $5 == "total" && $2 > w + 0.5 && $2 <= w + d + 0.5 {
                for (i = 1; i < NF; i++)
                    if ($i == "rate") {
                        v = $(i + 1); u = $(i + 2)
                        if (u == "kS/s") v *= 1e3; else if (u == "MS/s") v *= 1e6
                        sum += v; count++
                    }
                lost += $8
            }
            END { if (count == 0) exit 1; printf "%.1f %d\n", sum / count, lost }' \
            "$OUT/dds-$i.out" || die "no ddsperf throughput lines in $OUT/dds-$i.out"
    done | jq -Rsc --argjson size "$SIZE" --argjson n "$1" '
        split("\n") | map(select(length > 0) | split(" ") | map(tonumber)) as $subs |
        {qos: "cyclone", subscribers: $n, size: $size,
         samples_per_s: ($subs | map(.[0])), samples_per_s_min: ($subs | map(.[0]) | min),
         mb_per_s_min: (($subs | map(.[0]) | min) * $size / 1e6), lost: ($subs | map(.[1]) | add)}'
}

QOS=(unordered atomic volatile logged)
echo "dds-compare: $RUNS rounds, subscribers ${COUNTS[*]}, $SIZE-byte samples, logs in $OUT ($FS)," \
    "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((run = 1; run <= RUNS; run++)); do
    for n in "${COUNTS[@]}"; do
        for qos in "${QOS[@]}"; do
            k=$SAMPLES
            [ "$qos" = logged ] && k=$LOGGED_SAMPLES
            common=(--qos "$qos" --subscribers "$n" --size "$SIZE" --samples "$k"
                --log-dir "$OUT/logs")
            # Alternate which goes first, so neither always meets a warm cache.
            if ((run % 2)); then order=(optimized baseline); else order=(baseline optimized); fi
            for kind in "${order[@]}"; do
                rm -rf "$OUT/logs"
                flag=()
                [ "$kind" = baseline ] && flag=(--baseline)
                "$PERF" "${common[@]}" "${flag[@]}" | keep "$kind" "$n" "$run"
            done
            rm -rf "$OUT/logs"
            if [ "$qos" = logged ] && [ "$n" = 2 ]; then
                batch=$(jq -r "select(.kind == \"optimized\" and .n == 2 and .run == $run and
                    .qos == \"logged\") | .records_per_fdatasync | round |
                    if . < 1 then 1 else . end" "$RESULTS")
                mkdir -p "$OUT/raw"
                "$RAW" --append "$OUT/raw" --writers 3 --batch "$batch" \
                    --msg-size $((SIZE + 32)) --messages "$LOGGED_SAMPLES" --direct |
                    keep raw "$n" "$run"
                rm -rf "$OUT/raw"
            fi
        done
        cyclone "$n" | keep cyclone "$n" "$run"
        echo "dds-compare: round $run, $n subscribers done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
done

jq -rs --arg fs "$FS" --argjson runs "$RUNS" '
    def median: sort | if length == 0 then null else .[(length - 1) / 2 | floor] end;
    def r(x): if x == null then "-" else (x * 100 | round / 100 | tostring) end;
    def k(x): if x == null then "-" else (x / 100 | round / 10 | tostring + "k") end;
    def one($kind; $n; $qos; $run): map(select(.kind == $kind and .n == $n and .qos == $qos and
                                                .run == $run))[0];
    . as $all |
    "| subscribers | QoS | optimized, samples/s per subscriber | baseline | optimized / baseline | Cyclone ddsperf | optimized / Cyclone | optimized MB/s | p50 / p99 latency, us |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ([$all[] | .n] | unique[] as $n |
        ["unordered", "atomic", "volatile", "logged"][] as $qos |
        [range(1; $runs + 1)] as $rounds |
        ($all | map(select(.kind == "optimized" and .n == $n and .qos == $qos))) as $opt |
        ($all | map(select(.kind == "baseline" and .n == $n and .qos == $qos))) as $base |
        ($all | map(select(.kind == "cyclone" and .n == $n))) as $cyc |
        ($rounds | map(. as $i | ($all | one("optimized"; $n; $qos; $i).samples_per_s_min) /
                                 ($all | one("baseline"; $n; $qos; $i).samples_per_s_min)) | median) as $ob |
        ($rounds | map(. as $i | ($all | one("optimized"; $n; $qos; $i).samples_per_s_min) /
                                 ($all | one("cyclone"; $n; "cyclone"; $i).samples_per_s_min)) | median) as $oc |
        "| \($n) | \($qos) | \(k($opt | map(.samples_per_s_min) | median)) | \(k($base | map(.samples_per_s_min) | median)) | \(r($ob)) | \(k($cyc | map(.samples_per_s_min) | median)) | \(r($oc)) | \(r($opt | map(.mb_per_s_min) | median)) | \(r($opt | map(.latency_p50_us) | median)) / \(r($opt | map(.latency_p99_us) | median)) |"),
    "",
    ([range(1; $runs + 1)] | map(. as $i |
        ($all | map(select(.kind == "optimized" and .n == 2 and .qos == "logged" and .run == $i))[0].samples_per_s_min) /
        ($all | map(select(.kind == "raw" and .run == $i))[0].append_records_per_s)) | median) as $lr |
    "Logged at 2 subscribers against the raw append rate of the disk (3 writers, batched as the log was): \(k($all | map(select(.kind == "raw").append_records_per_s) | median)) records/s per writer, logged / raw \(r($lr)).",
    "",
    "Medians of \($runs) rounds; the ratios are medians of each round'"'"'s own ratio. Disk: \($fs)."
' "$RESULTS"
