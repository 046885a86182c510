/*
 * Internal error reporting. sp_error() records a detailed, thread-local
 * message for spindle_errmsg() and returns the code, so a failing path reads
 *     return sp_error(SPINDLE_EINVAL, "window_size %u must be >= 1", n);
 * Thread-safe: the message buffer is per thread.
 */
#ifndef SP_UTIL_ERROR_H
#define SP_UTIL_ERROR_H

#include <spindle/error.h>

/* Records "fmt..." as the calling thread's last error message. */
void sp_error_record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records "fmt..." as the calling thread's last error and yields code. A
 * macro, so that readers and analyzers see the value it returns: code is
 * evaluated once, after the message is formatted (callers often pass
 * spindle_errmsg() into the new message). */
static inline int sp_error_code(int code)
{
    return code;
}
#define sp_error(code, ...) (sp_error_record(__VA_ARGS__), sp_error_code(code))

#endif
