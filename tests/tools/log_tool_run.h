/*
 * Runs spindle-log for the tests in tests/tools: its exit status, and its
 * stdout and stderr in out (through the file <root>/tool-output).
 */
#ifndef SPINDLE_TESTS_TOOLS_LOG_TOOL_RUN_H
#define SPINDLE_TESTS_TOOLS_LOG_TOOL_RUN_H

#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* args: argv of the tool, NULL-terminated (args[0] its path). -1 when it
 * did not exit normally. cmocka.h comes first. */
static inline int log_tool_run(const char *root, char *out, size_t size, const char *const *args)
{
    char path[128];
    snprintf(path, sizeof path, "%s/tool-output", root);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(99);
        execv(args[0], (char *const *)args);
        _exit(98);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    size_t got = fread(out, 1, size - 1, file);
    out[got] = '\0';
    fclose(file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif
