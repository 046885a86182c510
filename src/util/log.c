#include "util/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/error.h>

static atomic_int current_level = -1;

int sp_log_parse_level(const char *text, enum sp_log_level *out)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(text, names[i]) == 0) {
            *out = (enum sp_log_level)i;
            return 0;
        }
    }
    return SPINDLE_EINVAL;
}

static int level_now(void)
{
    int level = atomic_load_explicit(&current_level, memory_order_relaxed);
    if (level < 0) {
        enum sp_log_level parsed = SP_LOG_WARN;
        const char *env = getenv("SPINDLE_LOG_LEVEL");
        if (env != NULL)
            (void)sp_log_parse_level(env, &parsed);
        level = (int)parsed;
        atomic_store_explicit(&current_level, level, memory_order_relaxed);
    }
    return level;
}

int sp_log_enabled(enum sp_log_level level)
{
    return (int)level <= level_now();
}

void sp_log(enum sp_log_level level, const char *module, const char *fmt, ...)
{
    static const char *tags[] = {"error", "warn", "info", "debug"};
    if (!sp_log_enabled(level))
        return;
    char line[1024];
    int used =
        snprintf(line, sizeof line, "spindle[%d] %s %s: ", (int)getpid(), tags[level], module);
    if (used < 0 || (size_t)used >= sizeof line)
        used = 0;
    va_list args;
    va_start(args, fmt);
    vsnprintf(line + used, sizeof line - (size_t)used, fmt, args);
    va_end(args);
    fprintf(stderr, "%s\n", line);
}
