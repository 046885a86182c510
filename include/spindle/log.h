/*
 * Logging owned by the application. The library writes each log line
 * through one sink: by default to stderr as
 *   spindle[<pid>] <level> <module>: <message>
 * and, once the application sets its own, to that. The level (what is
 * logged at all) comes from SPINDLE_LOG_LEVEL (error, warn, info, debug;
 * default warn), read at the first line, until spindle_log_set_level
 * sets it.
 *
 * Threads: lines come from whichever thread logs (the predicate thread,
 * the application's threads inside library calls). The sink is called
 * for one line at a time, never concurrently with itself; a line logged
 * by the library from inside the sink (the sink called back into the
 * library) goes to stderr instead, so a sink cannot deadlock on itself.
 * All four calls may be made from any thread at any time.
 */
#ifndef SPINDLE_LOG_H
#define SPINDLE_LOG_H

#include <spindle/export.h>

#ifdef __cplusplus
extern "C" {
#endif

enum spindle_log_level {
    SPINDLE_LOG_ERROR = 0, /* the library or a member cannot go on */
    SPINDLE_LOG_WARN = 1,  /* something was refused, dropped or removed */
    SPINDLE_LOG_INFO = 2,  /* views, joins, transport choices */
    SPINDLE_LOG_DEBUG = 3,
};

/* One log line: module names the part of the library ("view", "control",
 * "sst", ...); message has no trailing newline. Both strings are valid
 * only during the call. */
typedef void (*spindle_log_sink_t)(void *ctx, enum spindle_log_level level, const char *module,
                                   const char *message);

/* Routes every later line to sink(ctx, ...); NULL restores stderr. Lines
 * being written when it is called finish on the sink they started on. */
SPINDLE_API void spindle_log_set_sink(spindle_log_sink_t sink, void *ctx);

/* Logs lines of level and more severe from now on (overrides
 * SPINDLE_LOG_LEVEL). 0, or SPINDLE_EINVAL for a level outside
 * SPINDLE_LOG_ERROR..SPINDLE_LOG_DEBUG (the level is then unchanged). */
SPINDLE_API int spindle_log_set_level(enum spindle_log_level level);

/* The level in force. */
SPINDLE_API enum spindle_log_level spindle_log_get_level(void);

/* Parses "error", "warn", "info" or "debug" (a config file's log_level,
 * an option). 0, or SPINDLE_EINVAL naming the text. */
SPINDLE_API int spindle_log_parse_level(const char *text, enum spindle_log_level *out);

#ifdef __cplusplus
}
#endif

#endif
