/*
 * Leveled logging through the application's sink (include/spindle/log.h:
 * the public side, the default stderr sink, the level). The library logs
 * with sp_log and the SP_LOG_* shorthands below.
 *
 * Thread-safe: a lock serializes lines on their way to the sink; a line
 * logged from inside the sink goes to stderr.
 */
#ifndef SP_UTIL_LOG_H
#define SP_UTIL_LOG_H

#include <spindle/log.h>

enum sp_log_level {
    SP_LOG_ERROR = SPINDLE_LOG_ERROR,
    SP_LOG_WARN = SPINDLE_LOG_WARN,
    SP_LOG_INFO = SPINDLE_LOG_INFO,
    SP_LOG_DEBUG = SPINDLE_LOG_DEBUG,
};

/* Parses "error|warn|info|debug"; returns 0 or SPINDLE_EINVAL. */
int sp_log_parse_level(const char *text, enum sp_log_level *out);
int sp_log_enabled(enum sp_log_level level);
void sp_log(enum sp_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define SP_LOG_ERR(mod, ...)     sp_log(SP_LOG_ERROR, mod, __VA_ARGS__)
#define SP_LOG_WARNING(mod, ...) sp_log(SP_LOG_WARN, mod, __VA_ARGS__)
#define SP_LOG_INFO_(mod, ...)   sp_log(SP_LOG_INFO, mod, __VA_ARGS__)
#define SP_LOG_DBG(mod, ...)     sp_log(SP_LOG_DEBUG, mod, __VA_ARGS__)

#endif
