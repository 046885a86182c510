"""What the tests share: the package on sys.path, the headers to check
against (SPINDLE_INCLUDE_DIR, default the source tree's include/), a free
loopback port and a free block of them."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
# tests/test_ports.py: ports shared out with the C and shell tests
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests")))
import test_ports  # noqa: E402 pylint: disable=wrong-import-position

INCLUDE_DIR = os.environ.get(
    "SPINDLE_INCLUDE_DIR", os.path.normpath(os.path.join(HERE, "..", "..", "..", "include"))
)


def header(name):
    """Text of include/spindle/<name>."""
    with open(os.path.join(INCLUDE_DIR, "spindle", name), encoding="utf-8") as f:
        return f.read()


def free_port():
    """A loopback TCP port reserved for this process (tests/test_ports.py)."""
    return test_ports.free_port()


def free_port_block(count):
    """A base port P such that P..P+count-1 are reserved for this process,
    for a group whose members listen on consecutive ports
    (SPINDLE_BASE_PORT); tests/test_ports.py says how."""
    return test_ports.port_block(count)
