"""SpindleError and one subclass per SPINDLE_E* code (include/spindle/error.h).

Every failed library call raises the subclass of its code, carrying the code
(`.code`, negative, as C returns it), its name (`.name`, "SPINDLE_EMSGSIZE"),
the code's short text (`.strerror`) and the library's detailed message for
that call (`.detail`, spindle_errmsg(): what was wrong and the value that
was). str(error) is "SPINDLE_EMSGSIZE: <detail>".
"""

from . import _lib


class SpindleError(Exception):
    """A libspindle call failed; .code, .name, .strerror, .detail."""

    code = None

    def __init__(self, code, detail="", call=None):
        self.code = code
        self.name = error_name(code)
        self.strerror = _lib.lib.spindle_strerror(code).decode(errors="replace")
        self.detail = detail or self.strerror
        self.call = call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{self.name}: {self.detail}")

    @classmethod
    def make(cls, detail, call=None):
        """An error of this class's code raised by the bindings themselves."""
        return cls(cls.code, detail, call)


class InvalidArgument(SpindleError, ValueError):
    code = -1


class NoMemory(SpindleError):
    code = -2


class Again(SpindleError):
    code = -3


class TimedOut(SpindleError, TimeoutError):
    code = -4


class PeerFailed(SpindleError):
    code = -5


class NoDevice(SpindleError):
    code = -6


class NotSupported(SpindleError):
    code = -7


class SystemCallFailed(SpindleError):
    code = -8


class AddressInUse(SpindleError):
    code = -9


class NotFound(SpindleError):
    code = -10


class Shutdown(SpindleError):
    code = -11


class MessageTooLarge(SpindleError):
    code = -12


class NotPermitted(SpindleError):
    code = -13


class ConfigError(SpindleError):
    code = -14


class ProtocolError(SpindleError):
    code = -15


class Unreachable(SpindleError):
    code = -16


class Minority(SpindleError):
    code = -17


class Removed(SpindleError):
    code = -18


class AuthenticationFailed(SpindleError):
    code = -19


# enum spindle_error, in its order: name, class. tests/test_errors.py holds
# it against error.h.
CODES = {
    -1: ("SPINDLE_EINVAL", InvalidArgument),
    -2: ("SPINDLE_ENOMEM", NoMemory),
    -3: ("SPINDLE_EAGAIN", Again),
    -4: ("SPINDLE_ETIMEDOUT", TimedOut),
    -5: ("SPINDLE_EPEERFAILED", PeerFailed),
    -6: ("SPINDLE_ENODEV", NoDevice),
    -7: ("SPINDLE_ENOTSUP", NotSupported),
    -8: ("SPINDLE_EIO", SystemCallFailed),
    -9: ("SPINDLE_EADDRINUSE", AddressInUse),
    -10: ("SPINDLE_ENOENT", NotFound),
    -11: ("SPINDLE_ESHUTDOWN", Shutdown),
    -12: ("SPINDLE_EMSGSIZE", MessageTooLarge),
    -13: ("SPINDLE_EPERM", NotPermitted),
    -14: ("SPINDLE_ECONFIG", ConfigError),
    -15: ("SPINDLE_EPROTO", ProtocolError),
    -16: ("SPINDLE_EUNREACH", Unreachable),
    -17: ("SPINDLE_EMINORITY", Minority),
    -18: ("SPINDLE_EREMOVED", Removed),
    -19: ("SPINDLE_EAUTH", AuthenticationFailed),
}

# The codes as module constants: spindle.EMSGSIZE == -12.
globals().update({name[len("SPINDLE_"):]: code for code, (name, _) in CODES.items()})


def error_name(code):
    """"SPINDLE_EMSGSIZE" for -12; "SPINDLE_E<code>" for a code this
    version of the bindings does not know (a newer library)."""
    known = CODES.get(code)
    return known[0] if known else f"SPINDLE_E{code}"


def make_error(code, call=None):
    """The exception for a negative code, with the calling thread's
    spindle_errmsg(); call it right after the failing call, on its thread."""
    detail = _lib.lib.spindle_errmsg()
    detail = detail.decode(errors="replace") if detail else ""
    known = CODES.get(code)
    cls = known[1] if known else SpindleError
    return cls(code, detail, call)


def check(code, call=None):
    """Returns code when it is not negative, else raises its exception."""
    if code < 0:
        raise make_error(code, call)
    return code
