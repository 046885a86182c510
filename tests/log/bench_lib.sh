# Shared by the restart scripts of tests/log (sourced): fail, wait_lines and
# the low end of the ephemeral port range. Needs WORK (its run/*.out are
# shown on failure) and TIMEOUT (seconds).

fail() {
    echo "FAIL: $*"
    local f
    for f in "$WORK"/run/*.out; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f") (last 15 lines) ---"
        tail -n 15 "$f"
    done
    exit 1
}

# Waits (bounded) until FILE has at least N lines; 1 if PID ended first.
wait_lines() {
    local file=$1 want=$2 pid=$3 deadline=$((SECONDS + TIMEOUT)) have
    while :; do
        have=0
        [ -f "$file" ] && have=$(wc -l <"$file")
        [ "$have" -ge "$want" ] && return 0
        kill -0 "$pid" 2>/dev/null || return 1
        [ "$SECONDS" -lt "$deadline" ] || fail "$file did not reach $want lines in ${TIMEOUT}s"
        sleep 0.02
    done
}

# Drawn bases stay below 20480: from there up to the ephemeral range, ports
# come in blocks that tests/test_ports.sh and its twins reserve for others.
RANDOM_PORT_TOP=20480
