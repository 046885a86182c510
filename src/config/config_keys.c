/*
 * Configuration keys: what each section accepts, how values are parsed and
 * bounded, and the cross-reference checks run once the file is read.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/group.h> /* the library's limits: SPINDLE_MAX_PAYLOAD, ... */

#include "config/config_keys.h"
#include "util/error.h"
#include "util/log.h"
#include "util/name.h"

struct cfg_owner {
    struct spindle_config pub; /* first: the public pointer is the owner */
    char *path, *name, *transport, *provider, *device, *log_level, *key_file, *accept_key_file,
        *log_dir, *admin_dir;
    struct cfg_member *members;
    struct cfg_subgroup *subgroups;
    struct spindle_config_member *pub_members;
    struct spindle_config_subgroup *pub_subgroups;
};

static _Thread_local char problem[256];

const char *cfg_last_problem(void)
{
    return problem;
}

static int cfg_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int cfg_problem(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *const group_keys[] = {"name",
                                         "transport",
                                         "provider",
                                         "device",
                                         "failure_timeout_ms",
                                         "slow_member_ms",
                                         "tie_breaker",
                                         "log_level",
                                         "key_file",
                                         "accept_key_file",
                                         "log_dir",
                                         "dispatch",
                                         "dispatch_queue_bytes",
                                         "admin_dir",
                                         "p2p_window",
                                         "own_inline",
                                         NULL};
static const char *const member_keys[] = {"host", "port", "name", NULL};
static const char *const subgroup_keys[] = {"members", "senders", "window_size", "max_payload",
                                            "mode",    "logged",  NULL};
static const char *const bench_keys[] = {"messages", "message_size", "duration_ms", NULL};

const char *const *cfg_keys(enum cfg_kind kind)
{
    switch (kind) {
    case CFG_GROUP:
        return group_keys;
    case CFG_MEMBER:
        return member_keys;
    case CFG_SUBGROUP:
        return subgroup_keys;
    default:
        return bench_keys;
    }
}

int cfg_key_index(enum cfg_kind kind, const char *key)
{
    const char *const *keys = cfg_keys(kind);
    for (int i = 0; keys[i] != NULL; i++)
        if (strcmp(keys[i], key) == 0)
            return i;
    return -1;
}

int cfg_key_known(enum cfg_kind kind, const char *key)
{
    return cfg_key_index(kind, key) >= 0;
}

_Static_assert(sizeof group_keys / sizeof group_keys[0] - 1 <= CFG_MAX_KEYS &&
                   sizeof member_keys / sizeof member_keys[0] - 1 <= CFG_MAX_KEYS &&
                   sizeof subgroup_keys / sizeof subgroup_keys[0] - 1 <= CFG_MAX_KEYS &&
                   sizeof bench_keys / sizeof bench_keys[0] - 1 <= CFG_MAX_KEYS,
               "CFG_MAX_KEYS must cover every section kind");

static int cfg_uint(const char *value, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *p = value;
    if (*p == '\0')
        return cfg_problem("must be an integer between %llu and %llu", (unsigned long long)min,
                           (unsigned long long)max);
    for (; *p; p++)
        if (!isdigit((unsigned char)*p))
            return cfg_problem("must be an integer between %llu and %llu", (unsigned long long)min,
                               (unsigned long long)max);
    errno = 0;
    unsigned long long parsed = strtoull(value, NULL, 10);
    if (errno != 0 || parsed < min || parsed > max)
        return cfg_problem("must be between %llu and %llu", (unsigned long long)min,
                           (unsigned long long)max);
    *out = parsed;
    return 0;
}

static int cfg_string(char **slot, const char *value)
{
    if (value[0] == '\0')
        return cfg_problem("must not be empty");
    char *copy = strdup(value);
    if (copy == NULL)
        return cfg_problem("out of memory");
    free(*slot);
    *slot = copy;
    return 0;
}

/* Parses "0, 1, 2" (commas and/or spaces) into a new array of ids. */
static int cfg_id_list(const char *value, uint32_t **out, uint32_t *count)
{
    size_t cap = strlen(value) / 2 + 1, n = 0;
    uint32_t *ids = malloc(cap * sizeof *ids);
    if (ids == NULL)
        return cfg_problem("out of memory");
    const char *p = value;
    while (*p) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            break;
        if (!isdigit((unsigned char)*p)) {
            free(ids);
            return cfg_problem("must be a list of member ids such as 0, 1, 2");
        }
        char *end;
        errno = 0;
        unsigned long id = strtoul(p, &end, 10);
        if (errno != 0 || id > UINT32_MAX ||
            (*end && *end != ',' && !isspace((unsigned char)*end))) {
            free(ids);
            return cfg_problem("must be a list of member ids such as 0, 1, 2");
        }
        if (id >= SPINDLE_MAX_MEMBERS) {
            free(ids);
            return cfg_problem("member id %lu is out of range: ids are 0..%u (at most %u members)",
                               id, SPINDLE_MAX_MEMBERS - 1, SPINDLE_MAX_MEMBERS);
        }
        for (size_t i = 0; i < n; i++)
            if (ids[i] == id) {
                free(ids);
                return cfg_problem("lists member %lu twice", id);
            }
        ids[n++] = (uint32_t)id;
        p = end;
    }
    if (n == 0) {
        free(ids);
        return cfg_problem("must list at least one member id");
    }
    *out = ids;
    *count = (uint32_t)n;
    return 0;
}

static int cfg_apply_group(struct cfg_owner *o, const char *key, const char *value)
{
    uint64_t n = 0;
    if (strcmp(key, "name") == 0)
        return cfg_string(&o->name, value);
    if (strcmp(key, "transport") == 0) {
        if (strcmp(value, "shm") != 0 && strcmp(value, "fabric") != 0 &&
            strcmp(value, "verbs") != 0)
            return cfg_problem("must be shm, fabric or verbs");
        return cfg_string(&o->transport, value);
    }
    if (strcmp(key, "provider") == 0)
        return cfg_string(&o->provider, value);
    if (strcmp(key, "device") == 0)
        return cfg_string(&o->device, value);
    if (strcmp(key, "failure_timeout_ms") == 0) {
        if (cfg_uint(value, 1, 3600000, &n) != 0)
            return -1;
        o->pub.group.failure_timeout_ms = (int)n;
        return 0;
    }
    if (strcmp(key, "slow_member_ms") == 0) {
        if (cfg_uint(value, 0, 3600000, &n) != 0)
            return -1;
        o->pub.group.slow_member_ms = (int)n;
        return 0;
    }
    if (strcmp(key, "tie_breaker") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return cfg_problem("must be true or false");
        o->pub.group.tie_breaker = strcmp(value, "true") == 0;
        return 0;
    }
    if (strcmp(key, "log_level") == 0) {
        enum sp_log_level level;
        if (sp_log_parse_level(value, &level) != 0)
            return cfg_problem("must be error, warn, info or debug");
        return cfg_string(&o->log_level, value);
    }
    if (strcmp(key, "key_file") == 0) {
        /* Checked when the group reads it (mode, type, size). */
        if (value[0] == '\0')
            return cfg_problem("must name a key file (spindle-keygen FILE)");
        return cfg_string(&o->key_file, value);
    }
    if (strcmp(key, "accept_key_file") == 0) {
        if (value[0] == '\0')
            return cfg_problem("must name a key file (spindle-keygen FILE)");
        return cfg_string(&o->accept_key_file, value);
    }
    if (strcmp(key, "log_dir") == 0) {
        /* Checked when the group opens it (owner, mode, no link). */
        if (value[0] == '\0')
            return cfg_problem("must name this member's log directory");
        return cfg_string(&o->log_dir, value);
    }
    if (strcmp(key, "dispatch") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return cfg_problem("must be true or false");
        o->pub.group.dispatch = strcmp(value, "true") == 0;
        return 0;
    }
    if (strcmp(key, "dispatch_queue_bytes") == 0) {
        /* 0: the library's default; whether it holds the largest message
         * is checked when the group is created. */
        if (cfg_uint(value, 0, UINT64_C(1) << 40, &n) != 0)
            return -1;
        o->pub.group.dispatch_queue_bytes = n;
        return 0;
    }
    if (strcmp(key, "p2p_window") == 0) {
        /* Slots of each point-to-point ring (docs/P2P.md); 0: the default. */
        if (cfg_uint(value, 0, SPINDLE_P2P_MAX_WINDOW, &n) != 0)
            return -1;
        o->pub.group_p2p_window = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "own_inline") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return cfg_problem("must be true or false");
        o->pub.group_own_inline = strcmp(value, "true") == 0;
        return 0;
    }
    if (strcmp(key, "admin_dir") == 0) {
        /* Checked when the group opens it (owner, mode, no link). */
        if (value[0] == '\0')
            return cfg_problem("must name the administration socket's directory, or off");
        return cfg_string(&o->admin_dir, value);
    }
    return cfg_problem("unknown key in [group] (known: name, transport, provider, device, "
                       "failure_timeout_ms, slow_member_ms, tie_breaker, log_level, key_file, "
                       "accept_key_file, log_dir, dispatch, dispatch_queue_bytes, admin_dir, "
                       "p2p_window, own_inline)");
}

static int cfg_apply_member(struct cfg_member *m, const char *key, const char *value)
{
    uint64_t n = 0;
    if (strcmp(key, "host") == 0) {
        if (cfg_string(&m->host, value) != 0)
            return -1;
        m->pub.host = m->host;
        return 0;
    }
    if (strcmp(key, "port") == 0) {
        if (cfg_uint(value, 0, 65535, &n) != 0)
            return -1;
        m->pub.port = (uint16_t)n;
        return 0;
    }
    if (strcmp(key, "name") == 0) {
        if (sp_check_name(value, "the member") < 0)
            return cfg_problem("%s", spindle_errmsg());
        if (cfg_string(&m->name, value) != 0)
            return -1;
        m->pub.name = m->name;
        return 0;
    }
    return cfg_problem("unknown key in [member.%u] (known: host, port, name)", m->pub.id);
}

static int cfg_apply_subgroup(struct cfg_subgroup *s, const char *key, const char *value, int line)
{
    uint64_t n = 0;
    if (strcmp(key, "members") == 0 || strcmp(key, "senders") == 0) {
        int is_members = key[0] == 'm';
        uint32_t *ids = NULL, count = 0;
        if (cfg_id_list(value, &ids, &count) != 0)
            return -1;
        free(is_members ? s->members : s->senders);
        if (is_members) {
            s->members = ids;
            s->pub.members = ids;
            s->pub.num_members = count;
            s->members_line = line;
        } else {
            s->senders = ids;
            s->pub.senders = ids;
            s->pub.num_senders = count;
            s->senders_line = line;
        }
        return 0;
    }
    if (strcmp(key, "window_size") == 0) {
        if (cfg_uint(value, 1, SPINDLE_MAX_WINDOW, &n) != 0)
            return -1;
        s->pub.window_size = (uint32_t)n;
        s->window_line = line;
        return 0;
    }
    if (strcmp(key, "max_payload") == 0) {
        if (cfg_uint(value, 1, SPINDLE_MAX_PAYLOAD, &n) != 0)
            return -1;
        s->pub.max_payload = (uint32_t)n;
        s->payload_line = line;
        return 0;
    }
    if (strcmp(key, "mode") == 0) {
        if (strcmp(value, "atomic") == 0)
            s->pub.mode = SPINDLE_MODE_ATOMIC;
        else if (strcmp(value, "unordered") == 0)
            s->pub.mode = SPINDLE_MODE_UNORDERED;
        else
            return cfg_problem("must be atomic or unordered");
        return 0;
    }
    if (strcmp(key, "logged") == 0) {
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return cfg_problem("must be true or false");
        s->pub.logged = strcmp(value, "true") == 0;
        return 0;
    }
    return cfg_problem("unknown key in [subgroup.%u] (known: members, senders, window_size, "
                       "max_payload, mode, logged)",
                       s->pub.index);
}

static int cfg_apply_bench(struct spindle_config *c, const char *key, const char *value)
{
    uint64_t n = 0;
    if (strcmp(key, "messages") == 0) {
        if (cfg_uint(value, 1, UINT64_MAX, &n) != 0)
            return -1;
        c->bench.messages = n;
        return 0;
    }
    if (strcmp(key, "message_size") == 0) {
        if (cfg_uint(value, 1, SPINDLE_MAX_PAYLOAD, &n) != 0)
            return -1;
        c->bench.message_size = (uint32_t)n;
        return 0;
    }
    if (strcmp(key, "duration_ms") == 0) {
        if (cfg_uint(value, 0, UINT32_MAX, &n) != 0)
            return -1;
        c->bench.duration_ms = (uint32_t)n;
        return 0;
    }
    return cfg_problem("unknown key in [bench] (known: messages, message_size, duration_ms)");
}

static void cfg_sync(struct cfg_owner *o)
{
    o->pub.path = o->path;
    o->pub.group.name = o->name;
    o->pub.group.transport = o->transport;
    o->pub.group.provider = o->provider;
    o->pub.group.device = o->device;
    o->pub.group.log_level = o->log_level;
    o->pub.group.key_file = o->key_file;
    o->pub.group.accept_key_file = o->accept_key_file;
    o->pub.group.log_dir = o->log_dir;
    o->pub.group.admin_dir = o->admin_dir;
}

int cfg_apply(struct spindle_config *config, const struct cfg_target *t, const char *key,
              const char *value, int line)
{
    struct cfg_owner *o = (struct cfg_owner *)config;
    int rc;
    switch (t->kind) {
    case CFG_GROUP:
        rc = cfg_apply_group(o, key, value);
        cfg_sync(o);
        return rc;
    case CFG_MEMBER:
        return cfg_apply_member(t->member, key, value);
    case CFG_SUBGROUP:
        return cfg_apply_subgroup(t->subgroup, key, value, line);
    default:
        return cfg_apply_bench(config, key, value);
    }
}

struct spindle_config *cfg_new(const char *path)
{
    struct cfg_owner *o = calloc(1, sizeof *o);
    if (o == NULL)
        return NULL;
    o->path = strdup(path);
    o->name = strdup("spindle");
    o->transport = strdup("shm");
    o->provider = strdup("tcp");
    o->log_level = strdup("warn");
    o->pub.group.failure_timeout_ms = 5000;
    o->pub.bench.messages = 100000;
    o->pub.bench.message_size = 64;
    cfg_sync(o);
    if (o->path == NULL || o->name == NULL || o->transport == NULL || o->provider == NULL ||
        o->log_level == NULL) {
        spindle_config_free(&o->pub);
        return NULL;
    }
    return &o->pub;
}

int cfg_attach(struct spindle_config *config, struct cfg_member *members,
               struct cfg_subgroup *subgroups)
{
    struct cfg_owner *o = (struct cfg_owner *)config;
    o->members = members;
    o->subgroups = subgroups;
    uint32_t nm = config->num_members, ns = config->num_subgroups;
    o->pub_members = calloc(nm + 1, sizeof *o->pub_members);
    o->pub_subgroups = calloc(ns + 1, sizeof *o->pub_subgroups);
    if (o->pub_members == NULL || o->pub_subgroups == NULL)
        return -1;
    for (uint32_t i = 0; i < nm; i++)
        o->pub_members[i] = members[i].pub;
    for (uint32_t i = 0; i < ns; i++)
        o->pub_subgroups[i] = subgroups[i].pub;
    config->members = o->pub_members;
    config->subgroups = o->pub_subgroups;
    return 0;
}

/* window_size slots of max_payload must fit one sender's ring, as the
 * library checks at group creation; the message names the later of the
 * two keys in the file. */
static int cfg_check_ring(const struct cfg_subgroup *s, const char *path, char *msg, size_t len)
{
    uint64_t slot = SPINDLE_SLOT_BYTES(s->pub.max_payload);
    if (slot * s->pub.window_size <= SPINDLE_MAX_RING_BYTES)
        return 0;
    bool payload_later = s->payload_line >= s->window_line;
    int line = payload_later ? s->payload_line : s->window_line;
    char where[300];
    snprintf(where, sizeof where, "%s:%d", path, line);
    snprintf(msg, len,
             "%s: %s = %u: window_size %u x slot %llu bytes (max_payload %u) exceeds the ring "
             "limit of %u bytes",
             line ? where : path, payload_later ? "max_payload" : "window_size",
             payload_later ? s->pub.max_payload : s->pub.window_size, s->pub.window_size,
             (unsigned long long)slot, s->pub.max_payload, SPINDLE_MAX_RING_BYTES);
    return -1;
}

static int cfg_check_subgroup(struct cfg_subgroup *s, const char *path,
                              const struct cfg_member *members, uint32_t nm, char *msg, size_t len)
{
    char where[300];
    if (cfg_check_ring(s, path, msg, len) != 0)
        return -1;
    if (s->pub.logged && s->pub.mode != SPINDLE_MODE_ATOMIC) {
        snprintf(msg, len,
                 "%s: [subgroup.%u]: logged = true needs mode = atomic (an unordered subgroup's "
                 "members deliver in no order they share, so their logs could not agree)",
                 path, s->pub.index);
        return -1;
    }
    if (s->members == NULL) {
        snprintf(msg, len, "%s: [subgroup.%u]: members is required", path, s->pub.index);
        return -1;
    }
    for (uint32_t i = 0; i < s->pub.num_members; i++) {
        int found = 0;
        for (uint32_t j = 0; j < nm; j++)
            found |= members[j].pub.id == s->members[i];
        if (!found) {
            snprintf(where, sizeof where, "%s:%d", path, s->members_line);
            snprintf(msg, len, "%s: members: member %u is not defined (no [member.%u] section)",
                     s->members_line ? where : path, s->members[i], s->members[i]);
            return -1;
        }
    }
    if (s->senders == NULL) {
        s->senders = malloc((s->pub.num_members > 0 ? s->pub.num_members : 1) * sizeof *s->senders);
        if (s->senders == NULL) {
            snprintf(msg, len, "%s: out of memory", path);
            return -1;
        }
        memcpy(s->senders, s->members, s->pub.num_members * sizeof *s->senders);
        s->pub.senders = s->senders;
        s->pub.num_senders = s->pub.num_members;
    }
    for (uint32_t i = 0; i < s->pub.num_senders; i++) {
        int found = 0;
        for (uint32_t j = 0; j < s->pub.num_members; j++)
            found |= s->members[j] == s->senders[i];
        if (!found) {
            snprintf(where, sizeof where, "%s:%d", path, s->senders_line);
            snprintf(msg, len, "%s: senders: sender %u is not a member of subgroup %u",
                     s->senders_line ? where : path, s->senders[i], s->pub.index);
            return -1;
        }
    }
    return 0;
}

int cfg_validate(struct spindle_config *config, const char *path, struct cfg_member *members,
                 struct cfg_subgroup *subgroups, char *message, size_t len)
{
    for (uint32_t i = 0; i < config->num_members; i++) {
        if (members[i].host == NULL) {
            members[i].host = strdup("127.0.0.1");
            if (members[i].host == NULL) {
                snprintf(message, len, "%s: out of memory", path);
                return -1;
            }
            members[i].pub.host = members[i].host;
        }
        /* Names identify members across restarts: two members with one
         * name would take each other's place at every join. */
        for (uint32_t j = 0; j < i && members[i].name != NULL; j++)
            if (members[j].name != NULL && strcmp(members[j].name, members[i].name) == 0) {
                snprintf(message, len, "%s: [member.%u] and [member.%u] both have name %s", path,
                         members[j].pub.id, members[i].pub.id, members[i].name);
                return -1;
            }
    }
    for (uint32_t i = 0; i < config->num_subgroups; i++)
        if (cfg_check_subgroup(&subgroups[i], path, members, config->num_members, message, len) !=
            0)
            return -1;
    return 0;
}

void spindle_config_free(struct spindle_config *config)
{
    if (config == NULL)
        return;
    struct cfg_owner *o = (struct cfg_owner *)config;
    for (uint32_t i = 0; o->members != NULL && i < config->num_members; i++) {
        free(o->members[i].host);
        free(o->members[i].name);
    }
    for (uint32_t i = 0; o->subgroups != NULL && i < config->num_subgroups; i++) {
        free(o->subgroups[i].members);
        free(o->subgroups[i].senders);
    }
    free(o->members);
    free(o->subgroups);
    free(o->pub_members);
    free(o->pub_subgroups);
    free(o->path);
    free(o->name);
    free(o->transport);
    free(o->provider);
    free(o->device);
    free(o->log_level);
    free(o->key_file);
    free(o->accept_key_file);
    free(o->log_dir);
    free(o->admin_dir);
    free(o);
}
