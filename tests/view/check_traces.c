/*
 * check_traces: verifies the delivery traces that spindle-bench --trace
 * writes against the virtual-synchrony guarantees, after members were
 * killed (or cut off) part-way through a run.
 *
 *   check_traces DIR --messages M --members N [--killed LIST] [--subgroups K]
 *                [--msg-size S] [--initial I]
 *
 * Input (in DIR, for every member id 0..N-1):
 *   member-<id>.trace  one line per delivered message:
 *                      <view_id> <subgroup> <sender> <app_index> <length> <crc32c-hex8>
 *   member-<id>.end    written by a member that finished:
 *                      view <final_view_id> members <id,id,...> [joined <view_id>]
 *                      ("joined V": the member joined the running group in view V)
 * Members with an .end file (and not listed in --killed) are the survivors;
 * members in --killed were stopped from outside (their trace may end in a
 * partial line, which is ignored). Every other member is an error.
 *
 * What must hold (the first violation is reported as FILE:LINE: what, and
 * the exit status is 1; a usage error exits 2; success prints one "ok"
 * line and exits 0):
 *   - each line parses; view ids never decrease within a file; subgroup,
 *     sender and app_index are in range;
 *   - per file, per (subgroup, sender), app_index runs 0,1,2,... with no
 *     duplicate, reorder or gap, across views;
 *   - one (subgroup, sender, app_index) has one length and checksum in
 *     every file;
 *   - the survivors agree on the final view, whose members are exactly the
 *     survivors;
 *   - in every view, all survivors delivered identical sequences per
 *     subgroup (the virtual-synchrony guarantee: members that go on to the
 *     next view delivered the same messages in the same order);
 *   - every message 0..M-1 of a sender in the final view was delivered by
 *     every survivor, in every subgroup 0..K-1;
 *   - each message of a sender that left the group was delivered by all
 *     survivors or by none;
 *   - a killed member's trace, in each view it went past, equals the
 *     survivors' sequence, and in its last view is a prefix of it.
 * A member is taken to be in every view from the first view id in its
 * trace to its last (survivors: to its final view); a member that joined
 * is in every view from the one it joined. A joiner must deliver, per
 * (subgroup, sender), exactly the messages that an initial survivor
 * delivered in the views from its first one on: its first app_index is
 * the count that survivor delivered before (so nothing of its views is
 * missed and nothing of an earlier view is delivered to it). With
 * --initial I, members I..N-1 joined later: one that was killed (no .end
 * to say when it joined) is checked as a joiner of the first view in its
 * trace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MEMBERS   1024
#define MAX_SUBGROUPS 1024

struct record {
    uint64_t view;
    uint64_t index;
    uint32_t subgroup;
    uint32_t sender;
    uint32_t length;
    uint32_t crc;
    uint32_t line;
};

struct member {
    uint32_t id;
    char trace_path[PATH_MAX];
    char end_path[PATH_MAX];
    bool killed, survivor, has_end;
    struct record *records;
    size_t count, capacity;
    uint64_t first_view, last_view; /* views the member was in */
    uint64_t final_view;            /* from the .end file */
    bool joiner;                    /* .end says "joined <view>" */
    uint64_t joined_view;
    uint32_t final_members[MAX_MEMBERS];
    uint32_t num_final;
    uint64_t *next_index; /* [subgroup * members + sender]: next expected app_index */
};

/* What one (subgroup, sender, app_index) looked like where first seen. */
struct seen {
    uint32_t length, crc;
    uint32_t member, line; /* line 0: not seen yet */
};

struct checker {
    const char *dir;
    uint64_t messages;
    uint32_t members, subgroups;
    long long msg_size; /* -1: not checked */
    bool killed_list[MAX_MEMBERS];
    uint32_t initial; /* members from this id on joined later */
    struct member *member;
    struct seen *seen;
    uint64_t checked;
};

/* Global so that everything stays reachable when a failure exits. */
static struct checker g;

static _Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("check_traces: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nusage: check_traces DIR --messages M --members N [--killed ID,ID,...] "
          "[--subgroups K] [--msg-size S] [--initial I]\n",
          stderr);
    exit(2);
}

/* Reports the first violation as "FAIL: file:line: what" and exits 1. */
static _Noreturn void fail_at(const char *path, uint32_t line, const char *fmt, ...)
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

static bool parse_u64_token(const char *text, int base, uint64_t *out)
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

/* Reads "view <id> members <id,id,...>". */
static void load_end(struct member *m)
{
    FILE *f = fopen(m->end_path, "r");
    if (f == NULL) {
        if (errno != ENOENT)
            fail_at(m->end_path, 0, "cannot open (%s)", strerror(errno));
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
    char *joined_word = strtok_r(NULL, " \t\n", &save);
    char *joined = joined_word != NULL ? strtok_r(NULL, " \t\n", &save) : NULL;
    if (word == NULL || strcmp(word, "view") != 0 || view == NULL ||
        !parse_u64_token(view, 10, &m->final_view) || members_word == NULL ||
        strcmp(members_word, "members") != 0 || list == NULL ||
        (joined_word != NULL &&
         (strcmp(joined_word, "joined") != 0 || joined == NULL ||
          !parse_u64_token(joined, 10, &m->joined_view) || m->joined_view > m->final_view)) ||
        strtok_r(NULL, " \t\n", &save) != NULL)
        fail_at(m->end_path, 1,
                "malformed (want: view <id> members <id,id,...> [joined <view id>])");
    m->joiner = joined_word != NULL;
    char *item_save = NULL;
    for (char *item = strtok_r(list, ",", &item_save); item != NULL;
         item = strtok_r(NULL, ",", &item_save)) {
        uint64_t id;
        if (!parse_u64_token(item, 10, &id) || id >= g.members || m->num_final == MAX_MEMBERS)
            fail_at(m->end_path, 1, "bad member id '%s' (members are 0..%u)", item, g.members - 1);
        m->final_members[m->num_final++] = (uint32_t)id;
    }
    m->has_end = true;
}

static bool in_final_view(const struct member *m, uint32_t id)
{
    for (uint32_t i = 0; i < m->num_final; i++)
        if (m->final_members[i] == id)
            return true;
    return false;
}

static const struct record *find_index(const struct member *m, size_t from, size_t to,
                                       uint32_t subgroup, uint32_t sender, uint64_t index)
{
    for (size_t i = from; i < to; i++) {
        const struct record *r = &m->records[i];
        if (r->subgroup == subgroup && r->sender == sender && r->index == index)
            return r;
    }
    return NULL;
}

/* Range, view order, and app_index order (no duplicate, reorder or gap). */
static void check_record(struct member *m, size_t i)
{
    const struct record *r = &m->records[i];
    if (i > 0 && r->view < m->records[i - 1].view)
        fail_at(m->trace_path, r->line, "view id decreases: view %" PRIu64 " after view %" PRIu64,
                r->view, m->records[i - 1].view);
    if (m->survivor && r->view > m->final_view)
        fail_at(m->trace_path, r->line, "view %" PRIu64 " is after the final view %" PRIu64,
                r->view, m->final_view);
    if (r->subgroup >= g.subgroups)
        fail_at(m->trace_path, r->line, "subgroup %u out of range (subgroups 0..%u carry traffic)",
                r->subgroup, g.subgroups - 1);
    if (r->sender >= g.members)
        fail_at(m->trace_path, r->line, "sender %u out of range (members 0..%u)", r->sender,
                g.members - 1);
    if (r->index >= g.messages)
        fail_at(m->trace_path, r->line,
                "index %" PRIu64 " out of range (senders send %" PRIu64 " messages)", r->index,
                g.messages);
    if (g.msg_size >= 0 && r->length != (uint64_t)g.msg_size)
        fail_at(m->trace_path, r->line, "length %u, want %lld", r->length, g.msg_size);
    uint64_t *next = &m->next_index[(size_t)r->subgroup * g.members + r->sender];
    if (r->index < *next) {
        const struct record *first = find_index(m, 0, i, r->subgroup, r->sender, r->index);
        fail_at(m->trace_path, r->line,
                "duplicate: subgroup %u sender %u index %" PRIu64 " already delivered at line %u",
                r->subgroup, r->sender, r->index, first ? first->line : 0);
    }
    if (r->index > *next) {
        const struct record *later = find_index(m, i + 1, m->count, r->subgroup, r->sender, *next);
        if (later != NULL)
            fail_at(m->trace_path, r->line,
                    "reorder: subgroup %u sender %u index %" PRIu64
                    " delivered before index %" PRIu64 " (line %u)",
                    r->subgroup, r->sender, r->index, *next, later->line);
        fail_at(m->trace_path, r->line,
                "gap: subgroup %u sender %u index %" PRIu64 " delivered but index %" PRIu64
                " never was",
                r->subgroup, r->sender, r->index, *next);
    }
    *next = r->index + 1;
}

/* One (subgroup, sender, index) has one length and checksum everywhere. */
static void check_payload(const struct member *m, const struct record *r)
{
    struct seen *s = &g.seen[((size_t)r->subgroup * g.members + r->sender) * g.messages + r->index];
    if (s->line == 0) {
        *s = (struct seen){r->length, r->crc, m->id, r->line};
        return;
    }
    if (s->length != r->length || s->crc != r->crc)
        fail_at(m->trace_path, r->line,
                "payload differs: subgroup %u sender %u index %" PRIu64
                " has length %u crc %08x, but member-%u.trace line %u has length %u crc %08x",
                r->subgroup, r->sender, r->index, r->length, r->crc, s->member, s->line, s->length,
                s->crc);
}

/* An initial member (not a joiner) that survived: the reference for what
 * a joiner should have missed. */
static const struct member *initial_survivor(void)
{
    for (uint32_t id = 0; id < g.members; id++)
        if (g.member[id].survivor && !g.member[id].joiner)
            return &g.member[id];
    fail_at(g.dir, 0, "no member that was there from the start survived");
}

static void check_file(struct member *m)
{
    m->next_index = calloc((size_t)g.subgroups * g.members, sizeof *m->next_index);
    if (m->next_index == NULL)
        fail_at(m->trace_path, 0, "out of memory");
    if (m->joiner) {
        /* It starts, per subgroup and sender, where the group was when it
         * joined: after what the reference delivered in earlier views. */
        const struct member *ref = initial_survivor();
        for (size_t i = 0; i < ref->count; i++) {
            const struct record *r = &ref->records[i];
            if (r->view < m->joined_view)
                m->next_index[(size_t)r->subgroup * g.members + r->sender] = r->index + 1;
        }
        if (m->count > 0 && m->records[0].view < m->joined_view)
            fail_at(m->trace_path, m->records[0].line,
                    "delivered in view %" PRIu64 ", before it joined in view %" PRIu64,
                    m->records[0].view, m->joined_view);
    }
    for (size_t i = 0; i < m->count; i++) {
        check_record(m, i);
        check_payload(m, &m->records[i]);
    }
    if (m->count > 0) {
        m->first_view = m->records[0].view;
        m->last_view = m->records[m->count - 1].view;
    }
    if (m->survivor) {
        if (m->count == 0)
            m->first_view = m->final_view;
        m->last_view = m->final_view;
    }
    if (m->joiner)
        m->first_view = m->joined_view;
    g.checked += m->count;
}

/* Survivors, killed members, and nobody else. */
static void classify(void)
{
    for (uint32_t id = 0; id < g.members; id++) {
        struct member *m = &g.member[id];
        if (m->killed && m->has_end)
            printf("check_traces: note: member %u was killed after writing %s; "
                   "checked as killed\n",
                   id, m->end_path);
        m->survivor = m->has_end && !m->killed;
        if (!m->survivor && !m->killed)
            fail_at(m->end_path, 0, "missing: member %u was not killed but did not finish", id);
        if (!m->joiner && m->killed && id >= g.initial && m->count > 0) {
            /* A joiner killed before it could say when it joined. */
            m->joiner = true;
            m->joined_view = m->records[0].view;
        }
    }
}

/* The survivors agree on the final view, and it holds exactly them. */
static void check_final_views(void)
{
    const struct member *ref = NULL;
    for (uint32_t id = 0; id < g.members; id++) {
        const struct member *m = &g.member[id];
        if (!m->survivor)
            continue;
        if (ref == NULL) {
            ref = m;
            continue;
        }
        bool same = m->final_view == ref->final_view && m->num_final == ref->num_final;
        for (uint32_t i = 0; same && i < m->num_final; i++)
            same = in_final_view(ref, m->final_members[i]);
        if (!same)
            fail_at(m->end_path, 1, "final view disagrees with %s (view %" PRIu64 ")",
                    ref->end_path, ref->final_view);
    }
    if (ref == NULL)
        fail_at(g.dir, 0, "no survivors: no member-<id>.end from a member that was not killed");
    for (uint32_t id = 0; id < g.members; id++) {
        const struct member *m = &g.member[id];
        if (m->survivor != in_final_view(ref, id))
            fail_at(ref->end_path, 1, "final view %" PRIu64 " %s member %u, which %s",
                    ref->final_view, m->survivor ? "lacks" : "lists", id,
                    m->survivor ? "finished" : (m->killed ? "was killed" : "did not finish"));
    }
}

static const struct member *first_survivor(void)
{
    for (uint32_t id = 0; id < g.members; id++)
        if (g.member[id].survivor)
            return &g.member[id];
    fail_at(g.dir, 0, "no survivors");
}

/* Every message of a sender still in the final view reached every survivor;
 * each message of a sender that left reached all survivors or none. */
static void check_sender(uint32_t sg, uint32_t sender, bool stays)
{
    size_t slot = (size_t)sg * g.members + sender;
    const struct member *most = first_survivor(), *least = most;
    for (uint32_t id = 0; id < g.members; id++) {
        const struct member *m = &g.member[id];
        if (!m->survivor)
            continue;
        uint64_t got = m->next_index[slot];
        if (stays && got != g.messages)
            fail_at(m->trace_path, 0,
                    "missing: subgroup %u sender %u (in the final view) index %" PRIu64
                    " never delivered (want 0..%" PRIu64 ")",
                    sg, sender, got, g.messages - 1);
        if (got > most->next_index[slot])
            most = m;
        if (got < least->next_index[slot])
            least = m;
    }
    uint64_t low = least->next_index[slot];
    if (low != most->next_index[slot]) {
        const struct record *r = find_index(most, 0, most->count, sg, sender, low);
        fail_at(least->trace_path, 0,
                "partially delivered: failed sender %u subgroup %u index %" PRIu64
                " delivered by member %u (%s line %u) but not by member %u, which "
                "delivered only indexes below %" PRIu64 " (all survivors or none)",
                sender, sg, low, most->id, most->trace_path, r ? r->line : 0, least->id, low);
    }
}

static void check_completeness(void)
{
    const struct member *ref = first_survivor();
    for (uint32_t sg = 0; sg < g.subgroups; sg++)
        for (uint32_t sender = 0; sender < g.members; sender++) {
            /* A joiner that nobody delivered from is a receiver only. */
            bool silent_joiner = g.member[sender].joiner;
            for (uint32_t id = 0; id < g.members && silent_joiner; id++)
                silent_joiner = !g.member[id].survivor ||
                                g.member[id].next_index[(size_t)sg * g.members + sender] == 0;
            if (!silent_joiner)
                check_sender(sg, sender, in_final_view(ref, sender));
        }
}

/* Walks one member's deliveries in one view and subgroup. */
struct cursor {
    const struct member *m;
    uint64_t view;
    uint32_t subgroup;
    size_t pos;
    uint64_t taken;
};

static const struct record *cursor_next(struct cursor *c)
{
    while (c->pos < c->m->count) {
        const struct record *r = &c->m->records[c->pos++];
        if (r->view > c->view)
            break;
        if (r->view == c->view && r->subgroup == c->subgroup) {
            c->taken++;
            return r;
        }
    }
    c->pos = c->m->count;
    return NULL;
}

static bool same_message(const struct record *a, const struct record *b)
{
    return a->sender == b->sender && a->index == b->index && a->length == b->length &&
           a->crc == b->crc;
}

/* Compares other's sequence in (view, subgroup) with ref's: identical, or
 * (prefix_ok) a prefix of it. */
static void compare_view(const struct member *ref, const struct member *other, uint64_t view,
                         uint32_t sg, bool prefix_ok)
{
    struct cursor a = {ref, view, sg, 0, 0}, b = {other, view, sg, 0, 0};
    const char *kind = other->killed ? "not a prefix" : "diverge";
    for (;;) {
        const struct record *ra = cursor_next(&a), *rb = cursor_next(&b);
        if (ra == NULL && rb == NULL)
            return;
        if (ra == NULL)
            fail_at(other->trace_path, rb->line,
                    "%s: view %" PRIu64 " subgroup %u: delivered sender %u index %" PRIu64
                    " as message %" PRIu64 " of the view, but member %u delivered only %" PRIu64
                    " messages in that view",
                    kind, view, sg, rb->sender, rb->index, b.taken, ref->id, a.taken);
        if (rb == NULL) {
            if (prefix_ok)
                return;
            fail_at(other->trace_path, 0,
                    "diverge: view %" PRIu64 " subgroup %u: member %u delivered %" PRIu64
                    " messages in this view and went on, but member %u also delivered sender %u "
                    "index %" PRIu64 " in it (%s line %u)",
                    view, sg, other->id, b.taken, ref->id, ra->sender, ra->index, ref->trace_path,
                    ra->line);
        }
        if (!same_message(ra, rb))
            fail_at(other->trace_path, rb->line,
                    "%s: view %" PRIu64 " subgroup %u message %" PRIu64
                    " of the view is sender %u index %" PRIu64
                    ", but %s line %u has sender %u index %" PRIu64,
                    kind, view, sg, b.taken, rb->sender, rb->index, ref->trace_path, ra->line,
                    ra->sender, ra->index);
    }
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

/* Distinct view ids that appear in any trace, ascending. */
static uint64_t *collect_views(size_t *count)
{
    size_t total = 0, n = 0;
    for (uint32_t id = 0; id < g.members; id++)
        total += g.member[id].count;
    uint64_t *views = malloc((total + 1) * sizeof *views);
    if (views == NULL)
        fail_at(g.dir, 0, "out of memory");
    for (uint32_t id = 0; id < g.members; id++)
        for (size_t i = 0; i < g.member[id].count; i++)
            if (i == 0 || g.member[id].records[i].view != g.member[id].records[i - 1].view)
                views[n++] = g.member[id].records[i].view;
    qsort(views, n, sizeof *views, cmp_u64);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++)
        if (unique == 0 || views[i] != views[unique - 1])
            views[unique++] = views[i];
    *count = unique;
    return views;
}

static bool was_in_view(const struct member *m, uint64_t view)
{
    return (m->count > 0 || m->survivor) && m->first_view <= view && view <= m->last_view;
}

/* In each view, survivors are identical per subgroup; a killed member
 * matches them in views it went past and is a prefix in its last one. */
static void check_views(void)
{
    size_t num_views;
    uint64_t *views = collect_views(&num_views);
    for (size_t v = 0; v < num_views; v++) {
        const struct member *ref = NULL;
        for (uint32_t id = 0; id < g.members && ref == NULL; id++)
            if (g.member[id].survivor && was_in_view(&g.member[id], views[v]))
                ref = &g.member[id];
        for (uint32_t id = 0; id < g.members; id++) {
            const struct member *m = &g.member[id];
            if (m == ref || !was_in_view(m, views[v]))
                continue;
            if (ref == NULL) {
                for (size_t i = 0; i < m->count; i++)
                    if (m->records[i].view == views[v])
                        fail_at(m->trace_path, m->records[i].line,
                                "not a prefix: delivered in view %" PRIu64
                                ", which no survivor was in",
                                views[v]);
                continue;
            }
            bool prefix_ok = m->killed && views[v] == m->last_view;
            for (uint32_t sg = 0; sg < g.subgroups; sg++)
                compare_view(ref, m, views[v], sg, prefix_ok);
        }
    }
    free(views);
}

static void parse_killed(const char *text)
{
    char *copy = strdup(text);
    if (copy == NULL)
        usage_error("out of memory");
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        uint64_t id;
        if (!parse_u64_token(item, 10, &id) || id >= MAX_MEMBERS)
            usage_error("--killed: bad member id '%s'", item);
        g.killed_list[id] = true;
    }
    free(copy);
}

static uint64_t parse_number(const char *option, const char *text, uint64_t min, uint64_t max)
{
    uint64_t v;
    if (text == NULL || !parse_u64_token(text, 10, &v) || v < min || v > max)
        usage_error("%s '%s' must be a number in %" PRIu64 "..%" PRIu64, option, text ? text : "",
                    min, max);
    return v;
}

static void parse_args(int argc, char **argv)
{
    g.msg_size = -1;
    g.subgroups = 1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(arg, "--messages") == 0)
            g.messages = parse_number(arg, value, 1, 1ull << 32);
        else if (strcmp(arg, "--members") == 0)
            g.members = (uint32_t)parse_number(arg, value, 1, MAX_MEMBERS);
        else if (strcmp(arg, "--subgroups") == 0)
            g.subgroups = (uint32_t)parse_number(arg, value, 1, MAX_SUBGROUPS);
        else if (strcmp(arg, "--msg-size") == 0)
            g.msg_size = (long long)parse_number(arg, value, 0, UINT32_MAX);
        else if (strcmp(arg, "--killed") == 0 && value != NULL)
            parse_killed(value);
        else if (strcmp(arg, "--initial") == 0)
            g.initial = (uint32_t)parse_number(arg, value, 1, MAX_MEMBERS);
        else if (arg[0] != '-' && g.dir == NULL) {
            g.dir = arg;
            continue;
        } else
            usage_error("unknown or incomplete argument '%s'", arg);
        i++;
    }
    if (g.dir == NULL || g.messages == 0 || g.members == 0)
        usage_error("DIR, --messages and --members are required");
    if (g.initial == 0 || g.initial > g.members)
        g.initial = g.members;
    for (uint32_t id = g.members; id < MAX_MEMBERS; id++)
        if (g.killed_list[id])
            usage_error("--killed lists member %u, but there are only %u members", id, g.members);
}

static void print_summary(void)
{
    const struct member *ref = first_survivor();
    uint32_t survivors = 0;
    for (uint32_t id = 0; id < g.members; id++)
        survivors += g.member[id].survivor;
    printf("check_traces: ok: %u members, %u survivors in final view %" PRIu64 ", %" PRIu64
           " deliveries checked",
           g.members, survivors, ref->final_view, g.checked);
    for (uint32_t sender = 0; sender < g.members; sender++)
        for (uint32_t sg = 0; sg < g.subgroups && !in_final_view(ref, sender); sg++)
            printf("; sender %u left, subgroup %u: %" PRIu64 " of its messages delivered by all",
                   sender, sg, ref->next_index[(size_t)sg * g.members + sender]);
    putchar('\n');
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    g.member = calloc(g.members, sizeof *g.member);
    size_t seen_count = (size_t)g.subgroups * g.members * g.messages;
    if (seen_count > (size_t)1 << 28)
        usage_error("too many messages to check (%zu)", seen_count);
    g.seen = calloc(seen_count, sizeof *g.seen);
    if (g.member == NULL || g.seen == NULL)
        usage_error("out of memory");
    for (uint32_t id = 0; id < g.members; id++) {
        struct member *m = &g.member[id];
        m->id = id;
        m->killed = g.killed_list[id];
        snprintf(m->trace_path, sizeof m->trace_path, "%s/member-%u.trace", g.dir, id);
        snprintf(m->end_path, sizeof m->end_path, "%s/member-%u.end", g.dir, id);
        load_trace(m);
        load_end(m);
    }
    classify();
    for (uint32_t id = 0; id < g.members; id++)
        if (!g.member[id].joiner)
            check_file(&g.member[id]);
    for (uint32_t id = 0; id < g.members; id++) /* joiners after their reference */
        if (g.member[id].joiner)
            check_file(&g.member[id]);
    check_final_views();
    check_completeness();
    check_views();
    print_summary();
    return 0;
}
