/*
 * Minimal leveled logging to stderr. The level comes from
 * SPINDLE_LOG_LEVEL (error, warn, info, debug), read at the first log call.
 * Thread-safe: one fprintf per line.
 */
#ifndef SP_UTIL_LOG_H
#define SP_UTIL_LOG_H

enum sp_log_level { SP_LOG_ERROR = 0, SP_LOG_WARN, SP_LOG_INFO, SP_LOG_DEBUG };

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
