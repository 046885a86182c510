/*
 * Internal error reporting. sp_error() records a detailed, thread-local
 * message for spindle_errmsg() and returns the code, so a failing path reads
 *     return sp_error(SPINDLE_EINVAL, "window_size %u must be >= 1", n);
 * Thread-safe: the message buffer is per thread.
 */
#ifndef SP_UTIL_ERROR_H
#define SP_UTIL_ERROR_H

#include <spindle/error.h>

/* Records "fmt..." as the calling thread's last error and returns code. */
int sp_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's last error message. */
void sp_error_clear(void);

#endif
