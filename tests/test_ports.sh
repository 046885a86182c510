# Loopback TCP ports that no other test can be handed: the shell twin of
# tests/test_ports.h (its comment says how), reserving a block through the
# same lock files (flock(1)), so C, Python and shell tests running side by
# side never get the same port. Sourced; POSIX sh.
#
# test_port_block: sets TEST_PORT_BASE to the first of 32 consecutive
# loopback ports reserved until this shell exits (descriptor 9 holds the
# lock; children that inherit it hold it too). Returns 1 when no block is free.
test_port_block() {
    _tp_dir=${TMPDIR:-/tmp}/spindle-test-ports
    mkdir -p "$_tp_dir" && chmod 1777 "$_tp_dir" 2>/dev/null
    _tp_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    [ "${_tp_low:-0}" -ge $((20480 + 4 * 32)) ] 2>/dev/null || _tp_low=32768
    _tp_blocks=$(((_tp_low - 20480) / 32))
    _tp_i=0
    while [ "$_tp_i" -lt "$_tp_blocks" ]; do
        _tp_base=$((20480 + ($$ + _tp_i) % _tp_blocks * 32))
        _tp_i=$((_tp_i + 1))
        exec 9>>"$_tp_dir/$_tp_base" || continue
        flock -n 9 || continue
        # Passed over when something outside the tests listens there.
        if command -v ss >/dev/null 2>&1 &&
            ss -Htln "sport >= :$_tp_base and sport < :$((_tp_base + 32))" | grep -q .; then
            continue
        fi
        TEST_PORT_BASE=$_tp_base
        return 0
    done
    exec 9>&-
    echo "test_ports.sh: no free block of 32 ports in 20480..$((_tp_low - 1))" >&2
    return 1
}
