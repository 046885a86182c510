/*
 * libFuzzer's initialisation hook, linked into every fuzz target. It runs
 * before libFuzzer installs its signal handlers, and puts two things of the
 * process back to a known state:
 *  - signal handlers that shared libraries installed when they were loaded:
 *    Debian's libfabric pulls in libinfinipath (PSM), whose constructor
 *    catches SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM and calls
 *    exit(). libFuzzer leaves an existing handler in place, so a crash or a
 *    failed check would read "fuzz target exited" without the signal; reset
 *    to the default, libFuzzer installs its own and reports the crash.
 *  - SPINDLE_* environment variables, which override configuration keys:
 *    the INI target's results must not depend on the caller's environment.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

extern char **environ;

static void clear_spindle_environment(void)
{
    for (int removed = 1; removed;) {
        removed = 0;
        for (char **env = environ; *env != NULL; env++) {
            if (strncmp(*env, "SPINDLE_", 8) != 0)
                continue;
            char name[256];
            size_t len = strcspn(*env, "=");
            if (len >= sizeof name)
                continue;
            memcpy(name, *env, len);
            name[len] = '\0';
            unsetenv(name); /* environ changed: start over */
            removed = 1;
            break;
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const int signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE, SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        signal(signals[i], SIG_DFL);
    clear_spindle_environment();
    return 0;
}
