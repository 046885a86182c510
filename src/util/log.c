#include "util/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spindle/error.h>

#include "util/error.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};

/* -1 until the first line or spindle_log_set_level. */
static atomic_int current_level = -1;

/* The application's sink, called under sink_lock (lines one at a time);
 * sink_set says whether there is one, so that the default stderr path
 * takes no lock. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool sink_set;
static spindle_log_sink_t sink_fn;
static void *sink_ctx;
/* Set while this thread is inside the application's sink. */
static _Thread_local bool in_sink;

int sp_log_parse_level(const char *text, enum sp_log_level *out)
{
    for (int i = 0; text != NULL && i < 4; i++) {
        if (strcmp(text, level_names[i]) == 0) {
            *out = (enum sp_log_level)i;
            return 0;
        }
    }
    return SPINDLE_EINVAL;
}

SPINDLE_API int spindle_log_parse_level(const char *text, enum spindle_log_level *out)
{
    enum sp_log_level level;
    if (out == NULL || sp_log_parse_level(text, &level) != 0)
        return sp_error(SPINDLE_EINVAL, "log level '%s' is not error, warn, info or debug",
                        text != NULL ? text : "(null)");
    *out = (enum spindle_log_level)level;
    return 0;
}

static int level_now(void)
{
    int level = atomic_load_explicit(&current_level, memory_order_relaxed);
    if (level < 0) {
        enum sp_log_level parsed = SP_LOG_WARN;
        /* Declared in src/config/config_env.c, which this layer may not
         * include: scripts/check-env.sh holds the name to the table. */
        const char *env = getenv("SPINDLE_LOG_LEVEL");
        if (env != NULL)
            (void)sp_log_parse_level(env, &parsed);
        /* Unless spindle_log_set_level got there first. */
        int unset = -1;
        atomic_compare_exchange_strong(&current_level, &unset, (int)parsed);
        level = atomic_load_explicit(&current_level, memory_order_relaxed);
    }
    return level;
}

SPINDLE_API int spindle_log_set_level(enum spindle_log_level level)
{
    if ((int)level < SPINDLE_LOG_ERROR || (int)level > SPINDLE_LOG_DEBUG)
        return sp_error(SPINDLE_EINVAL, "log level %d is outside %d (error) .. %d (debug)",
                        (int)level, SPINDLE_LOG_ERROR, SPINDLE_LOG_DEBUG);
    atomic_store_explicit(&current_level, (int)level, memory_order_relaxed);
    return 0;
}

SPINDLE_API enum spindle_log_level spindle_log_get_level(void)
{
    return (enum spindle_log_level)level_now();
}

/* A process that forks while another thread is inside the sink must not
 * leave the child a lock that nobody will release. */
static void sink_lock_take(void)
{
    pthread_mutex_lock(&sink_lock);
}

static void sink_lock_give(void)
{
    pthread_mutex_unlock(&sink_lock);
}

__attribute__((constructor)) static void sink_lock_atfork(void)
{
    pthread_atfork(sink_lock_take, sink_lock_give, sink_lock_give);
}

SPINDLE_API void spindle_log_set_sink(spindle_log_sink_t sink, void *ctx)
{
    pthread_mutex_lock(&sink_lock);
    sink_fn = sink;
    sink_ctx = ctx;
    atomic_store(&sink_set, sink != NULL);
    pthread_mutex_unlock(&sink_lock);
}

int sp_log_enabled(enum sp_log_level level)
{
    return (int)level <= level_now();
}

static void to_stderr(enum sp_log_level level, const char *module, const char *message)
{
    fprintf(stderr, "spindle[%d] %s %s: %s\n", (int)getpid(), level_names[level], module, message);
}

void sp_log(enum sp_log_level level, const char *module, const char *fmt, ...)
{
    if (!sp_log_enabled(level))
        return;
    char message[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    if (in_sink || !atomic_load(&sink_set)) {
        /* No sink of the application's, or it called back into the
         * library (its lock is held): stderr, one write per line. */
        to_stderr(level, module, message);
        return;
    }
    pthread_mutex_lock(&sink_lock);
    if (sink_fn != NULL) {
        in_sink = true;
        sink_fn(sink_ctx, (enum spindle_log_level)level, module, message);
        in_sink = false;
    } else {
        to_stderr(level, module, message);
    }
    pthread_mutex_unlock(&sink_lock);
}
