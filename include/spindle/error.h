/*
 * libspindle error codes.
 *
 * Every fallible public function returns 0 (or a non-negative count) on
 * success and a negative SPINDLE_E* code on failure. spindle_strerror() names
 * the code; spindle_errmsg() returns the calling thread's detailed message for
 * the most recent failure, which names what was wrong and the offending value
 * ("max_payload 70000 exceeds slot limit 65536").
 */
#ifndef SPINDLE_ERROR_H
#define SPINDLE_ERROR_H

#include <spindle/export.h>

#ifdef __cplusplus
extern "C" {
#endif

enum spindle_error {
    SPINDLE_OK = 0,
    SPINDLE_EINVAL = -1,      /* an argument or configuration value is invalid */
    SPINDLE_ENOMEM = -2,      /* out of memory */
    SPINDLE_EAGAIN = -3,      /* resource temporarily full (window, send queue) */
    SPINDLE_ETIMEDOUT = -4,   /* a deadline passed */
    SPINDLE_EPEERFAILED = -5, /* a peer failed or its link broke */
    SPINDLE_ENODEV = -6,      /* required device or backend is not present */
    SPINDLE_ENOTSUP = -7,     /* operation not supported by this backend/build */
    SPINDLE_EIO = -8,         /* an operating-system or transport call failed */
    SPINDLE_EADDRINUSE = -9,  /* a listening address or shared object is taken */
    SPINDLE_ENOENT = -10,     /* a named member, subgroup, file or object is unknown */
    SPINDLE_ESHUTDOWN = -11,  /* the object is shutting down or closed */
    SPINDLE_EMSGSIZE = -12,   /* a message exceeds the configured limit */
    SPINDLE_EPERM = -13,      /* caller lacks the role (e.g. not a sender) */
    SPINDLE_ECONFIG = -14,    /* a configuration file is malformed */
    SPINDLE_EPROTO = -15,     /* a peer sent something malformed */
    SPINDLE_EUNREACH = -16,   /* a peer could not be reached */
    SPINDLE_EMINORITY = -17,  /* this member is cut off in a minority partition */
    SPINDLE_EREMOVED = -18,   /* the others removed this member (suspected it failed) */
    SPINDLE_EAUTH = -19,      /* a peer failed authentication with the group key */
    SPINDLE_ERROR_MIN = -19
};

/* Short, static description of an error code; never NULL. */
SPINDLE_API const char *spindle_strerror(int code);

/*
 * Detailed message for the calling thread's most recent failed call, or ""
 * if none. The pointer stays valid until the next failing call on the same
 * thread.
 */
SPINDLE_API const char *spindle_errmsg(void);

#ifdef __cplusplus
}
#endif

#endif
