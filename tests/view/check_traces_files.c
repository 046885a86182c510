/*
 * check_traces: finding the processes of a run in its trace directory,
 * reading their traces and .end files, and deciding what each one was
 * (the file formats are in check_traces.c's header comment).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_traces.h"

struct checker g;

_Noreturn void fail_at(const char *path, uint32_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("check_traces: FAIL: %s", path);
    if (line > 0)
        printf(":%u", line);
    fputs(": ", stdout);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    fflush(stdout);
    exit(1);
}

bool parse_u64_token(const char *text, int base, uint64_t *out)
{
    if (*text == '\0' || *text == '-' || *text == '+')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, base);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

const char *process_name(const struct member *m)
{
    /* A few at once in one message. */
    static char names[4][48];
    static unsigned next;
    char *name = names[next++ % 4];
    if (m->named)
        snprintf(name, sizeof names[0], "member-%u.%" PRIu64, m->id, m->incarnation);
    else
        snprintf(name, sizeof names[0], "member-%u", m->id);
    return name;
}

uint64_t process_start(const struct member *m)
{
    return m->joiner ? m->joined_view : 0;
}

/* A decimal number of len characters at text, without sign or leading
 * zero (so that one process has one name). */
static bool parse_decimal(const char *text, size_t len, uint64_t *out)
{
    char digits[24];
    if (len == 0 || len >= sizeof digits || (text[0] == '0' && len > 1))
        return false;
    for (size_t i = 0; i < len; i++)
        if (text[i] < '0' || text[i] > '9')
            return false;
    memcpy(digits, text, len);
    digits[len] = '\0';
    return parse_u64_token(digits, 10, out);
}

/* "member-<id>.<trace|end>" or "member-<id>.<view>.<trace|end>"; false for
 * any other name (.pid files, the joiners' joining-<pid>.trace, ...). */
static bool parse_file_name(const char *name, uint32_t *id, bool *named, uint64_t *incarnation,
                            bool *is_end)
{
    if (strncmp(name, "member-", 7) != 0)
        return false;
    const char *p = name + 7, *dot = strchr(p, '.');
    uint64_t value;
    if (dot == NULL || !parse_decimal(p, (size_t)(dot - p), &value) || value >= MAX_MEMBERS)
        return false;
    *id = (uint32_t)value;
    const char *rest = dot + 1, *second = strchr(rest, '.');
    *named = second != NULL;
    *incarnation = 0;
    if (*named) {
        if (!parse_decimal(rest, (size_t)(second - rest), incarnation))
            return false;
        rest = second + 1;
    }
    if (strcmp(rest, "trace") != 0 && strcmp(rest, "end") != 0)
        return false;
    *is_end = strcmp(rest, "end") == 0;
    return true;
}

static struct member *find_process(uint32_t id, bool named, uint64_t incarnation)
{
    for (size_t i = 0; i < g.count; i++) {
        struct member *m = &g.member[i];
        if (m->id == id && m->named == named && (!named || m->incarnation == incarnation))
            return m;
    }
    return NULL;
}

static struct member *add_process(uint32_t id, bool named, uint64_t incarnation)
{
    if (g.count == MAX_PROCESSES)
        fail_at(g.dir, 0, "more than %d processes", MAX_PROCESSES);
    if (g.count % 64 == 0) {
        struct member *grown = realloc(g.member, (g.count + 64) * sizeof *grown);
        if (grown == NULL)
            fail_at(g.dir, 0, "out of memory for %zu processes", g.count + 64);
        g.member = grown;
    }
    struct member *m = &g.member[g.count++];
    memset(m, 0, sizeof *m);
    m->id = id;
    m->named = named;
    m->incarnation = incarnation;
    if (named) {
        snprintf(m->trace_path, sizeof m->trace_path, "%s/member-%u.%" PRIu64 ".trace", g.dir, id,
                 incarnation);
        snprintf(m->end_path, sizeof m->end_path, "%s/member-%u.%" PRIu64 ".end", g.dir, id,
                 incarnation);
    } else {
        snprintf(m->trace_path, sizeof m->trace_path, "%s/member-%u.trace", g.dir, id);
        snprintf(m->end_path, sizeof m->end_path, "%s/member-%u.end", g.dir, id);
    }
    return m;
}

/* Every member-<id>[.<view>].{trace,end} in the directory. */
static void discover(void)
{
    DIR *dir = opendir(g.dir);
    if (dir == NULL)
        fail_at(g.dir, 0, "cannot open the directory (%s)", strerror(errno));
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        uint32_t id;
        bool named, is_end;
        uint64_t incarnation;
        if (!parse_file_name(entry->d_name, &id, &named, &incarnation, &is_end))
            continue;
        if (id >= g.members) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", g.dir, entry->d_name);
            closedir(dir);
            fail_at(path, 0, "member id %u out of range (--members %u: ids 0..%u)", id, g.members,
                    g.members - 1);
        }
        if (named && incarnation == 0) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", g.dir, entry->d_name);
            closedir(dir);
            fail_at(path, 0, "incarnation 0 is an initial member's, named member-%u.%s", id,
                    is_end ? "end" : "trace");
        }
        struct member *m = find_process(id, named, incarnation);
        if (m == NULL)
            m = add_process(id, named, incarnation);
        if (is_end)
            m->has_end = true;
        else
            m->has_trace = true;
    }
    closedir(dir);
}

/* The id's last incarnation: the named one of the latest view, else the
 * initial member's. NULL when the id has no files. */
static struct member *last_incarnation(uint32_t id)
{
    struct member *last = NULL;
    for (size_t i = 0; i < g.count; i++) {
        struct member *m = &g.member[i];
        if (m->id == id &&
            (last == NULL || (m->named && (!last->named || m->incarnation > last->incarnation))))
            last = m;
    }
    return last;
}

/* --killed: an entry without a view is the id's last incarnation; one the
 * directory has no file of was killed before it wrote any. */
static void apply_killed(void)
{
    for (size_t k = 0; k < g.num_killed; k++) {
        const struct killed_entry *e = &g.killed[k];
        struct member *m =
            e->named ? find_process(e->id, true, e->incarnation) : last_incarnation(e->id);
        if (m == NULL)
            m = add_process(e->id, e->named, e->incarnation);
        m->killed = true;
    }
}

/* By id, then (once classified) by the view each joined in, then by name. */
static int cmp_process(const void *pa, const void *pb)
{
    const struct member *a = pa, *b = pb;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    if (process_start(a) != process_start(b))
        return process_start(a) < process_start(b) ? -1 : 1;
    if (a->named != b->named)
        return a->named ? 1 : -1;
    return a->incarnation < b->incarnation ? -1 : a->incarnation > b->incarnation;
}

static void append_record(struct member *m, const struct record *r)
{
    if (m->count == m->capacity) {
        size_t cap = m->capacity ? m->capacity * 2 : 1024;
        struct record *grown = realloc(m->records, cap * sizeof *grown);
        if (grown == NULL)
            fail_at(m->trace_path, 0, "out of memory for %zu records", cap);
        m->records = grown;
        m->capacity = cap;
    }
    m->records[m->count++] = *r;
}

/* Parses "<view> <subgroup> <sender> <index> <length> <crc-hex8>". */
static bool parse_record(char *text, struct record *r)
{
    char *fields[7];
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(text, " \t", &save); tok != NULL && n < 7;
         tok = strtok_r(NULL, " \t", &save))
        fields[n++] = tok;
    if (n != 6 || strlen(fields[5]) != 8)
        return false;
    uint64_t v[6];
    for (int i = 0; i < 6; i++)
        if (!parse_u64_token(fields[i], i == 5 ? 16 : 10, &v[i]))
            return false;
    if (v[1] > UINT32_MAX || v[2] > UINT32_MAX || v[4] > UINT32_MAX)
        return false;
    r->view = v[0];
    r->subgroup = (uint32_t)v[1];
    r->sender = (uint32_t)v[2];
    r->index = v[3];
    r->length = (uint32_t)v[4];
    r->crc = (uint32_t)v[5];
    return true;
}

/* Reads a trace. A last line without a newline is a write cut short by a
 * kill: ignored for killed members, an error for anyone else. */
static void load_trace(struct member *m)
{
    FILE *f = fopen(m->trace_path, "r");
    if (f == NULL) {
        if (m->killed && errno == ENOENT)
            return; /* killed before it opened its trace: delivered nothing */
        fail_at(m->trace_path, 0, "missing: cannot open (%s)", strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint32_t number = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        number++;
        if (line[len - 1] != '\n') {
            if (m->killed)
                break;
            fail_at(m->trace_path, number, "truncated last line '%s' (no newline)", line);
        }
        line[len - 1] = '\0';
        char copy[256];
        snprintf(copy, sizeof copy, "%s", line);
        struct record r;
        if (!parse_record(line, &r))
            fail_at(m->trace_path, number,
                    "malformed line '%s' (want: view subgroup sender index length crc-hex8)", copy);
        r.line = number;
        append_record(m, &r);
    }
    free(line);
    fclose(f);
}

static void parse_end_members(struct member *m, char *list)
{
    m->final_members = calloc(g.members, sizeof *m->final_members);
    if (m->final_members == NULL)
        fail_at(m->end_path, 0, "out of memory");
    char *item_save = NULL;
    for (char *item = strtok_r(list, ",", &item_save); item != NULL;
         item = strtok_r(NULL, ",", &item_save)) {
        uint64_t id;
        if (!parse_u64_token(item, 10, &id) || id >= g.members || m->num_final == g.members)
            fail_at(m->end_path, 1, "bad member id '%s' (members are 0..%u)", item, g.members - 1);
        m->final_members[m->num_final++] = (uint32_t)id;
    }
}

/* Reads "view <id> members <id,id,...> [joined <view>] [left]". */
static void load_end(struct member *m)
{
    FILE *f = fopen(m->end_path, "r");
    if (f == NULL) {
        if (errno != ENOENT)
            fail_at(m->end_path, 0, "cannot open (%s)", strerror(errno));
        m->has_end = false;
        return;
    }
    char text[8192] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *save = NULL;
    char *word = strtok_r(text, " \t\n", &save);
    char *view = strtok_r(NULL, " \t\n", &save);
    char *members_word = strtok_r(NULL, " \t\n", &save);
    char *list = strtok_r(NULL, " \t\n", &save);
    char *next = strtok_r(NULL, " \t\n", &save);
    bool ok = word != NULL && strcmp(word, "view") == 0 && view != NULL &&
              parse_u64_token(view, 10, &m->final_view) && members_word != NULL &&
              strcmp(members_word, "members") == 0 && list != NULL;
    if (ok && next != NULL && strcmp(next, "joined") == 0) {
        char *joined = strtok_r(NULL, " \t\n", &save);
        m->end_says_joined = true;
        ok = joined != NULL && parse_u64_token(joined, 10, &m->end_joined) &&
             m->end_joined <= m->final_view;
        next = strtok_r(NULL, " \t\n", &save);
    }
    if (ok && next != NULL && strcmp(next, "left") == 0) {
        m->left = true;
        next = strtok_r(NULL, " \t\n", &save);
    }
    if (!ok || next != NULL)
        fail_at(m->end_path, 1,
                "malformed (want: view <id> members <id,id,...> [joined <view id>] [left])");
    parse_end_members(m, list);
    m->has_end = true;
}

/* Survivors, members that left, killed members, and nobody else; which
 * processes joined, and when. */
static void classify(struct member *m)
{
    if (m->killed && m->has_end)
        printf("check_traces: note: %s was killed after writing %s; checked as killed\n",
               process_name(m), m->end_path);
    if (m->killed)
        m->left = false;
    m->survivor = m->has_end && !m->killed && !m->left;
    if (!m->has_end && !m->killed)
        fail_at(m->end_path, 0, "missing: member %u was not killed but did not finish%s", m->id,
                m->named ? " (its incarnation's .end)" : "");
    if (m->named) {
        /* Its name says when it joined; the .end must agree. */
        if (m->has_end && !m->end_says_joined)
            fail_at(m->end_path, 1,
                    "mixed up: %s is named for a joiner of view %" PRIu64
                    ", but its .end does not say joined",
                    process_name(m), m->incarnation);
        if (m->end_says_joined && m->end_joined != m->incarnation)
            fail_at(m->end_path, 1,
                    "mixed up: %s says joined %" PRIu64 ", but its name says incarnation %" PRIu64,
                    process_name(m), m->end_joined, m->incarnation);
        m->joiner = true;
        m->joined_view = m->incarnation;
    } else if (m->end_says_joined) {
        m->joiner = true; /* an unnamed joiner's files (older spindle-bench) */
        m->joined_view = m->end_joined;
    } else if (m->killed && m->id >= g.initial && m->count > 0) {
        /* A joiner killed before it could say when it joined. */
        m->joiner = true;
        m->joined_view = m->records[0].view;
    }
}

void load_processes(void)
{
    discover();
    apply_killed();
    qsort(g.member, g.count, sizeof *g.member, cmp_process);
    /* An id nobody wrote a file for must have been killed before it could. */
    for (uint32_t id = 0; id < g.members; id++)
        if (last_incarnation(id) == NULL) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/member-%u.end", g.dir, id);
            fail_at(path, 0, "missing: member %u was not killed but did not finish", id);
        }
    for (size_t i = 0; i < g.count; i++) {
        struct member *m = &g.member[i];
        if (m->has_trace || !m->killed)
            load_trace(m);
        if (m->has_end)
            load_end(m);
    }
    for (size_t i = 0; i < g.count; i++)
        classify(&g.member[i]);
    /* The incarnations of an id in the order they joined. */
    qsort(g.member, g.count, sizeof *g.member, cmp_process);
}
