"""What the tests share: the package on sys.path, the headers to check
against (SPINDLE_INCLUDE_DIR, default the source tree's include/), a free
loopback port and a free block of them."""

import os
import random
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

INCLUDE_DIR = os.environ.get(
    "SPINDLE_INCLUDE_DIR", os.path.normpath(os.path.join(HERE, "..", "..", "..", "include"))
)


def header(name):
    """Text of include/spindle/<name>."""
    with open(os.path.join(INCLUDE_DIR, "spindle", name), encoding="utf-8") as f:
        return f.read()


def free_port():
    """A loopback TCP port nobody listens on (bind to 0, read it, close)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ephemeral_low():
    """The first port of the kernel's ephemeral range (32768 if unknown)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
    return low if low > 12000 else 32768


def free_port_block(count):
    """A base port P such that P..P+count-1 are free on loopback now, for a
    group whose members listen on consecutive ports (SPINDLE_BASE_PORT).
    The block is below the kernel's ephemeral range, so no outgoing
    connection (their source ports come from that range) can take one of
    them later; another test may still pick the same block at the same
    moment, so a caller retries on SPINDLE_EADDRINUSE with a new block."""
    top = _ephemeral_low() - count
    for _ in range(100):
        base = random.randrange(10000, top)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError(f"no {count} free consecutive loopback ports in 10000..{top}")
