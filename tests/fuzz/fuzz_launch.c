/*
 * libFuzzer target: the launcher formats behind
 * spindle_group_setup_from_env (src/config/launch_parse.c), which read the
 * environment and a hostfile. The first byte picks the parser (Slurm host
 * list, Slurm tasks per node, hostfile), the rest up to a NUL is its text.
 * The target checks that an accepted input keeps the promises of
 * src/config/setup_internal.h (1..4096 hosts of host-name characters,
 * 1..255 long, slots >= 1; counts >= 1 within the bound), that parsing the
 * same text twice gives the same result, that a refusal is
 * SPINDLE_ECONFIG naming the variable or file, and (LeakSanitizer) that
 * nothing leaks either way.
 */
#include <ctype.h>

#include "config/setup_internal.h"
#include "fuzz_common.h"

#define FUZZ_TASKS_MAX 64u

static void check_hosts(const struct launch_hosts *hosts)
{
    FUZZ_CHECK(hosts->count >= 1 && hosts->count <= LAUNCH_MAX_HOSTS);
    for (uint32_t i = 0; i < hosts->count; i++) {
        size_t len = strlen(hosts->names[i]);
        FUZZ_CHECK(len >= 1 && len <= LAUNCH_HOST_MAX);
        for (size_t c = 0; c < len; c++) {
            char ch = hosts->names[i][c];
            FUZZ_CHECK(isalnum((unsigned char)ch) || ch == '-' || ch == '.' || ch == '_');
        }
        FUZZ_CHECK(hosts->slots[i] >= 1);
    }
}

static bool same_hosts(const struct launch_hosts *a, const struct launch_hosts *b)
{
    if (a->count != b->count)
        return false;
    for (uint32_t i = 0; i < a->count; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || a->slots[i] != b->slots[i])
            return false;
    return true;
}

static int parse_hosts(int which, const char *text, struct launch_hosts *out)
{
    return which == 0 ? launch_hostlist_expand("SLURM_STEP_NODELIST", text, out)
                      : launch_hostfile_parse("hostfile", text, out);
}

static void fuzz_hosts(int which, const char *text)
{
    struct launch_hosts first, again;
    int rc = parse_hosts(which, text, &first);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_ECONFIG);
        FUZZ_CHECK(first.count == 0 && first.names == NULL);
        const char *name = which == 0 ? "SLURM_STEP_NODELIST" : "hostfile";
        FUZZ_CHECK(strncmp(spindle_errmsg(), name, strlen(name)) == 0);
        return;
    }
    check_hosts(&first);
    FUZZ_CHECK(parse_hosts(which, text, &again) == 0);
    FUZZ_CHECK(same_hosts(&first, &again));
    launch_hosts_free(&first);
    launch_hosts_free(&again);
}

static void fuzz_tasks(const char *text)
{
    uint32_t counts[FUZZ_TASKS_MAX], again[FUZZ_TASKS_MAX], n = 0, n_again = 0;
    int rc = launch_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", text, counts, FUZZ_TASKS_MAX, &n);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_ECONFIG);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "SLURM_STEP_TASKS_PER_NODE '", 27) == 0);
        return;
    }
    FUZZ_CHECK(n >= 1 && n <= FUZZ_TASKS_MAX);
    for (uint32_t i = 0; i < n; i++)
        FUZZ_CHECK(counts[i] >= 1);
    FUZZ_CHECK(launch_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", text, again, FUZZ_TASKS_MAX,
                                     &n_again) == 0);
    FUZZ_CHECK(n_again == n && memcmp(counts, again, n * sizeof *counts) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *text = malloc(size);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0'; /* the text ends at its first NUL */
    switch (data[0] % 3) {
    case 0:
        fuzz_hosts(0, text);
        break;
    case 1:
        fuzz_tasks(text);
        break;
    default:
        fuzz_hosts(1, text);
        break;
    }
    free(text);
    return 0;
}
