#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <spindle/version.h>

static _Thread_local char last_message[512];

void sp_error_record(const char *fmt, ...)
{
    /* Formatted aside first: callers often pass spindle_errmsg() itself to
     * wrap the previous message in a new one. */
    char text[sizeof last_message];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    memcpy(last_message, text, sizeof text);
}

SPINDLE_API const char *spindle_errmsg(void)
{
    return last_message;
}

SPINDLE_API const char *spindle_version(void)
{
    return SPINDLE_VERSION_STRING;
}

SPINDLE_API const char *spindle_strerror(int code)
{
    switch (code) {
    case SPINDLE_OK:
        return "success";
    case SPINDLE_EINVAL:
        return "invalid argument";
    case SPINDLE_ENOMEM:
        return "out of memory";
    case SPINDLE_EAGAIN:
        return "resource temporarily unavailable";
    case SPINDLE_ETIMEDOUT:
        return "timed out";
    case SPINDLE_EPEERFAILED:
        return "peer failed";
    case SPINDLE_ENODEV:
        return "no such device";
    case SPINDLE_ENOTSUP:
        return "operation not supported";
    case SPINDLE_EIO:
        return "input/output error";
    case SPINDLE_EADDRINUSE:
        return "address in use";
    case SPINDLE_ENOENT:
        return "no such member, object or file";
    case SPINDLE_ESHUTDOWN:
        return "shut down";
    case SPINDLE_EMSGSIZE:
        return "message too long";
    case SPINDLE_EPERM:
        return "operation not permitted for this member";
    case SPINDLE_ECONFIG:
        return "malformed configuration";
    case SPINDLE_EPROTO:
        return "protocol error";
    case SPINDLE_EUNREACH:
        return "peer unreachable";
    case SPINDLE_EMINORITY:
        return "member is in a minority partition";
    case SPINDLE_EREMOVED:
        return "member was removed from the group";
    case SPINDLE_EAUTH:
        return "peer failed authentication";
    default:
        return "unknown error";
    }
}
