"""The library's log lines, routed to Python's logging module.

On import, the package sets a sink (spindle_log_set_sink) that hands each
line to the logger "spindle.<module>" ("spindle.view", "spindle.control",
...) at the matching level. With no handler configured, Python's last-resort
handler still prints warnings and errors on stderr, as the library itself
would. Which lines the library produces at all is its own level
(SPINDLE_LOG_LEVEL, or set_level()), checked before a line reaches Python.

Lines come from the library's threads as well as the caller's; the sink
takes the GIL. It is removed at interpreter exit, after every group is
closed, so that no line arrives once Python can no longer take it.
"""

import logging

from . import _lib
from .errors import check

ERROR = 0
WARN = 1
INFO = 2
DEBUG = 3

_TO_PYTHON = {
    ERROR: logging.ERROR,
    WARN: logging.WARNING,
    INFO: logging.INFO,
    DEBUG: logging.DEBUG,
}
_NAMES = {"error": ERROR, "warn": WARN, "warning": WARN, "info": INFO, "debug": DEBUG}


def _sink(ctx, level, module, message):
    try:
        name = module.decode(errors="replace") if module else "library"
        text = message.decode(errors="replace") if message else ""
        logging.getLogger("spindle." + name).log(
            _TO_PYTHON.get(level, logging.ERROR), "%s", text
        )
    except Exception:  # pragma: no cover - a sink must not raise into C
        pass


_SINK = _lib.LOG_SINK_FN(_sink)


def route_to_logging():
    """Sends the library's lines to logging (done on import)."""
    _lib.lib.spindle_log_set_sink(_SINK, None)


def route_to_stderr():
    """Gives the library's lines back to its own stderr writer."""
    _lib.lib.spindle_log_set_sink(_lib.LOG_SINK_FN(), None)


def set_level(level):
    """The library's level: "error", "warn", "info", "debug" or 0..3
    (overrides SPINDLE_LOG_LEVEL). InvalidArgument for another."""
    if isinstance(level, str):
        if level.lower() not in _NAMES:
            raise ValueError(
                f"log level {level!r} is not one of error, warn, info, debug"
            )
        level = _NAMES[level.lower()]
    check(_lib.lib.spindle_log_set_level(level), "spindle_log_set_level")


def get_level():
    """The library's level in force, 0 (error) .. 3 (debug)."""
    return _lib.lib.spindle_log_get_level()
