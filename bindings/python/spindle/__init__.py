"""libspindle for Python: atomic multicast over one-sided writes.

    import spindle
    with spindle.Group([spindle.Subgroup(members=[0, 1, 2])],
                       self=rank, num_members=3, bootstrap=directory) as group:
        group.send(0, b"hello")
        for message in group.messages(timeout=10):
            ...

A pure-Python package over the installed library (ctypes); the library is
found through SPINDLE_LIBRARY, then beside the installed package, then by
the dynamic linker. See bindings/python/README.md.
"""

import atexit

from . import _lib, log
from .errors import *  # noqa: F401,F403 - the exception classes and codes
from .errors import CODES, SpindleError, error_name
from .group import (
    DISPATCH_ALL,
    DISPATCH_BLOCKING,
    DISPATCH_ONE,
    REPLAY_MESSAGE,
    REPLAY_SNAPSHOT,
    Bootstrap,
    DispatchFlags,
    Group,
    Identity,
    Message,
    Mode,
    P2PMessage,
    Replayed,
    ReplayKind,
    Stats,
    Subgroup,
    View,
    close_all,
)

ATOMIC = Mode.ATOMIC
UNORDERED = Mode.UNORDERED
MAX_PAYLOAD = _lib.MAX_PAYLOAD
MAX_WINDOW = _lib.MAX_WINDOW
MAX_MEMBERS = _lib.MAX_MEMBERS
MAX_SUBGROUPS = _lib.MAX_SUBGROUPS
P2P_MAX_PAYLOAD = _lib.P2P_MAX_PAYLOAD
DISPATCH_OVERHEAD = _lib.DISPATCH_OVERHEAD

library_path = _lib.path


def version():
    """The version of the library actually loaded, e.g. "0.1.0"."""
    return _lib.lib.spindle_version().decode()


def strerror(code):
    """spindle_strerror: the short text of a SPINDLE_E* code."""
    return _lib.lib.spindle_strerror(code).decode(errors="replace")


def _at_exit():
    # Groups first (their threads may still log), then the sink, so that
    # no library thread calls into an interpreter that is going away.
    close_all()
    log.route_to_stderr()


log.route_to_logging()
atexit.register(_at_exit)
