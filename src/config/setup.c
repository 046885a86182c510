/*
 * struct spindle_group_setup (include/spindle/setup.h): group options and
 * subgroups from a loaded configuration, owned by the setup. The launcher
 * environment (setup_env.c) supplies the members and this file the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/log.h>
#include <spindle/setup.h>

#include "config/config_env.h"
#include "config/setup_internal.h"
#include "util/error.h"

struct spindle_group_setup_storage {
    void **blocks;
    uint32_t count, capacity;
};

void *setup_keep(struct spindle_group_setup *setup, void *block)
{
    struct spindle_group_setup_storage *s = setup->storage;
    if (block == NULL)
        return NULL;
    if (s->count == s->capacity) {
        uint32_t capacity = s->capacity > 0 ? s->capacity * 2 : 16;
        void **grown = realloc(s->blocks, capacity * sizeof *grown);
        if (grown == NULL) {
            free(block);
            return NULL;
        }
        s->blocks = grown;
        s->capacity = capacity;
    }
    s->blocks[s->count++] = block;
    return block;
}

/* A copy the setup owns; NULL stays NULL. Sets *failed on no memory. */
static const char *setup_strdup(struct spindle_group_setup *setup, const char *text, bool *failed)
{
    if (text == NULL)
        return NULL;
    const char *copy = setup_keep(setup, strdup(text));
    if (copy == NULL)
        *failed = true;
    return copy;
}

int setup_begin(struct spindle_group_setup *out)
{
    memset(out, 0, sizeof *out);
    spindle_group_options_init(&out->options);
    out->storage = calloc(1, sizeof *out->storage);
    if (out->storage == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory for the group setup");
    return 0;
}

void setup_storage_free(struct spindle_group_setup_storage *storage)
{
    if (storage == NULL)
        return;
    for (uint32_t i = 0; i < storage->count; i++)
        free(storage->blocks[i]);
    free(storage->blocks);
    free(storage);
}

int setup_fail(struct spindle_group_setup *setup, int code)
{
    setup_storage_free(setup->storage);
    memset(setup, 0, sizeof *setup);
    return code;
}

/* The file's [group] values and the log level. */
static int setup_group_values(const struct spindle_config *config, uint32_t self,
                              struct spindle_group_setup *out)
{
    struct spindle_group_options *o = &out->options;
    bool failed = false;
    o->transport = setup_strdup(out, config->group.transport, &failed);
    o->provider = setup_strdup(out, config->group.provider, &failed);
    o->device = setup_strdup(out, config->group.device, &failed);
    o->group_name = setup_strdup(out, config->group.name, &failed);
    o->key_file = setup_strdup(out, config->group.key_file, &failed);
    o->accept_key_file = setup_strdup(out, config->group.accept_key_file, &failed);
    o->admin_dir = setup_strdup(out, config->group.admin_dir, &failed);
    o->log_dir = setup_strdup(out, config->group.log_dir, &failed);
    if (config->group.failure_timeout_ms > 0)
        o->failure_timeout_ms = config->group.failure_timeout_ms;
    o->slow_member_ms = config->group.slow_member_ms;
    o->tie_breaker = config->group.tie_breaker;
    o->dispatch = config->group.dispatch;
    o->dispatch_queue_bytes = (size_t)config->group.dispatch_queue_bytes;
    o->p2p_window = config->group_p2p_window;
    o->own_inline = config->group_own_inline;
    const struct spindle_config_member *own = spindle_config_member(config, self);
    if (own != NULL)
        o->member_name = setup_strdup(out, own->name, &failed);
    if (failed)
        return sp_error(SPINDLE_ENOMEM, "out of memory for the group setup");
    /* The loader checked the file's level; SPINDLE_LOG_LEVEL names one for this run. */
    enum spindle_log_level level;
    if (config->group.log_level != NULL && cfg_env_get("SPINDLE_LOG_LEVEL") == NULL &&
        spindle_log_parse_level(config->group.log_level, &level) == 0)
        spindle_log_set_level(level);
    return 0;
}

/* One atomic subgroup of every member, each a sender. */
static int setup_default_subgroup(struct spindle_group_setup *out)
{
    uint32_t n = out->options.num_members;
    uint32_t *all = setup_keep(out, malloc(n * sizeof *all));
    out->subgroups = setup_keep(out, calloc(1, sizeof *out->subgroups));
    if (all == NULL || out->subgroups == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory for the group setup");
    for (uint32_t i = 0; i < n; i++)
        all[i] = i;
    out->subgroups[0] = (struct spindle_subgroup_config){
        .members = all,
        .num_members = n,
        .senders = all,
        .num_senders = n,
        .window_size = SPINDLE_SETUP_DEFAULT_WINDOW,
        .max_payload = SPINDLE_SETUP_DEFAULT_PAYLOAD,
        .mode = SPINDLE_MODE_ATOMIC,
    };
    out->num_subgroups = 1;
    return 0;
}

/* A copy of ids the setup owns, each checked to be below num_members. */
static const uint32_t *setup_ids(struct spindle_group_setup *out, const char *path, uint32_t index,
                                 const uint32_t *ids, uint32_t count, int *rc)
{
    for (uint32_t i = 0; i < count; i++)
        if (ids[i] >= out->options.num_members) {
            *rc = sp_error(SPINDLE_ECONFIG,
                           "%s: [subgroup.%u] names member %u, but the group has members 0..%u",
                           path, index, ids[i], out->options.num_members - 1);
            return NULL;
        }
    uint32_t *copy = setup_keep(out, malloc((count > 0 ? count : 1) * sizeof *copy));
    if (copy == NULL) {
        *rc = sp_error(SPINDLE_ENOMEM, "out of memory for the group setup");
        return NULL;
    }
    memcpy(copy, ids, count * sizeof *copy);
    return copy;
}

/* The file's subgroups, or the default one. */
static int setup_subgroups(const struct spindle_config *config, struct spindle_group_setup *out)
{
    if (config == NULL || config->num_subgroups == 0)
        return setup_default_subgroup(out);
    const char *path = config->path != NULL ? config->path : "configuration";
    uint32_t n = config->num_subgroups;
    out->subgroups = setup_keep(out, calloc(n, sizeof *out->subgroups));
    uint32_t *logged = setup_keep(out, calloc(n, sizeof *logged));
    if (out->subgroups == NULL || logged == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory for the group setup");
    uint32_t num_logged = 0;
    for (uint32_t g = 0; g < n; g++) {
        const struct spindle_config_subgroup *s = &config->subgroups[g];
        if (s->index != g)
            return sp_error(SPINDLE_ECONFIG,
                            "%s: subgroup indices must be 0..%u without gaps, but [subgroup.%u] "
                            "is missing",
                            path, n - 1, g);
        struct spindle_subgroup_config *sub = &out->subgroups[g];
        int rc = 0;
        sub->num_members = s->num_members;
        sub->members = setup_ids(out, path, g, s->members, s->num_members, &rc);
        sub->num_senders = s->num_senders > 0 ? s->num_senders : s->num_members;
        if (rc == 0)
            sub->senders = setup_ids(out, path, g, s->num_senders > 0 ? s->senders : s->members,
                                     sub->num_senders, &rc);
        if (rc != 0)
            return rc;
        sub->window_size = s->window_size;
        sub->max_payload = s->max_payload;
        sub->mode = s->mode;
        if (s->logged) /* the loader checked that it is atomic */
            logged[num_logged++] = g;
    }
    out->num_subgroups = n;
    out->options.logged_subgroups = num_logged > 0 ? logged : NULL;
    out->options.num_logged_subgroups = num_logged;
    return 0;
}

int setup_finish(const struct spindle_config *config, uint32_t self,
                 const struct setup_member *members, uint32_t num_members,
                 struct spindle_group_setup *out)
{
    size_t cap = 1;
    for (uint32_t i = 0; i < num_members; i++)
        cap += strlen(members[i].host) + 8;
    char *list = setup_keep(out, malloc(cap));
    if (list == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory for the member list");
    char *p = list;
    for (uint32_t i = 0; i < num_members; i++)
        p += sprintf(p, "%s%s:%u", i > 0 ? "," : "", members[i].host, members[i].port);
    out->options.bootstrap = list;
    out->options.bootstrap_kind = SPINDLE_BOOTSTRAP_TCP;
    out->options.self = self;
    out->options.num_members = num_members;
    int rc = config != NULL ? setup_group_values(config, self, out) : 0;
    return rc != 0 ? rc : setup_subgroups(config, out);
}

/* Ids 0..n-1 without gaps, each with a port. */
static int setup_check_members(const struct spindle_config *config, const char *path)
{
    if (config->num_members == 0)
        return sp_error(SPINDLE_ECONFIG,
                        "%s: the file defines no members (add [member.0] ... sections)", path);
    if (config->num_members > SPINDLE_MAX_MEMBERS)
        return sp_error(SPINDLE_ECONFIG, "%s: %u members, more than the %u a group may have", path,
                        config->num_members, SPINDLE_MAX_MEMBERS);
    for (uint32_t i = 0; i < config->num_members; i++) {
        const struct spindle_config_member *m = &config->members[i];
        if (m->id != i)
            return sp_error(SPINDLE_ECONFIG,
                            "%s: member ids must be 0..%u without gaps, but [member.%u] is missing",
                            path, config->num_members - 1, i);
        if (m->port == 0)
            return sp_error(SPINDLE_ECONFIG,
                            "%s: [member.%u] needs a port: members find each other at host:port",
                            path, i);
    }
    return 0;
}

int setup_from_config(const struct spindle_config *config, uint32_t id,
                      struct spindle_group_setup *out)
{
    if (out == NULL || config == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_setup_from_config: %s is NULL",
                        out == NULL ? "out" : "config");
    memset(out, 0, sizeof *out);
    const char *path = config->path != NULL ? config->path : "configuration";
    int rc = setup_check_members(config, path);
    if (rc != 0)
        return rc;
    if (id >= config->num_members)
        return sp_error(SPINDLE_EINVAL,
                        "%s: id %u is not a member (the file defines members 0..%u)", path, id,
                        config->num_members - 1);
    rc = setup_begin(out);
    if (rc != 0)
        return rc;
    struct setup_member *members = setup_keep(out, calloc(config->num_members, sizeof *members));
    if (members == NULL)
        return setup_fail(out, sp_error(SPINDLE_ENOMEM, "out of memory for the member list"));
    for (uint32_t i = 0; i < config->num_members; i++)
        members[i] = (struct setup_member){config->members[i].host, config->members[i].port};
    rc = setup_finish(config, id, members, config->num_members, out);
    return rc != 0 ? setup_fail(out, rc) : 0;
}
