/*
 * spindle-bench --config FILE --id N: one member of a group described by an
 * INI file (docs/CONFIG.md). The file gives the members (id, host, port:
 * the TCP bootstrap address, which is also where the member's transport
 * listens), the transport and provider, the failure timeout and the
 * subgroups; its [bench] section gives the workload defaults. Command-line
 * flags override the workload (--messages, --duration, --msg-size, --window, --mode,
 * --senders, --active-subgroups) and --transport/--provider.
 *
 * Also the per-subgroup view of the workload that bench_member.c uses, with
 * or without a file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Reads the file and sets everything it defines as the defaults that the
 * command line may then override. Returns 0, or 2 after printing the
 * loader's "file:line: key = value: what is wrong". */
int bench_config_load(struct bench_config *c, const char *path)
{
    struct spindle_config *file = NULL;
    int rc = spindle_config_load(path, &file);
    if (rc != 0) {
        if (rc == SPINDLE_ENOENT)
            fprintf(stderr, "spindle-bench: --config %s: %s\n", path, spindle_errmsg());
        else
            fprintf(stderr, "spindle-bench: %s\n", spindle_errmsg());
        return 2;
    }
    c->file = file;
    c->config_path = path;
    c->transport = file->group.transport;
    c->provider = file->group.provider;
    c->device = file->group.device;
    c->failure_timeout_ms = file->group.failure_timeout_ms;
    c->slow_member_ms = file->group.slow_member_ms;
    c->tie_breaker = file->group.tie_breaker;
    c->key_file = file->group.key_file;
    c->log_dir = file->group.log_dir;
    c->dispatch = file->group.dispatch;
    c->accept_key_file = file->group.accept_key_file;
    snprintf(c->group_name, sizeof c->group_name, "%s", file->group.name);
    c->messages = file->bench.messages;
    c->duration_ns = (uint64_t)file->bench.duration_ms * 1000000ull; /* 0: counted run */
    c->msg_size = file->bench.message_size;
    c->window = 0;           /* 0: each subgroup's window_size */
    c->subgroups = 0;        /* must stay 0: the file lists the subgroups */
    c->active_subgroups = 0; /* 0: every subgroup of the file */
    c->senders = SENDERS_FILE;
    return 0;
}

static int config_error(const struct bench_config *c, const char *what)
{
    fprintf(stderr, "spindle-bench: %s: %s\n(see spindle-bench --help)\n", c->config_path, what);
    return 2;
}

/* Checks what the file and the command line say together. Returns 0 or 2
 * after printing one message naming the culprit. */
int bench_config_finish(struct bench_config *c)
{
    const struct spindle_config *file = c->file;
    char what[320];
    if (c->local > 0 || c->members != NULL)
        return config_error(c, "--local and --members cannot be combined with --config (the "
                               "file lists the members)");
    if (c->subgroups != 0)
        return config_error(c, "--subgroups cannot be combined with --config (the file lists "
                               "the subgroups)");
    if (c->id < 0)
        return config_error(c, "give --id N: which member of the file this process is");
    /* The library checks the member list (ids without gaps, ports) and
     * builds the bootstrap list; the file's log level applies from here. */
    int rc = spindle_group_setup_from_config(file, (uint32_t)c->id, &c->setup);
    if (rc == SPINDLE_EINVAL) {
        snprintf(what, sizeof what, "--id %d is not a member (the file defines members 0..%u)",
                 c->id, file->num_members - 1);
        return config_error(c, what);
    }
    if (rc != 0) {
        fprintf(stderr, "spindle-bench: %s\n(see spindle-bench --help)\n", spindle_errmsg());
        return 2;
    }
    c->members = c->setup.options.bootstrap;
    const struct spindle_config_member *own = spindle_config_member(file, (uint32_t)c->id);
    if (c->name == NULL)
        c->name = own->name; /* --name wins over [member.N] name */
    /* --tolerate-failures counts deliveries per sender of the whole group. */
    for (uint32_t g = 0; c->tolerate_failures && g < file->num_subgroups; g++) {
        const struct spindle_config_subgroup *s = &file->subgroups[g];
        bool all_send = s->num_senders == 0 || s->num_senders == s->num_members;
        if (s->num_members != file->num_members || !all_send ||
            (c->senders != SENDERS_FILE && c->senders != SENDERS_ALL)) {
            snprintf(what, sizeof what,
                     "--tolerate-failures needs every member to be a member and a sender of "
                     "every subgroup ([subgroup.%u] is not)",
                     g);
            return config_error(c, what);
        }
    }
    c->subgroups = file->num_subgroups > 0 ? file->num_subgroups : 1;
    if (c->active_subgroups == 0)
        c->active_subgroups = c->subgroups;
    if (c->active_subgroups > c->subgroups) {
        snprintf(what, sizeof what, "--active-subgroups %u exceeds the %u subgroups of the file",
                 c->active_subgroups, c->subgroups);
        return config_error(c, what);
    }
    for (uint32_t g = 0; g < file->num_subgroups; g++) {
        const struct spindle_config_subgroup *s = &file->subgroups[g];
        if (g < c->active_subgroups && c->msg_size > s->max_payload) {
            snprintf(what, sizeof what,
                     "message size %u (--msg-size, or [bench] message_size) exceeds max_payload %u "
                     "of [subgroup.%u]",
                     c->msg_size, s->max_payload, g);
            return config_error(c, what);
        }
    }
    /* One window or mode shared by every subgroup reads as if given on the
     * command line (the report names it); mixed ones stay per subgroup. */
    bool one_window = file->num_subgroups > 0, one_mode = file->num_subgroups > 0;
    for (uint32_t g = 1; g < file->num_subgroups; g++) {
        one_window &= file->subgroups[g].window_size == file->subgroups[0].window_size;
        one_mode &= file->subgroups[g].mode == file->subgroups[0].mode;
    }
    if (one_window && c->window == 0)
        c->window = file->subgroups[0].window_size;
    if (one_mode && !c->mode_given) {
        c->mode = file->subgroups[0].mode;
        c->mode_given = true;
    }
    return 0;
}

/* The subgroup senders with --senders applied: the first k members. */
static uint32_t file_senders(const struct bench_config *c, const struct spindle_config_subgroup *s,
                             const uint32_t **senders)
{
    *senders = s->num_senders > 0 ? s->senders : s->members;
    uint32_t n = s->num_senders > 0 ? s->num_senders : s->num_members;
    switch (c->senders) {
    case SENDERS_ONE:
        *senders = s->members;
        return 1;
    case SENDERS_HALF:
        *senders = s->members;
        return s->num_members / 2 > 0 ? s->num_members / 2 : 1;
    case SENDERS_ALL:
        *senders = s->members;
        return s->num_members;
    default:
        return n;
    }
}

void bench_subgroup(const struct bench_config *c, uint32_t g, uint32_t members, const uint32_t *all,
                    struct spindle_subgroup_config *out)
{
    memset(out, 0, sizeof *out);
    const struct spindle_config_subgroup *s =
        c->file != NULL && g < c->file->num_subgroups ? &c->file->subgroups[g] : NULL;
    if (s == NULL) {
        out->members = all;
        out->num_members = members;
        out->senders = all;
        out->num_senders = bench_num_senders(c, members);
        out->window_size = c->window > 0 ? c->window : 100;
        out->max_payload = c->msg_size;
        out->mode = c->mode;
        return;
    }
    out->members = s->members;
    out->num_members = s->num_members;
    out->num_senders = file_senders(c, s, &out->senders);
    out->window_size = c->window > 0 ? c->window : s->window_size;
    out->max_payload = s->max_payload;
    out->mode = c->mode_given ? c->mode : s->mode;
}

int bench_sender_rank(const struct spindle_subgroup_config *sub, uint32_t self)
{
    for (uint32_t i = 0; i < sub->num_senders; i++)
        if (sub->senders[i] == self)
            return (int)i;
    return -1;
}

bool bench_is_member(const struct spindle_subgroup_config *sub, uint32_t self)
{
    for (uint32_t i = 0; i < sub->num_members; i++)
        if (sub->members[i] == self)
            return true;
    return false;
}

void bench_config_release(struct bench_config *c)
{
    spindle_group_setup_free(&c->setup);
    spindle_config_free(c->file);
    c->file = NULL;
}
