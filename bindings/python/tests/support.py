"""What the tests share: the package on sys.path, the headers to check
against (SPINDLE_INCLUDE_DIR, default the source tree's include/), and a
free loopback port."""

import os
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
