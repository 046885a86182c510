#!/bin/bash
# Runs the libFuzzer targets of a SPINDLE_FUZZ=ON build (docs/FUZZING.md)
# for a bounded time each and reports, per target: executions, edges (cov),
# features (ft), corpus size and findings (crash, leak, timeout and oom
# files). Each run starts from a scratch copy of the target's seed corpus
# (BUILD_DIR/tests/fuzz/seeds/TARGET, written at build time), so nothing in
# the source tree changes; corpora, findings and logs stay in
# BUILD_DIR/fuzz-runs/TARGET/.
#
# Usage: scripts/fuzz.sh [-j JOBS] BUILD_DIR SECONDS [TARGET...]
#   JOBS     targets run at once (default: the number of cores); the whole
#            run takes about ceil(targets / JOBS) * SECONDS
#   TARGET   default: every target the build has (BUILD_DIR/tests/fuzz/targets.txt)
#   FUZZ_ARGS (environment) extra libFuzzer flags for every target
#
# Exits 0 when every target ran its time with no finding; 1 when any target
# found something or failed to start; 2 on a usage error.
set -euo pipefail

usage() {
    echo "usage: $0 [-j JOBS] BUILD_DIR SECONDS [TARGET...]" >&2
    exit 2
}

jobs=$(nproc)
while getopts "j:" opt; do
    case "$opt" in
        j) jobs=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || usage
build=$1
seconds=$2
shift 2
case "$seconds" in '' | *[!0-9]*) usage ;; esac
case "$jobs" in '' | *[!0-9]* | 0) usage ;; esac

src=$(cd "$(dirname "$0")/.." && pwd)
fuzz_dir=$build/tests/fuzz
if [ $# -gt 0 ]; then
    targets=("$@")
elif [ -f "$fuzz_dir/targets.txt" ]; then
    mapfile -t targets <"$fuzz_dir/targets.txt"
else
    echo "fuzz: $fuzz_dir/targets.txt not found: configure $build with -DSPINDLE_FUZZ=ON" \
        "(CC=clang) and build it first" >&2
    exit 1
fi
runs=$build/fuzz-runs
mkdir -p "$runs"

# run_one TARGET: one libFuzzer run; leaves TARGET.result (one line of
# key=value pairs) in $runs.
run_one() {
    local target=$1 dir=$runs/$1
    rm -rf "$dir"
    mkdir -p "$dir/corpus" "$dir/findings"
    local binary=$fuzz_dir/$target
    local result="target=$target"
    if [ ! -x "$binary" ]; then
        echo "$result status=missing" >"$runs/$target.result"
        return
    fi
    if [ -d "$fuzz_dir/seeds/$target" ]; then
        cp -R "$fuzz_dir/seeds/$target/." "$dir/corpus/"
    fi
    local args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=25
        -rss_limit_mb=2048 -artifact_prefix="$dir/findings/")
    if [ -f "$src/tests/fuzz/$target.dict" ]; then
        args+=(-dict="$src/tests/fuzz/$target.dict")
    fi
    # shellcheck disable=SC2206
    args+=(${FUZZ_ARGS:-})
    local start end rc=0
    start=$(date +%s)
    # A safety net only: libFuzzer stops itself after max_total_time, and
    # -timeout catches a single input that hangs.
    timeout -k 10 $((seconds + 120)) "$binary" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 ||
        rc=$?
    end=$(date +%s)
    # Final figures: libFuzzer's last status line ("#N DONE cov: ... ft:
    # ... corp: units/bytes ...") and its final statistics.
    local status_line execs cov ft corp findings
    status_line=$(grep -E '^#[0-9]+' "$dir/log" | grep 'cov:' | tail -n 1 || true)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -n 1)
    [ -n "$execs" ] || execs=$(printf '%s' "$status_line" | sed -n 's/^#\([0-9]*\).*/\1/p')
    cov=$(printf '%s' "$status_line" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(printf '%s' "$status_line" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(printf '%s' "$status_line" | sed -n 's/.* corp: \([^ ]*\).*/\1/p')
    findings=$(find "$dir/findings" -type f | wc -l)
    local status=ok
    if ! grep -q '^INFO: Seed:' "$dir/log"; then
        status=no-start
    elif [ "$findings" -gt 0 ]; then
        status=FOUND
    elif [ "$rc" -ne 0 ]; then
        status=exit-$rc
    fi
    echo "$result status=$status seconds=$((end - start)) execs=${execs:-?} cov=${cov:-?}" \
        "ft=${ft:-?} corp=${corp:-?} findings=$findings" >"$runs/$target.result"
}

echo "fuzz: ${#targets[@]} targets, ${seconds} s each, $jobs at a time; output in $runs/"
wall_start=$(date +%s)
running=0
for target in "${targets[@]}"; do
    rm -f "$runs/$target.result"
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_one "$target" &
    running=$((running + 1))
done
wait || true
wall=$(($(date +%s) - wall_start))

# field NAME: the value of NAME= in $line.
field() { printf '%s\n' "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

failed=0
printf '%-26s %7s %12s %6s %7s %14s %8s  %s\n' target seconds executions cov ft corpus findings \
    status
for target in "${targets[@]}"; do
    line=$(cat "$runs/$target.result" 2>/dev/null || echo "target=$target status=no-result")
    status=$(field status)
    printf '%-26s %7s %12s %6s %7s %14s %8s  %s\n' "$target" "$(field seconds)" \
        "$(field execs)" "$(field cov)" "$(field ft)" "$(field corp)" "$(field findings)" \
        "$status"
    if [ "$status" = missing ]; then
        failed=1
        echo "    not built: $fuzz_dir/$target"
        continue
    elif [ "$status" != ok ]; then
        failed=1
        for finding in "$runs/$target"/findings/*; do
            [ -f "$finding" ] && echo "    finding: $finding"
        done
        echo "    log: $runs/$target/log"
        grep -E 'ERROR|SUMMARY|runtime error|fuzz check failed' "$runs/$target/log" 2>/dev/null |
            head -n 5 | sed 's/^/    /' || true
    fi
done
echo "fuzz: wall time ${wall} s"
if [ "$failed" -ne 0 ]; then
    echo "fuzz: FAILED: a target found something or did not run (see above)" >&2
    exit 1
fi
echo "fuzz: no findings"
