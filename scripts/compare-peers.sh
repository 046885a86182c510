#!/bin/bash
# libspindle side by side with two peers on this host: Eclipse Cyclone DDS
# (its ddsperf, reliable, keep-all) and Corosync CPG (scripts/peers/cpgbench.c,
# agreed order). Run by hand, as root: it installs the peers' Debian
# packages when they are missing, builds cpgbench with cc against libcpg,
# starts its own corosync bound to 127.0.0.1 (and stops it on any exit),
# runs every case RUNS times and prints markdown tables of the medians,
# libspindle-to-peer ratios, each peer's exact configuration and what each
# system guarantees.
#
# Cases (three processes on this host; libspindle over shared memory):
#   throughput: every process sends as fast as it can, 1 KB and 10 KB
#     messages, windows 100 and 1000 (libspindle atomic and unordered; CPG:
#     at most W own messages sent and not yet delivered back; Cyclone has no
#     window: its writer's history cache holds back a keep-all writer);
#   light load: every process sends 1000, then 10 messages per second of
#     1 KB; p50/p99 of the latency from send to the sender's own delivery
#     (libspindle atomic, unordered, and unordered with --own-inline; CPG),
#     and ddsperf's ping-pong round trip (Cyclone, two processes);
#   with --netns, three hosts for real: three network namespaces on one
#     bridge (veth pairs, 10.x addresses, as tests/fabric-hosts does), one
#     process in each, throughput at 1 KB and 10 KB, window 100: libspindle
#     over libfabric tcp, Corosync over knet (UDP; one corosync in each
#     namespace), Cyclone over UDP unicast; and the light-load rates there
#     (Cyclone's ping in the first namespace, its pong in the second).
#
# Usage: sudo bash scripts/compare-peers.sh [--runs N] [--duration S]
#        [--latency-duration S] [--warmup S] [--out DIR] [--plots DIR]
#   --runs N               repetitions of every case (default 3); medians are printed
#   --duration S           measured seconds of a throughput run (default 5)
#   --latency-duration S   measured seconds of a light-load run (default 10)
#   --warmup S             seconds left out at the start of every run (default 1)
#   --out DIR              keep every run's figures in DIR/results.jsonl (one JSON
#                          object a run) and the peers' configuration files
#   --plots DIR            draw DIR/peers-throughput.png, DIR/peers-latency.png and
#                          DIR/peers-latency-cdf.png (every light-load sample of every
#                          run, libspindle and CPG; Cyclone's percentiles as points)
#                          with gnuplot
#   --netns                also the three-namespace cases
#   --netns-only           only the three-namespace cases
#   --from DIR             run nothing: print the tables (and draw the plots) again
#                          from an earlier --out DIR
# SPINDLE_BENCH names spindle-bench (default build/tools/bench/spindle-bench,
# built with make when missing).
set -euo pipefail

RUNS=3 DURATION=5 LAT_DURATION=10 WARMUP=1 OUT="" PLOTS="" NETNS=0 FROM=""
SIZES=(1024 10240)
WINDOWS=(100 1000)
RATES=(1000 10)
PROCS=3

die() {
    echo "compare-peers: $*" >&2
    exit 1
}
number() { [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1 '$2' must be a positive number"; }
while [ $# -gt 0 ]; do
    if [ "$1" = --netns ] || [ "$1" = --netns-only ]; then
        NETNS=1
        [ "$1" = --netns ] || NETNS=2
        shift
        continue
    fi
    [ $# -ge 2 ] || die "$1 needs a value (see the top of $0)"
    case $1 in
    --runs) [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--runs '$2' must be a whole number >= 1"; RUNS=$2 ;;
    --duration) number "$1" "$2"; DURATION=$2 ;;
    --latency-duration) number "$1" "$2"; LAT_DURATION=$2 ;;
    --warmup) number "$1" "$2"; WARMUP=$2 ;;
    --out) OUT=$2 ;;
    --plots) PLOTS=$2 ;;
    --from) [ -f "$2/results.jsonl" ] || die "--from $2: no results.jsonl there"; FROM=$2 ;;
    *) die "unknown option '$1' (see the top of $0)" ;;
    esac
    shift 2
done
[ -n "$FROM" ] || [ "$(id -u)" -eq 0 ] ||
    die "run as root: it installs packages and starts corosync"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${SPINDLE_BENCH:-$ROOT/build/tools/bench/spindle-bench}
WORK=$(mktemp -d /tmp/compare-peers-XXXXXX)
COROSYNC_PID=""
# --netns: names carry the PID; a 10.x /24 from the PID keeps parallel runs apart.
TAG=$$
BRIDGE="cpbr$TAG"
NET="10.$((100 + TAG % 100)).$((TAG / 100 % 250))"
NS_COROSYNC_PIDS=()
# Commands run before ddsperf's pong and ping (a namespace, its XML), or none.
DDS_PONG=() DDS_PING=()
ns() { echo "peers-$TAG-$1"; }
veth_host() { echo "cp${TAG}h$1"; }
veth_ns() { echo "cp${TAG}n$1"; }
# shellcheck disable=SC2317 # called from the trap
cleanup() {
    local pid i
    for pid in "$COROSYNC_PID" "${NS_COROSYNC_PIDS[@]}"; do
        [ -n "$pid" ] || continue
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ "$NETNS" != 0 ]; then
        for i in 0 1 2; do
            ip netns del "$(ns "$i")" 2>/dev/null || true
            ip link del "$(veth_host "$i")" 2>/dev/null || true
        done
        ip link del "$BRIDGE" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
[ -z "$OUT" ] || mkdir -p "$OUT"
if [ -n "$FROM" ]; then
    RESULTS=$FROM/results.jsonl
    SAMPLES=$FROM/latency
    RUNS=$(jq -s 'map(.run) | max' "$RESULTS")
    cp "$FROM"/*.conf "$FROM"/*.xml "$FROM"/*.ini "$WORK/" 2>/dev/null || true
else
    RESULTS=${OUT:-$WORK}/results.jsonl
    : >"$RESULTS"
    # The light-load runs' samples: SAMPLES/SYSTEM-RATE-RUN/member-<i>.latency
    # (nanoseconds, one a line; Cyclone: ddsperf's ping output).
    SAMPLES=${OUT:-$WORK}/latency
    rm -rf "$SAMPLES"
fi

# The peers and the tools the script uses, installed once.
install_peers() {
    local missing=() pkg
    for pkg in cyclonedds-tools corosync libcpg-dev jq gcc libc6-dev gnuplot-nox; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
            missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "compare-peers: installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >/dev/null
    fi
}

# One corosync of our own, one node on 127.0.0.1, no crypto; ready when
# corosync-cpgtool (a CPG client) gets an answer.
start_corosync() {
    if corosync-cpgtool >/dev/null 2>&1; then
        die "a corosync is already running and answering (pid $(pgrep -x corosync | xargs)):" \
            "the comparison starts its own on 127.0.0.1; stop that one first"
    fi
    cat >"$WORK/corosync.conf" <<'EOF'
totem {
    version: 2
    cluster_name: compare-peers
    transport: knet
    crypto_cipher: none
    crypto_hash: none
}
nodelist {
    node {
        ring0_addr: 127.0.0.1
        name: local
        nodeid: 1
    }
}
quorum {
    provider: corosync_votequorum
}
logging {
    to_stderr: yes
    to_logfile: no
    to_syslog: no
}
EOF
    corosync -f -c "$WORK/corosync.conf" >"$WORK/corosync.log" 2>&1 &
    COROSYNC_PID=$!
    local tries=0
    until corosync-cpgtool >/dev/null 2>&1; do
        tries=$((tries + 1))
        kill -0 "$COROSYNC_PID" 2>/dev/null || {
            cat "$WORK/corosync.log" >&2
            die "corosync exited at start"
        }
        [ "$tries" -lt 200 ] || die "corosync did not answer CPG clients within 20 s"
        sleep 0.1
    done
}

# Cyclone on the loopback interface, unicast only (no multicast on lo).
write_cyclone_config() {
    cat >"$WORK/cyclonedds.xml" <<'EOF'
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
    export CYCLONEDDS_URI="file://$WORK/cyclonedds.xml"
}

# record SYSTEM CASE SIZE WINDOW RATE RUN COMMAND...: runs COMMAND and
# appends one line to results.jsonl from the JSON object it prints (with
# msgs_per_s, mb_per_s, p50_latency_us, p99_latency_us). A run that fails
# or prints no figures is repeated once, with a warning that says so (a
# ddsperf in a namespace once printed no throughput line); a second failure
# ends the comparison.
record() {
    local json="" attempt
    for attempt in 1 2; do
        if json=$("${@:7}") && [ -n "$json" ]; then
            break
        fi
        [ "$attempt" -eq 1 ] || die "$1 $2 size $3 window $4 rate $5 failed twice: ${*:7}"
        echo "compare-peers: $1 $2 size $3 window $4 rate $5 run $6 failed or printed" \
            "no figures; repeating it once" >&2
    done
    jq -c --arg system "$1" --arg case "$2" --argjson size "$3" --argjson window "$4" \
        --argjson rate "$5" --argjson run "$6" \
        '{system: $system, case: $case, size: $size, window: $window, rate: $rate, run: $run,
          msgs_per_s: .msgs_per_s, mb_per_s: .mb_per_s, p50_us: .p50_latency_us,
          p99_us: .p99_latency_us}' <<<"$json" >>"$RESULTS"
}

# samples_dir SYSTEM RATE RUN: where a light-load run leaves its samples.
samples_dir() {
    mkdir -p "$SAMPLES/$1-$2-$3"
    echo "$SAMPLES/$1-$2-$3"
}

# spindle MODE SIZE WINDOW RATE DURATION [SAMPLES_DIR]: the JSON line of one
# run. MODE unordered-inline is unordered with --own-inline (own_inline: a
# sender delivers its own message inside its send call).
spindle() {
    local pace=() mode=(--mode "$1")
    [ "$1" != unordered-inline ] || mode=(--mode unordered --own-inline)
    [ "$4" -eq 0 ] || pace=(--rate "$4")
    [ -z "${6:-}" ] || pace+=(--latency-out "$6")
    "$BENCH" --local "$PROCS" "${mode[@]}" --msg-size "$2" --window "$3" "${pace[@]}" \
        --duration "$5" --warmup "$WARMUP" --timeout 60 2>"$WORK/bench.err" | tail -n 1 ||
        { tail -n 5 "$WORK/bench.err" >&2; return 1; }
}

cpg() { # SIZE WINDOW RATE DURATION [SAMPLES_DIR]
    local pace=(--window "$2")
    [ "$3" -eq 0 ] || pace=(--rate "$3")
    [ -z "${5:-}" ] || pace+=(--latency-out "$5")
    "$WORK/cpgbench" --local "$PROCS" --size "$1" "${pace[@]}" --duration "$4" --warmup "$WARMUP"
}

# Seconds of a ddsperf run: the warm-up, the measured time and one more
# second (its last line may stop short).
dds_seconds() { awk -v w="$WARMUP" -v d="$1" 'BEGIN { printf "%d", w + d + 1.999 }'; }

# dds_throughput_figures SIZE: from WORK/dds-*.out, the mean of each
# process' per-second receive rate after the warm-up, averaged over them.
dds_throughput_figures() {
    cat "$WORK"/dds-*.out | awk -v w="$WARMUP" -v d="$DURATION" -v size="$1" -v n="$PROCS" '
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
        END {
            if (count == 0) exit 1
            rate = sum / count
            printf "{\"msgs_per_s\":%.1f,\"mb_per_s\":%.3f,\"p50_latency_us\":null,", rate, rate * size / 1e6
            printf "\"p99_latency_us\":null,\"lost\":%d}\n", lost
        }' || die "no ddsperf throughput lines in $WORK/dds-0.out"
}

# cyclone_throughput SIZE: PROCS ddsperf processes, each publishing as fast
# as it can and subscribing (-L: its own samples too, as every libspindle
# and CPG member delivers its own); the mean of each process' per-second
# receive rate after the warm-up, averaged over the processes.
cyclone_throughput() {
    local i pids=() seconds
    seconds=$(dds_seconds "$DURATION")
    rm -f "$WORK"/dds-*.out
    for ((i = 0; i < PROCS; i++)); do
        ddsperf -L -k all -D "$seconds" -Q "minmatch:$PROCS" -Q initwait:20 pub size "$1" sub \
            >"$WORK/dds-$i.out" 2>&1 &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait "$i" || die "ddsperf exited with an error: $(tail -n 3 "$WORK"/dds-*.out)"
    done
    dds_throughput_figures "$1"
}

# cyclone_latency RATE [SAMPLES_DIR]: ddsperf ping at RATE Hz against one
# pong: the round trip; p50 the median of the per-second medians, p99 the
# largest per-second 99th percentile, both after the warm-up. ddsperf
# writes no samples: its output is kept in SAMPLES_DIR/ping.out.
cyclone_latency() {
    local seconds
    seconds=$(dds_seconds "$LAT_DURATION")
    "${DDS_PONG[@]}" ddsperf -D $((seconds + 2)) -Q minmatch:1 -Q initwait:20 pong \
        >"$WORK/pong.out" 2>&1 &
    local pong=$!
    "${DDS_PING[@]}" ddsperf -D "$seconds" -Q minmatch:1 -Q initwait:20 ping "${1}Hz" size 1024 \
        >"$WORK/ping.out" 2>&1 || die "ddsperf ping failed: $(tail -n 3 "$WORK/ping.out")"
    wait "$pong" || true # it outlives the pinger on purpose; its status says nothing
    awk -v w="$WARMUP" -v d="$LAT_DURATION" '
        BEGIN { n = 0 }
        function us(t) {
            if (t ~ /us$/) return substr(t, 1, length(t) - 2) + 0
            if (t ~ /ms$/) return substr(t, 1, length(t) - 2) * 1000
            if (t ~ /ns$/) return substr(t, 1, length(t) - 2) / 1000
            if (t ~ /s$/) return substr(t, 1, length(t) - 1) * 1e6
            return t + 0
        }
        $4 == "size" && $6 == "mean" && $2 > w + 0.5 && $2 <= w + d + 0.5 {
            for (i = 1; i < NF; i++) {
                if ($i == "50%") p50[n] = us($(i + 1))
                if ($i == "99%") { v = us($(i + 1)); if (v > p99) p99 = v }
            }
            n++
        }
        END {
            if (n == 0) exit 1
            # insertion sort: a few dozen values
            for (i = 1; i < n; i++)
                for (j = i; j > 0 && p50[j - 1] > p50[j]; j--) {
                    t = p50[j]; p50[j] = p50[j - 1]; p50[j - 1] = t
                }
            printf "{\"msgs_per_s\":null,\"mb_per_s\":null,\"p50_latency_us\":%.2f,", p50[int(n / 2)]
            printf "\"p99_latency_us\":%.2f}\n", p99
        }' "$WORK/ping.out" || die "no ddsperf ping lines in $WORK/ping.out"
    [ -z "${2:-}" ] || cp "$WORK/ping.out" "$2/ping.out"
}

# netns_cyclone_latency RATE: cyclone_latency with the pong in the second
# namespace and the ping in the first.
netns_cyclone_latency() {
    DDS_PONG=(ip netns exec "$(ns 1)" env CYCLONEDDS_URI="file://$WORK/cyclonedds-1.xml")
    DDS_PING=(ip netns exec "$(ns 0)" env CYCLONEDDS_URI="file://$WORK/cyclonedds-0.xml")
    cyclone_latency "$1"
    DDS_PONG=() DDS_PING=()
}

# --netns: three namespaces on one bridge, NET.1 .. NET.3.
setup_netns() {
    ip link add "$BRIDGE" type bridge
    ip link set "$BRIDGE" up
    local i
    for i in 0 1 2; do
        ip netns add "$(ns "$i")"
        ip link add "$(veth_host "$i")" type veth peer name "$(veth_ns "$i")"
        ip link set "$(veth_ns "$i")" netns "$(ns "$i")"
        ip link set "$(veth_host "$i")" master "$BRIDGE"
        ip link set "$(veth_host "$i")" up
        ip netns exec "$(ns "$i")" ip link set lo up
        ip netns exec "$(ns "$i")" ip addr add "$NET.$((i + 1))/24" dev "$(veth_ns "$i")"
        ip netns exec "$(ns "$i")" ip link set "$(veth_ns "$i")" up
    done
}

# One corosync in each namespace (knet over UDP, no crypto), each with a
# /run of its own (corosync locks /run/corosync.pid); ready when every
# namespace's corosync-cpgtool gets an answer and the ring has 3 members.
start_netns_corosync() {
    local i tries
    {
        printf 'totem {\n    version: 2\n    cluster_name: compare-peers-netns\n'
        printf '    transport: knet\n    crypto_cipher: none\n    crypto_hash: none\n}\n'
        printf 'nodelist {\n'
        for i in 0 1 2; do
            printf '    node {\n        ring0_addr: %s.%d\n        name: node%d\n' "$NET" \
                $((i + 1)) "$i"
            printf '        nodeid: %d\n    }\n' $((i + 1))
        done
        printf '}\nquorum {\n    provider: corosync_votequorum\n}\n'
        printf 'logging {\n    to_stderr: yes\n    to_logfile: no\n    to_syslog: no\n}\n'
    } >"$WORK/corosync-netns.conf"
    for i in 0 1 2; do
        mkdir -p "$WORK/state-$i"
        ip netns exec "$(ns "$i")" unshare -m sh -c \
            "mount -t tmpfs tmpfs /run && exec corosync -f -c '$WORK/corosync-netns.conf'" \
            >"$WORK/corosync-netns-$i.log" 2>&1 &
        NS_COROSYNC_PIDS+=($!)
    done
    for i in 0 1 2; do
        tries=0
        until ip netns exec "$(ns "$i")" corosync-cpgtool >/dev/null 2>&1 &&
            grep -q "Members\[3\]" "$WORK/corosync-netns-$i.log"; do
            tries=$((tries + 1))
            [ "$tries" -lt 300 ] || {
                cat "$WORK/corosync-netns-$i.log" >&2
                die "corosync in $(ns "$i") did not form a 3-node ring within 30 s"
            }
            sleep 0.1
        done
    done
}

# netns_run SYSTEM SIZE [RATE]: one process in each namespace, then one JSON
# object (mean msgs_per_s and mb_per_s, median p50, largest p99 of the
# three). With a RATE, every process sends RATE messages a second for
# LAT_DURATION seconds (light load); Cyclone's figure is then a ping-pong
# round trip between the first two namespaces (netns_cyclone_latency).
netns_run() {
    local system=$1 size=$2 rate=${3:-0} i pids=() group="cpgbench-netns-$TAG-$RANDOM"
    local seconds=$DURATION pace=(--window 100)
    if [ "$rate" -ne 0 ]; then
        seconds=$LAT_DURATION
        pace=(--window 100 --rate "$rate")
        if [ "$system" = cyclone-dds ]; then
            netns_cyclone_latency "$rate"
            return
        fi
    fi
    for i in 0 1 2; do
        case $system in
        libspindle-*)
            ip netns exec "$(ns "$i")" "$BENCH" --config "$WORK/netns.ini" --id "$i" \
                --mode "${system#libspindle-}" --msg-size "$size" "${pace[@]}" \
                --duration "$seconds" --warmup "$WARMUP" --timeout 60 \
                >"$WORK/netns-$i.out" 2>"$WORK/netns-$i.err" &
            ;;
        corosync-cpg)
            [ "$rate" -eq 0 ] || pace=(--rate "$rate")
            ip netns exec "$(ns "$i")" "$WORK/cpgbench" --members 3 --id "$i" --group "$group" \
                --size "$size" "${pace[@]}" --duration "$seconds" --warmup "$WARMUP" \
                >"$WORK/netns-$i.out" 2>"$WORK/netns-$i.err" &
            ;;
        cyclone-dds)
            rm -f "$WORK/dds-$i.out"
            ip netns exec "$(ns "$i")" env CYCLONEDDS_URI="file://$WORK/cyclonedds-$i.xml" \
                ddsperf -L -k all -D "$(dds_seconds "$DURATION")" -Q minmatch:3 -Q initwait:20 \
                pub size "$size" sub >"$WORK/dds-$i.out" 2>"$WORK/netns-$i.err" &
            ;;
        esac
        pids+=($!)
    done
    for i in 0 1 2; do
        wait "${pids[i]}" || die "$system in $(ns "$i") failed: $(tail -n 3 "$WORK/netns-$i.err")"
    done
    if [ "$system" = cyclone-dds ]; then
        dds_throughput_figures "$size"
        return
    fi
    for i in 0 1 2; do tail -n 1 "$WORK/netns-$i.out"; done | jq -s '
        {msgs_per_s: (map(.msgs_per_s) | add / length), mb_per_s: (map(.mb_per_s) | add / length),
         p50_latency_us: (map(.p50_latency_us) | sort | .[1]),
         p99_latency_us: (map(.p99_latency_us) | max)}'
}

run_netns_cases() {
    local run size system i rate
    {
        printf '[group]\nname = compare-peers-%s\ntransport = fabric\nprovider = tcp\n\n' "$TAG"
        for i in 0 1 2; do
            printf '[member.%d]\nhost = %s.%d\nport = %d\n\n' "$i" "$NET" $((i + 1)) $((7400 + i))
        done
        printf '[subgroup.0]\nmembers = 0, 1, 2\nwindow_size = 100\nmax_payload = 10240\n'
    } >"$WORK/netns.ini"
    for i in 0 1 2; do
        sed -e "s|<NetworkInterface address=\"127.0.0.1\"/>|<NetworkInterface address=\"$NET.$((i + 1))\"/>|" \
            -e "s|<Peers><Peer address=\"127.0.0.1\"/></Peers>|<Peers><Peer address=\"$NET.1\"/><Peer address=\"$NET.2\"/><Peer address=\"$NET.3\"/></Peers>|" \
            "$WORK/cyclonedds.xml" >"$WORK/cyclonedds-$i.xml"
    done
    for ((run = 1; run <= RUNS; run++)); do
        echo "compare-peers: namespaces, run $run of $RUNS (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        for size in "${SIZES[@]}"; do
            for system in libspindle-atomic libspindle-unordered corosync-cpg cyclone-dds; do
                record "$system" netns "$size" 100 0 "$run" netns_run "$system" "$size"
            done
        done
        for rate in "${RATES[@]}"; do
            for system in libspindle-atomic libspindle-unordered corosync-cpg cyclone-dds; do
                record "$system" netns-latency 1024 100 "$rate" "$run" \
                    netns_run "$system" 1024 "$rate"
            done
        done
    done
}

run_cases() {
    local run size window rate mode
    for ((run = 1; run <= RUNS; run++)); do
        echo "compare-peers: run $run of $RUNS (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
        for size in "${SIZES[@]}"; do
            for window in "${WINDOWS[@]}"; do
                for mode in atomic unordered; do
                    record "libspindle-$mode" throughput "$size" "$window" 0 "$run" \
                        spindle "$mode" "$size" "$window" 0 "$DURATION"
                done
                record corosync-cpg throughput "$size" "$window" 0 "$run" \
                    cpg "$size" "$window" 0 "$DURATION"
            done
            record cyclone-dds throughput "$size" 0 0 "$run" cyclone_throughput "$size"
        done
        for rate in "${RATES[@]}"; do
            for mode in atomic unordered unordered-inline; do
                record "libspindle-$mode" latency 1024 100 "$rate" "$run" \
                    spindle "$mode" 1024 100 "$rate" "$LAT_DURATION" \
                    "$(samples_dir "libspindle-$mode" "$rate" "$run")"
            done
            record corosync-cpg latency 1024 100 "$rate" "$run" \
                cpg 1024 100 "$rate" "$LAT_DURATION" "$(samples_dir corosync-cpg "$rate" "$run")"
            record cyclone-dds latency 1024 0 "$rate" "$run" \
                cyclone_latency "$rate" "$(samples_dir cyclone-dds "$rate" "$run")"
        done
    done
}

# The medians of every case: one JSON array of
# {system, case, size, window, rate, runs, msgs_per_s, mb_per_s, p50_us, p99_us}.
medians() {
    jq -s '
        def median: map(select(. != null)) | sort |
            if length == 0 then null
            elif length % 2 == 1 then .[length / 2 | floor]
            else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        group_by([.case, .system, .size, .window, .rate]) |
        map({system: .[0].system, case: .[0].case, size: .[0].size, window: .[0].window,
             rate: .[0].rate, runs: length,
             msgs_per_s: (map(.msgs_per_s) | median), mb_per_s: (map(.mb_per_s) | median),
             p50_us: (map(.p50_us) | median), p99_us: (map(.p99_us) | median)})' "$RESULTS"
}

print_tables() {
    local summary=$1
    [ "$NETNS" = 2 ] || same_host_throughput_table "$summary"
    netns_throughput_table "$summary"
    [ "$NETNS" = 2 ] ||
        latency_table latency "Light load: latency p50 / p99 in us, 1 KB messages" "$summary"
    if jq -e 'any(.case == "netns-latency")' <<<"$summary" >/dev/null; then
        latency_table netns-latency "Three network namespaces, light load: latency p50 / p99 in us, 1 KB messages (libspindle fabric/tcp, CPG knet/UDP, Cyclone UDP between two namespaces)" "$summary"
    fi
}

same_host_throughput_table() {
    local summary=$1
    echo "### Throughput: msgs/s delivered per member (MB/s), medians of $RUNS runs"
    echo
    echo "| size | window | libspindle atomic | libspindle unordered | Corosync CPG agreed |" \
        "Cyclone DDS reliable keep-all | atomic / CPG | unordered / Cyclone | atomic / Cyclone |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    jq -r '
        def cell: if . == null then "-" else "\(.msgs_per_s | round) (\(.mb_per_s * 10 | round / 10))" end;
        def ratio(a; b): if a == null or b == null or b.msgs_per_s == 0 then "-"
            else "\(a.msgs_per_s / b.msgs_per_s * 100 | round / 100)" end;
        map(select(.case == "throughput")) as $t |
        ($t | map(select(.system == "libspindle-atomic")) | map([.size, .window]) | unique)[] as [$s, $w] |
        ($t | map(select(.size == $s and .window == $w)) | INDEX(.system)) as $row |
        ($t | map(select(.size == $s and .system == "cyclone-dds")) | first) as $dds |
        "| \($s) | \($w) | \($row["libspindle-atomic"] | cell) | \($row["libspindle-unordered"] | cell) | \($row["corosync-cpg"] | cell) | \($dds | cell) | \(ratio($row["libspindle-atomic"]; $row["corosync-cpg"])) | \(ratio($row["libspindle-unordered"]; $dds)) | \(ratio($row["libspindle-atomic"]; $dds)) |"
    ' <<<"$summary"
}

netns_throughput_table() {
    local summary=$1
    if jq -e 'any(.case == "netns")' <<<"$summary" >/dev/null; then
        echo
        echo "### Three network namespaces, one process each: msgs/s delivered per member" \
            "(MB/s), window 100, medians of $RUNS runs"
        echo
        echo "| size | libspindle atomic, fabric/tcp | libspindle unordered, fabric/tcp |" \
            "Corosync CPG agreed, knet/UDP | Cyclone DDS reliable keep-all, UDP |" \
            "atomic / CPG | unordered / Cyclone | atomic / Cyclone |"
        echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
        jq -r '
            def cell: if . == null then "-" else "\(.msgs_per_s | round) (\(.mb_per_s * 10 | round / 10))" end;
            def ratio(a; b): if a == null or b == null or b.msgs_per_s == 0 then "-"
                else "\(a.msgs_per_s / b.msgs_per_s * 100 | round / 100)" end;
            map(select(.case == "netns")) as $n | ($n | map(.size) | unique)[] as $s |
            ($n | map(select(.size == $s)) | INDEX(.system)) as $row |
            "| \($s) | \($row["libspindle-atomic"] | cell) | \($row["libspindle-unordered"] | cell) | \($row["corosync-cpg"] | cell) | \($row["cyclone-dds"] | cell) | \(ratio($row["libspindle-atomic"]; $row["corosync-cpg"])) | \(ratio($row["libspindle-unordered"]; $row["cyclone-dds"])) | \(ratio($row["libspindle-atomic"]; $row["cyclone-dds"])) |"
        ' <<<"$summary"
    fi
}

# latency_table CASE TITLE SUMMARY: p50 / p99 per rate and system.
latency_table() {
    echo
    echo "### $2, medians of $RUNS runs"
    echo
    echo "| msgs/s per sender | libspindle atomic | libspindle unordered |" \
        "libspindle unordered, own_inline | Corosync CPG agreed |" \
        "Cyclone DDS ping-pong round trip | atomic / CPG (p50) | atomic / Cyclone (p50) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    jq -r --arg case "$1" '
        def cell: if . == null then "-" else "\(.p50_us * 10 | round / 10) / \(.p99_us * 10 | round / 10)" end;
        def ratio(a; b): if a == null or b == null or b.p50_us == 0 then "-"
            else "\(a.p50_us / b.p50_us * 100 | round / 100)" end;
        map(select(.case == $case)) as $l |
        ($l | map(.rate) | unique | reverse)[] as $r |
        ($l | map(select(.rate == $r)) | INDEX(.system)) as $row |
        "| \($r) | \($row["libspindle-atomic"] | cell) | \($row["libspindle-unordered"] | cell) | \($row["libspindle-unordered-inline"] | cell) | \($row["corosync-cpg"] | cell) | \($row["cyclone-dds"] | cell) | \(ratio($row["libspindle-atomic"]; $row["corosync-cpg"])) | \(ratio($row["libspindle-atomic"]; $row["cyclone-dds"])) |"
    ' <<<"$3"
}

netns_configurations() {
    [ -f "$WORK/netns.ini" ] || return 0
    cat <<EOF
- Three namespaces on one bridge ($(sed -n 's/^host = //p' "$WORK/netns.ini" | xargs)):
  libspindle from this file, each member
  \`spindle-bench --config FILE --id I --mode MODE --msg-size SIZE --window 100 [--rate R] --duration S\`:

\`\`\`ini
$(cat "$WORK/netns.ini")
\`\`\`

  Corosync: one corosync in each namespace (its own /run), this corosync.conf:

\`\`\`
$(cat "$WORK/corosync-netns.conf")
\`\`\`

  and \`cpgbench --members 3 --id I --group NAME --size SIZE --window 100|--rate R\` in each;
  Cyclone: the XML above with NetworkInterface set to the namespace's address and the three
  addresses as Peers, and the same ddsperf command in each (light load: the ping in the first
  namespace, the pong in the second).

EOF
}

# The same-host part of the configurations: only when the same-host cases ran
# (not with --netns-only, where no corosync runs on 127.0.0.1).
host_configurations() {
    [ -f "$WORK/corosync.conf" ] || return 0
    cat <<EOF
- libspindle: \`$(basename "$BENCH") --local $PROCS --mode atomic|unordered --msg-size SIZE
  --window W [--rate R] --duration S --warmup $WARMUP\`, shared-memory transport, batching,
  null-sends and early unlock on (the defaults). "unordered, own_inline" (light load only):
  the same unordered command with \`--own-inline\` (spindle_group_options.own_inline: the
  sending thread delivers its own message inside its send call instead of waking the
  predicate thread; other members' deliveries are unchanged).
- Corosync $(corosync -v | sed -n "s/.*version '\(.*\)'.*/\1/p"): one corosync, one node, on
  loopback, started by this script with this corosync.conf (transport knet, no crypto):

\`\`\`
$(cat "$WORK/corosync.conf")
\`\`\`

EOF
}

print_configurations() {
    cat <<EOF

### Configurations

$(host_configurations)
- cpgbench (scripts/peers/cpgbench.c): $PROCS processes join one CPG group and send with
  cpg_mcast_joined(CPG_TYPE_AGREED); window W = at most W own messages sent and not yet
  delivered back; latency = send to the sender's own delivery.
- Eclipse Cyclone DDS $(dpkg-query -W -f='${Version}' cyclonedds-tools): ddsperf, reliable (its
  default; -u not given), keep-all (-k all), topic KS; throughput: $PROCS processes each
  \`ddsperf -L -k all -D T -Qminmatch:$PROCS pub size SIZE sub\` (-L: each also receives its
  own samples); latency: \`ddsperf ping RHz size 1024\` against one \`ddsperf pong\`
  (ping/pong is keep-last-1 in ddsperf), the round trip. CYCLONEDDS_URI:

\`\`\`xml
$(cat "$WORK/cyclonedds.xml")
\`\`\`

$(netns_configurations)
### What each system guarantees

- libspindle atomic: total order across all senders, and a message is delivered only once
  every member has received it (stability before delivery); virtual synchrony across views.
- libspindle unordered: per-sender FIFO, no order across senders.
- Corosync CPG agreed: total order across senders, virtual synchrony (extended virtual
  synchrony of Totem); the agreed level does not wait for every node to have received a
  message before delivering it (that would be CPG_TYPE_SAFE, which Corosync does not
  implement).
- Cyclone DDS reliable keep-all: per-writer FIFO, no order across writers, no total order.

Latency differs in kind: libspindle and CPG from send to the sender's own delivery ($PROCS
members); Cyclone a ping-pong round trip between two processes (p50: median of ddsperf's
per-second medians; p99: the largest of its per-second 99th percentiles). Throughput: each
member's delivered messages per second after a ${WARMUP} s warm-up, averaged over the
members; Cyclone has no send window, so its figure is the same for both windows.
EOF
}

draw_plots() {
    local summary=$1
    mkdir -p "$PLOTS"
    jq -r 'map(select(.case == "throughput"))[] |
        "\(.system) \(.size) \(.window) \(.mb_per_s)"' <<<"$summary" >"$WORK/tput.dat"
    gnuplot <<EOF
set terminal pngcairo size 1000,500
set output "$PLOTS/peers-throughput.png"
set title "Throughput per member, 3 processes on one host (medians of $RUNS runs)"
set ylabel "MB/s delivered per member"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right
set yrange [0:*]
\$d << EOD
$(jq -r '
    def mb(s): (map(select(.system == s)) | first | .mb_per_s // 0);
    map(select(.case == "throughput")) as $t |
    ($t | map(select(.system == "libspindle-atomic")) | map([.size, .window]) | unique)[] as [$s, $w] |
    ($t | map(select(.size == $s and (.window == $w or .system == "cyclone-dds")))) as $row |
    "\"\($s / 1024 | floor)KB w\($w)\" \($row | mb("libspindle-atomic")) \($row | mb("libspindle-unordered")) \($row | mb("corosync-cpg")) \($row | mb("cyclone-dds"))"
' <<<"$summary")
EOD
plot \$d using 2:xtic(1) title "libspindle atomic", '' using 3 title "libspindle unordered", \
     '' using 4 title "Corosync CPG agreed", '' using 5 title "Cyclone DDS keep-all (no window)"
EOF
    jq -r 'map(select(.case == "latency"))[] |
        "\(.system) \(.rate) \(.p50_us) \(.p99_us)"' <<<"$summary" >"$WORK/lat.dat"
    gnuplot <<EOF
set terminal pngcairo size 1000,500
set output "$PLOTS/peers-latency.png"
set title "Light-load latency, 1 KB messages (medians of $RUNS runs; Cyclone: round trip)"
set ylabel "microseconds (log scale)"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right
\$d << EOD
$(jq -r '
    def at(s; f): (map(select(.system == s)) | first | .[f] // 0);
    map(select(.case == "latency")) as $l | ($l | map(.rate) | unique | reverse)[] as $r |
    ($l | map(select(.rate == $r))) as $row |
    "\"\($r)/s\" \($row | at("libspindle-atomic"; "p50_us")) \($row | at("libspindle-atomic"; "p99_us")) \($row | at("libspindle-unordered"; "p50_us")) \($row | at("libspindle-unordered"; "p99_us")) \($row | at("libspindle-unordered-inline"; "p50_us")) \($row | at("libspindle-unordered-inline"; "p99_us")) \($row | at("corosync-cpg"; "p50_us")) \($row | at("corosync-cpg"; "p99_us")) \($row | at("cyclone-dds"; "p50_us")) \($row | at("cyclone-dds"; "p99_us"))"
' <<<"$summary")
EOD
plot \$d using 2:xtic(1) title "libspindle atomic p50", '' using 3 title "p99", \
     '' using 4 title "libspindle unordered p50", '' using 5 title "p99", \
     '' using 6 title "unordered, own_inline p50", '' using 7 title "p99", \
     '' using 8 title "CPG agreed p50", '' using 9 title "p99", \
     '' using 10 title "Cyclone round trip p50", '' using 11 title "p99"
EOF
    [ ! -d "$SAMPLES" ] || draw_cdf
    echo "compare-peers: plots in $PLOTS/peers-throughput.png and $PLOTS/peers-latency.png" >&2
}

# cdf_points SYSTEM RATE: "us fraction" lines of the CDF of every sample of
# SYSTEM's light-load runs at RATE (all runs, all members), at most about
# 2000 points.
cdf_points() {
    cat "$SAMPLES/$1-$2"-*/member-*.latency 2>/dev/null | sort -n |
        awk '{ v[NR] = $1 } END {
            step = NR > 2000 ? int(NR / 2000) : 1
            for (i = 1; i <= NR; i += step) printf "%.3f %.6f\n", v[i] / 1000, i / NR
            if (NR > 0) printf "%.3f 1\n", v[NR] / 1000
        }'
}

# cyclone_points RATE: "us fraction" for 0.5, 0.9 and 0.99: the medians, over
# every second after the warm-up of every run, of ddsperf's per-second
# percentiles (it prints no samples).
cyclone_points() {
    cat "$SAMPLES/cyclone-dds-$1"-*/ping.out 2>/dev/null | awk -v w="$WARMUP" '
        function us(t) {
            if (t ~ /us$/) return substr(t, 1, length(t) - 2) + 0
            if (t ~ /ms$/) return substr(t, 1, length(t) - 2) * 1000
            if (t ~ /ns$/) return substr(t, 1, length(t) - 2) / 1000
            if (t ~ /s$/) return substr(t, 1, length(t) - 1) * 1e6
            return t + 0
        }
        function median(a, n,   i, j, t) {
            for (i = 1; i < n; i++)
                for (j = i; j > 0 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return a[int(n / 2)]
        }
        $4 == "size" && $6 == "mean" && $2 > w + 0.5 {
            for (i = 1; i < NF; i++) {
                if ($i == "50%") p50[n] = us($(i + 1))
                if ($i == "90%") p90[n] = us($(i + 1))
                if ($i == "99%") p99[n] = us($(i + 1))
            }
            n++
        }
        END {
            if (n == 0) exit 0
            printf "%.3f 0.5\n%.3f 0.9\n%.3f 0.99\n", median(p50, n), median(p90, n), median(p99, n)
        }'
}

# PLOTS/peers-latency-cdf.png: one panel per light-load rate.
draw_cdf() {
    local rate system panels=""
    for rate in "${RATES[@]}"; do
        for system in libspindle-atomic libspindle-unordered libspindle-unordered-inline corosync-cpg; do
            cdf_points "$system" "$rate" >"$WORK/cdf-$system-$rate.dat"
        done
        cyclone_points "$rate" >"$WORK/cdf-cyclone-dds-$rate.dat"
        panels+="set title \"$rate msgs/s per sender\"
plot '$WORK/cdf-libspindle-atomic-$rate.dat' with lines lw 2 title 'libspindle atomic', \\
     '$WORK/cdf-libspindle-unordered-$rate.dat' with lines lw 2 title 'libspindle unordered (own)', \\
     '$WORK/cdf-libspindle-unordered-inline-$rate.dat' with lines lw 2 title 'libspindle unordered (own, own_inline)', \\
     '$WORK/cdf-corosync-cpg-$rate.dat' with lines lw 2 title 'Corosync CPG agreed', \\
     '$WORK/cdf-cyclone-dds-$rate.dat' with points pt 7 ps 1.5 title 'Cyclone round trip p50/p90/p99'
"
    done
    gnuplot <<EOF
set terminal pngcairo size 1200,560
set output "$PLOTS/peers-latency-cdf.png"
set multiplot layout 1,${#RATES[@]} title "Light-load latency CDF, 1 KB, 3 processes on one host (every sample; runs: $RUNS)"
set xlabel "microseconds (log scale)"
set ylabel "fraction of messages delivered within"
set logscale x
set yrange [0:1]
set grid
set key below font ",9" samplen 2 maxrows 2
$panels
unset multiplot
EOF
    echo "compare-peers: plot in $PLOTS/peers-latency-cdf.png" >&2
}

if [ -n "$FROM" ]; then
    summary=$(medians)
    print_tables "$summary"
    print_configurations
    [ -z "$PLOTS" ] || draw_plots "$summary"
    exit 0
fi
install_peers
if [ ! -x "$BENCH" ]; then
    make -C "$ROOT" build JOBS=2 >&2
fi
cc -O2 -Wall -o "$WORK/cpgbench" "$ROOT/scripts/peers/cpgbench.c" -lcpg
# --netns-only runs no same-host case: no corosync on 127.0.0.1 then.
[ "$NETNS" = 2 ] || start_corosync
write_cyclone_config
echo "compare-peers: $PROCS processes, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
    "runs $RUNS, throughput ${DURATION} s, latency ${LAT_DURATION} s, warm-up ${WARMUP} s" >&2
[ "$NETNS" = 2 ] || run_cases
if [ "$NETNS" != 0 ]; then
    setup_netns
    start_netns_corosync
    run_netns_cases
fi
summary=$(medians)
print_tables "$summary"
print_configurations
[ -z "$PLOTS" ] || draw_plots "$summary"
if [ -n "$OUT" ]; then
    cp "$WORK/cyclonedds.xml" "$OUT/"
    [ "$NETNS" = 2 ] || cp "$WORK/corosync.conf" "$OUT/"
    [ "$NETNS" = 0 ] || cp "$WORK/netns.ini" "$WORK/corosync-netns.conf" "$OUT/"
    echo "$summary" >"$OUT/medians.json"
fi
echo "compare-peers: done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
