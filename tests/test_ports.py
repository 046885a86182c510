"""Loopback TCP ports that no other test can be handed: the Python twin of
tests/test_ports.h (its comment says how), reserving blocks through the
same lock files, so C, Python and shell tests running side by side never
get the same port."""

import fcntl
import os
import socket

BLOCK = 32  # ports of a block
LOW = 20480  # the lowest block: above SPINDLE_SETUP_DEFAULT_BASE_PORT (17400)

_held = []  # the lock files of this process' blocks, open until it exits
_next = _end = _owner = 0


def _ephemeral_low():
    """The first ephemeral port; 32768 when unknown or no room below it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return low if low >= LOW + 4 * BLOCK else 32768


def _bindable(base, count):
    for port in range(base, base + count):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _reserve_block():
    directory = os.path.join(os.environ.get("TMPDIR") or "/tmp", "spindle-test-ports")
    os.makedirs(directory, mode=0o1777, exist_ok=True)
    blocks = (_ephemeral_low() - LOW) // BLOCK
    start = os.getpid() % blocks
    for i in range(blocks):
        base = LOW + (start + i) % blocks * BLOCK
        f = open(os.path.join(directory, str(base)), "a")  # pylint: disable=consider-using-with
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        if _bindable(base, BLOCK):
            _held.append(f)
            return base
        f.close()
    raise RuntimeError(f"no free block of {BLOCK} ports in {LOW}..{_ephemeral_low() - 1}")


def port_block(count):
    """The first of count (1..BLOCK) consecutive ports reserved for this
    process and not handed out before."""
    global _next, _end, _owner  # pylint: disable=global-statement
    if not 1 <= count <= BLOCK:
        raise ValueError(f"{count} consecutive ports asked, at most {BLOCK}")
    if _owner != os.getpid() or _next + count > _end:
        _owner = os.getpid()
        _next = _reserve_block()
        _end = _next + BLOCK
    port = _next
    _next += count
    return port


def free_port():
    """A loopback port reserved for this process and not handed out before."""
    return port_block(1)
