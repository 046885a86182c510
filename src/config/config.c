/*
 * INI configuration loader (inih). Parses into a growing internal copy,
 * applies SPINDLE_<SECTION>_<KEY> environment overrides, validates cross
 * references, and reports the first problem as "file:line: key = value:
 * what is wrong". inih does not pass line numbers to handlers in the
 * packaged build, so the line reader counts them.
 *
 * Not thread-safe while loading (getenv); the result is immutable.
 */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/config.h>
#include <spindle/group.h> /* SPINDLE_MAX_SUBGROUPS, SPINDLE_MAX_MEMBERS */

#include "config/config_env.h"
#include "config/config_keys.h"
#include "util/error.h"

struct cfg_load {
    const char *path;
    FILE *file;
    int line;
    int too_long_line;
    int failed;
    char message[512];
    struct spindle_config *config;
    struct cfg_member *members;
    struct cfg_subgroup *subgroups;
    uint32_t cap_members, cap_subgroups;
    /* [group] and [bench] keys set in the file (members' and subgroups'
     * are in their cfg_member and cfg_subgroup), for duplicates */
    struct cfg_key_lines group_keys, bench_keys;
};

static void cfg_fail(struct cfg_load *st, const char *where, const char *key, const char *value,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void cfg_fail(struct cfg_load *st, const char *where, const char *key, const char *value,
                     const char *fmt, ...)
{
    if (st->failed)
        return;
    st->failed = 1;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (key != NULL)
        snprintf(st->message, sizeof st->message, "%s: %s = %s: %s", where, key, value, what);
    else
        snprintf(st->message, sizeof st->message, "%s: %s", where, what);
}

static void cfg_section_line(struct cfg_load *st, const char *line);

static char *cfg_reader(char *str, int num, void *stream)
{
    struct cfg_load *st = stream;
    if (fgets(str, num, st->file) == NULL)
        return NULL;
    st->line++;
    size_t len = strlen(str);
    if (len == (size_t)num - 1 && str[len - 1] != '\n' && !feof(st->file)) {
        if (!st->too_long_line)
            st->too_long_line = st->line;
        int c;
        while ((c = fgetc(st->file)) != EOF && c != '\n') {
        }
        str[0] = '\0'; /* parsed as an empty line; reported after parsing */
    }
    cfg_section_line(st, str);
    return str;
}

/* Parses "member.12" style names; returns 0 and *id on success. */
static int cfg_section_id(const char *section, const char *prefix, uint32_t *id)
{
    size_t plen = strlen(prefix);
    if (strncmp(section, prefix, plen) != 0 || section[plen] != '.' ||
        !isdigit((unsigned char)section[plen + 1]))
        return -1;
    char *end;
    errno = 0;
    unsigned long value = strtoul(section + plen + 1, &end, 10);
    if (*end != '\0' || errno != 0 || value > UINT32_MAX)
        return -1;
    *id = (uint32_t)value;
    return 0;
}

static struct cfg_member *cfg_member_get(struct cfg_load *st, uint32_t id)
{
    for (uint32_t i = 0; i < st->config->num_members; i++)
        if (st->members[i].pub.id == id)
            return &st->members[i];
    if (st->config->num_members == st->cap_members) {
        uint32_t cap = st->cap_members ? st->cap_members * 2 : 8;
        struct cfg_member *grown = realloc(st->members, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        st->members = grown;
        st->cap_members = cap;
    }
    struct cfg_member *m = &st->members[st->config->num_members++];
    memset(m, 0, sizeof *m);
    m->pub.id = id;
    return m;
}

static struct cfg_subgroup *cfg_subgroup_get(struct cfg_load *st, uint32_t index)
{
    for (uint32_t i = 0; i < st->config->num_subgroups; i++)
        if (st->subgroups[i].pub.index == index)
            return &st->subgroups[i];
    if (st->config->num_subgroups == st->cap_subgroups) {
        uint32_t cap = st->cap_subgroups ? st->cap_subgroups * 2 : 4;
        struct cfg_subgroup *grown = realloc(st->subgroups, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        st->subgroups = grown;
        st->cap_subgroups = cap;
    }
    struct cfg_subgroup *s = &st->subgroups[st->config->num_subgroups++];
    memset(s, 0, sizeof *s);
    s->pub.index = index;
    s->pub.window_size = 100;
    s->pub.max_payload = 1024;
    s->pub.mode = SPINDLE_MODE_ATOMIC;
    return s;
}

/* [member.N] and [subgroup.N]: N is below the library's limit, so that
 * the number of such sections is too. */
static int cfg_out_of_range(struct cfg_load *st, const char *where, const char *section,
                            const char *what, uint32_t limit)
{
    cfg_fail(st, where, NULL, NULL, "[%s]: %s ids are 0..%u (at most %u %ss)", section, what,
             limit - 1, limit, what);
    return -1;
}

/* Resolves a section name to its target; NULL target and a message when
 * the section is unknown. */
static int cfg_resolve(struct cfg_load *st, const char *section, struct cfg_target *t,
                       const char *where)
{
    memset(t, 0, sizeof *t);
    uint32_t id;
    if (strcmp(section, "group") == 0) {
        t->kind = CFG_GROUP;
    } else if (strcmp(section, "bench") == 0) {
        t->kind = CFG_BENCH;
    } else if (cfg_section_id(section, "member", &id) == 0) {
        if (id >= SPINDLE_MAX_MEMBERS)
            return cfg_out_of_range(st, where, section, "member", SPINDLE_MAX_MEMBERS);
        t->kind = CFG_MEMBER;
        t->member = cfg_member_get(st, id);
    } else if (cfg_section_id(section, "subgroup", &id) == 0) {
        if (id >= SPINDLE_MAX_SUBGROUPS)
            return cfg_out_of_range(st, where, section, "subgroup", SPINDLE_MAX_SUBGROUPS);
        t->kind = CFG_SUBGROUP;
        t->subgroup = cfg_subgroup_get(st, id);
    } else {
        cfg_fail(st, where, NULL, NULL,
                 "unknown section [%s] (expected group, member.N, subgroup.N or bench)", section);
        return -1;
    }
    if ((t->kind == CFG_MEMBER && t->member == NULL) ||
        (t->kind == CFG_SUBGROUP && t->subgroup == NULL)) {
        cfg_fail(st, where, NULL, NULL, "out of memory");
        return -1;
    }
    return 0;
}

/* inih calls handlers only for keys, so a section header is registered
 * here: an empty [member.N] still defines member N. */
static void cfg_section_line(struct cfg_load *st, const char *line)
{
    while (isspace((unsigned char)*line))
        line++;
    const char *end = strchr(line, ']');
    if (*line != '[' || end == NULL || st->failed)
        return;
    char section[64];
    size_t len = (size_t)(end - line - 1);
    if (len >= sizeof section)
        len = sizeof section - 1;
    memcpy(section, line + 1, len);
    section[len] = '\0';
    char where[300];
    snprintf(where, sizeof where, "%s:%d", st->path, st->line);
    struct cfg_target t;
    cfg_resolve(st, section, &t, where);
}

/* "SPINDLE_" + section ('.' -> '_') + "_" + key, uppercased. */
static void cfg_env_name(const char *section, const char *key, char *out, size_t len)
{
    snprintf(out, len, "SPINDLE_%s_%s", section, key);
    for (char *p = out; *p; p++)
        *p = (char)(*p == '.' ? '_' : toupper((unsigned char)*p));
}

static int cfg_handler(void *user, const char *section, const char *name, const char *value)
{
    struct cfg_load *st = user;
    if (st->failed)
        return 0;
    char where[300];
    snprintf(where, sizeof where, "%s:%d", st->path, st->line);
    struct cfg_target t;
    if (cfg_resolve(st, section, &t, where) != 0)
        return 0;
    int index = cfg_key_index(t.kind, name);
    if (index >= 0) { /* an unknown key fails in cfg_apply */
        struct cfg_key_lines *keys = t.kind == CFG_GROUP    ? &st->group_keys
                                     : t.kind == CFG_BENCH  ? &st->bench_keys
                                     : t.kind == CFG_MEMBER ? &t.member->keys
                                                            : &t.subgroup->keys;
        if (keys->line[index] != 0) {
            cfg_fail(st, where, name, value, "duplicate key in [%s] (first set on line %d)",
                     section, keys->line[index]);
            return 0;
        }
        keys->line[index] = st->line;
    }
    char env[160];
    cfg_env_name(section, name, env, sizeof env);
    if (cfg_key_known(t.kind, name) && cfg_env_get(env) != NULL)
        return 1; /* the environment wins; applied after parsing */
    return cfg_apply(st->config, &t, name, value, st->line) == 0
               ? 1
               : (cfg_fail(st, where, name, value, "%s", cfg_last_problem()), 0);
}

/* Applies environment overrides to every section the file defined. */
static void cfg_apply_env(struct cfg_load *st)
{
    char section[48];
    uint32_t nm = st->config->num_members, ns = st->config->num_subgroups;
    for (uint32_t s = 0; s < 2 + nm + ns && !st->failed; s++) {
        struct cfg_target t = {0};
        if (s == 0) {
            snprintf(section, sizeof section, "group");
            t.kind = CFG_GROUP;
        } else if (s == 1) {
            snprintf(section, sizeof section, "bench");
            t.kind = CFG_BENCH;
        } else if (s < 2 + nm) {
            t.kind = CFG_MEMBER;
            t.member = &st->members[s - 2];
            snprintf(section, sizeof section, "member.%u", t.member->pub.id);
        } else {
            t.kind = CFG_SUBGROUP;
            t.subgroup = &st->subgroups[s - 2 - nm];
            snprintf(section, sizeof section, "subgroup.%u", t.subgroup->pub.index);
        }
        for (const char *const *key = cfg_keys(t.kind); *key != NULL && !st->failed; key++) {
            char env[160];
            cfg_env_name(section, *key, env, sizeof env);
            const char *value = cfg_env_get(env);
            if (value == NULL)
                continue;
            if (cfg_apply(st->config, &t, *key, value, 0) != 0) {
                char where[200];
                snprintf(where, sizeof where, "%s (environment)", env);
                cfg_fail(st, where, *key, value, "%s", cfg_last_problem());
            }
        }
    }
}

static int cfg_by_member_id(const void *a, const void *b)
{
    uint32_t x = ((const struct cfg_member *)a)->pub.id;
    uint32_t y = ((const struct cfg_member *)b)->pub.id;
    return (x > y) - (x < y);
}

static int cfg_by_subgroup_index(const void *a, const void *b)
{
    uint32_t x = ((const struct cfg_subgroup *)a)->pub.index;
    uint32_t y = ((const struct cfg_subgroup *)b)->pub.index;
    return (x > y) - (x < y);
}

static int cfg_parse(struct cfg_load *st)
{
    int rc = ini_parse_stream(cfg_reader, st, cfg_handler, st);
    if (!st->failed && st->too_long_line) {
        char where[300];
        snprintf(where, sizeof where, "%s:%d", st->path, st->too_long_line);
        cfg_fail(st, where, NULL, NULL, "line is too long (limit %d characters)", INI_MAX_LINE - 2);
    }
    if (!st->failed && rc > 0) {
        char where[300];
        snprintf(where, sizeof where, "%s:%d", st->path, rc);
        cfg_fail(st, where, NULL, NULL, "syntax error (expected [section] or key = value)");
    }
    if (!st->failed)
        cfg_apply_env(st);
    if (st->failed)
        return sp_error(SPINDLE_ECONFIG, "%s", st->message);
    /* A file without members or subgroups leaves the arrays NULL, and qsort
     * takes no NULL even for 0 elements (found by tests/fuzz/fuzz_config). */
    if (st->members != NULL)
        qsort(st->members, st->config->num_members, sizeof *st->members, cfg_by_member_id);
    if (st->subgroups != NULL)
        qsort(st->subgroups, st->config->num_subgroups, sizeof *st->subgroups,
              cfg_by_subgroup_index);
    int vrc = cfg_validate(st->config, st->path, st->members, st->subgroups, st->message,
                           sizeof st->message);
    if (vrc != 0)
        return sp_error(SPINDLE_ECONFIG, "%s", st->message);
    return 0;
}

int cfg_load_stream(FILE *file, const char *path, struct spindle_config **out)
{
    struct cfg_load st = {.path = path, .file = file};
    st.config = cfg_new(path);
    if (st.config == NULL)
        return sp_error(SPINDLE_ENOMEM, "out of memory loading %s", path);
    int rc = cfg_parse(&st);
    if (cfg_attach(st.config, st.members, st.subgroups) != 0 && rc == 0)
        rc = sp_error(SPINDLE_ENOMEM, "out of memory loading %s", path);
    if (rc != 0) {
        spindle_config_free(st.config);
        return rc;
    }
    *out = st.config;
    return 0;
}

int spindle_config_load(const char *path, struct spindle_config **out)
{
    if (path == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_config_load: null argument");
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return sp_error(SPINDLE_ENOENT, "cannot open configuration file %s: %s", path,
                        strerror(errno));
    int rc = cfg_load_stream(file, path, out);
    fclose(file);
    return rc;
}

const struct spindle_config_member *spindle_config_member(const struct spindle_config *config,
                                                          uint32_t id)
{
    if (config == NULL)
        return NULL;
    for (uint32_t i = 0; i < config->num_members; i++)
        if (config->members[i].id == id)
            return &config->members[i];
    return NULL;
}
