# Shell functions of the spindle-kv test scripts (sourced; they use the
# caller's $python, $parent and fail()).

. "$(dirname "$0")/../test_ports.sh"

# Sets port and control, the bases of the replicas' RESP ports and of their
# control ports: eight consecutive loopback ports each, reserved for this
# script (tests/test_ports.sh). Call it in the script's own shell, not in
# $(...): the reservation lasts as long as the shell that made it.
kv_ports() {
    test_port_block || return 1
    port=$TEST_PORT_BASE
    control=$((TEST_PORT_BASE + 8))
}

# Waits (polling, up to 60 s) until every given port answers PONG; fails
# when the service ($parent) exits first.
# Its variables are local: a caller's $n or $p stays as it was.
wait_serving() {
    local p tries
    for p in "$@"; do
        tries=0
        until [ "$(redis-cli -p "$p" PING 2>/dev/null)" = "PONG" ]; do
            tries=$((tries + 1))
            [ "$tries" -lt 600 ] || fail "replica on port $p never served"
            kill -0 "$parent" 2>/dev/null || fail "spindle-kv exited before serving"
            sleep 0.1
        done
    done
}
