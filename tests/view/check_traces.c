/*
 * check_traces: verifies the delivery traces that spindle-bench --trace
 * writes against the virtual-synchrony guarantees, after members were
 * killed (or cut off), joined or left part-way through a run.
 *
 *   check_traces DIR --messages M --members N [--killed LIST] [--subgroups K]
 *                [--msg-size S] [--initial I] [--mode atomic|unordered]
 *
 * Input: DIR holds the files of every process that was a member, under
 * member ids 0..N-1. A process is identified by its member id and its
 * incarnation, the view it joined in (0 for an initial member): a
 * departed member's id may be given to a later joiner, so one id may name
 * several processes over a run, one after the other.
 *   member-<id>.trace        an initial member's deliveries, one line per
 *   member-<id>.<view>.trace message (the second: a joiner of view <view>):
 *                      <view_id> <subgroup> <sender> <app_index> <length> <crc32c-hex8>
 *   member-<id>.end          written by a member that finished or left
 *   member-<id>.<view>.end   (the second: the joiner of view <view>):
 *                      view <final_view_id> members <id,id,...> [joined <view_id>] [left]
 *                      ("joined V": the member joined the running group in
 *                      view V, which a joiner's file name repeats; "left":
 *                      it left the group, spindle_group_leave, and the view
 *                      named is the last one it was in)
 * Other names (member-<id>[.<view>].pid, a joiner's joining-<pid>.trace
 * from before it knew its id) are ignored. A process with an .end file that
 * does not say "left" (and that is not listed in --killed) is a survivor;
 * one whose .end says "left" departed; one in --killed was stopped from
 * outside (its trace may end in a partial line, which is ignored). Any other
 * process, or an id in 0..N-1 with no file at all and not in --killed, is
 * an error. --killed lists ID (the id's last incarnation; an id without
 * files was killed before it wrote any) or ID.VIEW (the joiner of VIEW).
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
 *   - the incarnations of one id follow each other: each is in its views
 *     (from the one it joined in, or view 0, to its final view or its last
 *     delivery) only after the previous one was gone; a joiner's .end says
 *     it joined in the view its name says;
 *   - the survivors agree on the final view, whose members are exactly the
 *     survivors' ids (one survivor per id);
 *   - the members an .end file lists for its view include every process
 *     that was in that view;
 *   - in every view, all survivors delivered identical sequences per
 *     subgroup (the virtual-synchrony guarantee: members that go on to the
 *     next view delivered the same messages in the same order);
 *   - every message 0..M-1 of a sender in the final view was delivered by
 *     every survivor, in every subgroup 0..K-1;
 *   - each message of a sender that left the group was delivered by all
 *     survivors or by none;
 *   - a killed member's trace and that of a member that left, in each view
 *     it went past, equals the survivors' sequence, and in its last view is
 *     a prefix of it; a member that left delivered nothing after its final
 *     view.
 * A member is taken to be in every view from the first view id in its
 * trace to its last (survivors and members that left: to their final
 * view); a member that joined is in every view from the one it joined. A
 * joiner (one that left too) must deliver, per (subgroup, sender), exactly
 * the messages that an initial survivor delivered in the views from its
 * first one on: its first app_index is the count that survivor delivered
 * before (so nothing of its views is missed and nothing of an earlier view
 * is delivered to it). With --initial I, members I..N-1 joined later: one
 * with unnamed files that was killed (no .end to say when it joined) is
 * checked as a joiner of the first view in its trace.
 *
 * --mode unordered checks the guarantee of SPINDLE_MODE_UNORDERED subgroups
 * (include/spindle/group.h, docs/VIEWS.md) instead, in every subgroup. They
 * deliver on receipt and a view change does not trim them: each surviving
 * sender resends from the fewest of its messages any survivor received, and
 * each survivor drops the resends it already had. So there is no total
 * order and no all-or-none, and what must hold is:
 *   - everything above up to "every message 0..M-1 of a sender in the final
 *     view was delivered by every survivor", unchanged: per file and
 *     (subgroup, sender) app_index runs 0,1,2,... with no duplicate, reorder
 *     (a FIFO violation) or gap, across views, and one message has one
 *     payload everywhere; so the survivors' per-sender sequences agree, each
 *     a gap-free FIFO prefix of the sender's stream;
 *   - no process delivered in a view that no survivor was in;
 *   - a joiner starts, per (subgroup, sender), exactly where one process
 *     that was in the group before it joined (the member that handed over
 *     the state) had delivered up to before that view, the same process for
 *     every (subgroup, sender); from there on it is checked as above.
 * What is not checked, because the mode does not promise it: the
 * interleaving of senders (it differs between members); which view a
 * message is delivered in (a survivor may get in view v+1, as a resend,
 * what another delivered in view v, so sequences are not compared view by
 * view and a killed member's or a departed member's trace need not be a
 * prefix of a survivor's); and that a failed sender's message reached all
 * survivors or none (each survivor holds a gap-free prefix of a failed
 * sender's messages, not necessarily of the same length).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_traces.h"

static _Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("check_traces: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nusage: check_traces DIR --messages M --members N [--killed ID[.VIEW],...] "
          "[--subgroups K] [--msg-size S] [--initial I] [--mode atomic|unordered]\n",
          stderr);
    exit(2);
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

size_t view_start(const struct member *m, uint64_t view)
{
    size_t low = 0, high = m->count;
    while (low < high) {
        size_t mid = low + (high - low) / 2;
        if (m->records[mid].view < view)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
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
    if (m->left && r->view > m->final_view)
        fail_at(m->trace_path, r->line,
                "delivered in view %" PRIu64 " after it left: its .end says view %" PRIu64
                " was its last",
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
    struct seen *s = &g.seen[((size_t)r->subgroup * g.senders + r->sender) * g.messages + r->index];
    if (s->line == 0) {
        *s = (struct seen){r->length, r->crc, (uint32_t)(m - g.member), r->line};
        return;
    }
    if (s->length != r->length || s->crc != r->crc)
        fail_at(m->trace_path, r->line,
                "payload differs: subgroup %u sender %u index %" PRIu64
                " has length %u crc %08x, but %s.trace line %u has length %u crc %08x",
                r->subgroup, r->sender, r->index, r->length, r->crc,
                process_name(&g.member[s->member]), s->line, s->length, s->crc);
}

/* An initial member (not a joiner) that survived: the reference for what
 * a joiner should have missed. */
static const struct member *initial_survivor(void)
{
    for (size_t i = 0; i < g.count; i++)
        if (g.member[i].survivor && !g.member[i].joiner)
            return &g.member[i];
    fail_at(g.dir, 0, "no member that was there from the start survived");
}

static void check_file(struct member *m)
{
    m->next_index = calloc((size_t)g.subgroups * g.members, sizeof *m->next_index);
    if (m->next_index == NULL)
        fail_at(m->trace_path, 0, "out of memory");
    if (m->joiner && m->count > 0 && m->records[0].view < m->joined_view)
        fail_at(m->trace_path, m->records[0].line,
                "delivered in view %" PRIu64 ", before it joined in view %" PRIu64,
                m->records[0].view, m->joined_view);
    if (m->joiner && g.unordered) {
        unordered_joiner_start(m);
    } else if (m->joiner) {
        /* It starts, per subgroup and sender, where the group was when it
         * joined: after what the reference delivered in earlier views. */
        const struct member *ref = initial_survivor();
        size_t before = view_start(ref, m->joined_view);
        for (size_t i = 0; i < before; i++) {
            const struct record *r = &ref->records[i];
            m->next_index[(size_t)r->subgroup * g.members + r->sender] = r->index + 1;
        }
    }
    for (size_t i = 0; i < m->count; i++) {
        check_record(m, i);
        check_payload(m, &m->records[i]);
    }
    if (m->count > 0) {
        m->first_view = m->records[0].view;
        m->last_view = m->records[m->count - 1].view;
    }
    if (m->survivor || m->left) {
        if (m->count == 0)
            m->first_view = m->final_view;
        m->last_view = m->final_view;
    }
    if (m->joiner)
        m->first_view = m->joined_view;
    g.checked += m->count;
}

/* Whether anything shows m was a member at all (a process killed before it
 * wrote a line or an .end shows nothing). */
static bool has_views(const struct member *m)
{
    return m->count > 0 || m->survivor || m->left;
}

static bool was_in_view(const struct member *m, uint64_t view)
{
    return has_views(m) && m->first_view <= view && view <= m->last_view;
}

/* The incarnations of one id follow each other: the later one joined after
 * the earlier one's last view (g.member is sorted by id, then join view). */
static void check_incarnations(void)
{
    const struct member *previous = NULL;
    for (size_t i = 0; i < g.count; i++) {
        const struct member *m = &g.member[i];
        if (!has_views(m))
            continue;
        if (previous != NULL && previous->id == m->id && previous->last_view >= process_start(m))
            fail_at(m->trace_path, 0,
                    "mixed up: two incarnations of member %u overlap: %s is in views %" PRIu64
                    "..%" PRIu64 ", but %s joined in view %" PRIu64,
                    m->id, process_name(previous), process_start(previous), previous->last_view,
                    process_name(m), process_start(m));
        previous = m;
    }
}

/* The survivor that holds id at the end, or NULL. */
static const struct member *survivor_of(uint32_t id)
{
    for (size_t i = 0; i < g.count; i++)
        if (g.member[i].survivor && g.member[i].id == id)
            return &g.member[i];
    return NULL;
}

/* Says what became of id's last incarnation, for a final view that lists it. */
static const char *fate(uint32_t id)
{
    const struct member *last = NULL;
    for (size_t i = 0; i < g.count; i++)
        if (g.member[i].id == id)
            last = &g.member[i];
    if (last == NULL)
        return "did not finish";
    return last->killed ? "was killed" : last->left ? "left" : "did not finish";
}

static const struct member *first_survivor(void)
{
    for (size_t i = 0; i < g.count; i++)
        if (g.member[i].survivor)
            return &g.member[i];
    fail_at(g.dir, 0, "no survivors: no member-<id>.end from a member that was not killed");
}

/* The survivors agree on the final view, and it holds exactly them, one
 * process per id. */
static void check_final_views(void)
{
    const struct member *ref = first_survivor();
    for (size_t i = 0; i < g.count; i++) {
        const struct member *m = &g.member[i];
        if (!m->survivor || m == ref)
            continue;
        const struct member *holder = survivor_of(m->id);
        if (holder != m)
            fail_at(m->end_path, 1, "mixed up: %s and %s both finished as member %u",
                    process_name(holder), process_name(m), m->id);
        bool same = m->final_view == ref->final_view && m->num_final == ref->num_final;
        for (uint32_t k = 0; same && k < m->num_final; k++)
            same = in_final_view(ref, m->final_members[k]);
        if (!same)
            fail_at(m->end_path, 1, "final view disagrees with %s (view %" PRIu64 ")",
                    ref->end_path, ref->final_view);
    }
    for (uint32_t id = 0; id < g.members; id++) {
        bool survived = survivor_of(id) != NULL;
        if (survived != in_final_view(ref, id))
            fail_at(ref->end_path, 1, "final view %" PRIu64 " %s member %u, which %s",
                    ref->final_view, survived ? "lacks" : "lists", id,
                    survived ? "finished" : fate(id));
    }
}

/* The view a departed member's .end names lists it and every survivor or
 * departed member that was in that view (by view range: the id of an
 * incarnation that was there). Killed members' ranges are guesses from
 * their traces: not held against the list. */
static void check_end_members(void)
{
    for (size_t i = 0; i < g.count; i++) {
        const struct member *m = &g.member[i];
        if (!m->left)
            continue;
        for (size_t k = 0; k < g.count; k++) {
            const struct member *other = &g.member[k];
            if ((other->survivor || other->left) && was_in_view(other, m->final_view) &&
                !in_final_view(m, other->id))
                fail_at(m->end_path, 1,
                        "view %" PRIu64 " does not list member %u, but %s was in it (views %" PRIu64
                        "..%" PRIu64 ")",
                        m->final_view, other->id, process_name(other), other->first_view,
                        other->last_view);
        }
    }
}

/* Every message of a sender still in the final view reached every survivor;
 * each message of a sender that left reached all survivors or none (atomic;
 * unordered: each survivor holds a gap-free prefix, check_record). */
static void check_sender(uint32_t sg, uint32_t sender, bool stays)
{
    size_t slot = (size_t)sg * g.members + sender;
    const struct member *most = first_survivor(), *least = most;
    for (size_t i = 0; i < g.count; i++) {
        const struct member *m = &g.member[i];
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
    if (!g.unordered && low != most->next_index[slot]) {
        const struct record *r = find_index(most, 0, most->count, sg, sender, low);
        fail_at(least->trace_path, 0,
                "partially delivered: failed sender %u subgroup %u index %" PRIu64
                " delivered by member %u (%s line %u) but not by member %u, which "
                "delivered only indexes below %" PRIu64 " (all survivors or none)",
                sender, sg, low, most->id, most->trace_path, r ? r->line : 0, least->id, low);
    }
}

/* Senders are initial members (joiners only receive): sender id stays when
 * the process holding that id at the end is the initial member. */
static bool sender_stays(uint32_t sender)
{
    const struct member *holder = survivor_of(sender);
    return holder != NULL && !holder->joiner;
}

/* Whether id ever named an initial member (a sender). */
static bool was_initial(uint32_t id)
{
    for (size_t i = 0; i < g.count; i++)
        if (g.member[i].id == id && !g.member[i].joiner)
            return true;
    return false;
}

static void check_completeness(void)
{
    for (uint32_t sg = 0; sg < g.subgroups; sg++)
        for (uint32_t sender = 0; sender < g.members; sender++)
            check_sender(sg, sender, sender_stays(sender));
}

/* Walks one member's deliveries in one view and subgroup. */
struct cursor {
    const struct member *m;
    uint64_t view;
    uint32_t subgroup;
    size_t pos;
    uint64_t taken;
};

static struct cursor cursor_at(const struct member *m, uint64_t view, uint32_t subgroup)
{
    return (struct cursor){m, view, subgroup, view_start(m, view), 0};
}

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
    struct cursor a = cursor_at(ref, view, sg), b = cursor_at(other, view, sg);
    const char *kind = other->killed || other->left ? "not a prefix" : "diverge";
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
    for (size_t p = 0; p < g.count; p++)
        total += g.member[p].count;
    uint64_t *views = malloc((total + 1) * sizeof *views);
    if (views == NULL)
        fail_at(g.dir, 0, "out of memory");
    for (size_t p = 0; p < g.count; p++)
        for (size_t i = 0; i < g.member[p].count; i++)
            if (i == 0 || g.member[p].records[i].view != g.member[p].records[i - 1].view)
                views[n++] = g.member[p].records[i].view;
    qsort(views, n, sizeof *views, cmp_u64);
    size_t unique = 0;
    for (size_t i = 0; i < n; i++)
        if (unique == 0 || views[i] != views[unique - 1])
            views[unique++] = views[i];
    *count = unique;
    return views;
}

/* Nothing is delivered in a view no survivor was in. Atomic: in each view,
 * survivors are identical per subgroup; a killed member or one that left
 * matches them in views it went past and is a prefix in its last one.
 * Unordered: a survivor may deliver in view v+1, as a resend, what another
 * delivered in view v, so views are not compared (see the top comment). */
static void check_views(void)
{
    size_t num_views;
    uint64_t *views = collect_views(&num_views);
    for (size_t v = 0; v < num_views; v++) {
        const struct member *ref = NULL;
        for (size_t i = 0; i < g.count && ref == NULL; i++)
            if (g.member[i].survivor && was_in_view(&g.member[i], views[v]))
                ref = &g.member[i];
        for (size_t i = 0; i < g.count; i++) {
            const struct member *m = &g.member[i];
            if (m == ref || !was_in_view(m, views[v]))
                continue;
            if (ref == NULL) {
                size_t at = view_start(m, views[v]);
                if (at < m->count && m->records[at].view == views[v])
                    fail_at(m->trace_path, m->records[at].line,
                            "not a prefix: delivered in view %" PRIu64 ", which no survivor was in",
                            views[v]);
                continue;
            }
            bool prefix_ok = (m->killed || m->left) && views[v] == m->last_view;
            for (uint32_t sg = 0; sg < g.subgroups && !g.unordered; sg++)
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
        struct killed_entry e = {0};
        char *dot = strchr(item, '.');
        if (dot != NULL) {
            *dot = '\0';
            e.named = true;
            if (!parse_u64_token(dot + 1, 10, &e.incarnation) || e.incarnation == 0)
                usage_error("--killed: bad incarnation '%s' of member '%s' (a joiner's view, "
                            "1 or more)",
                            dot + 1, item);
        }
        uint64_t id;
        if (!parse_u64_token(item, 10, &id) || id >= MAX_MEMBERS)
            usage_error("--killed: bad member id '%s'", item);
        e.id = (uint32_t)id;
        struct killed_entry *grown = realloc(g.killed, (g.num_killed + 1) * sizeof *grown);
        if (grown == NULL)
            usage_error("out of memory");
        g.killed = grown;
        g.killed[g.num_killed++] = e;
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

/* --mode: true for unordered. */
static bool parse_mode(const char *text)
{
    if (text != NULL && strcmp(text, "atomic") == 0)
        return false;
    if (text != NULL && strcmp(text, "unordered") == 0)
        return true;
    usage_error("--mode '%s' must be atomic or unordered", text ? text : "");
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
        else if (strcmp(arg, "--mode") == 0)
            g.unordered = parse_mode(value);
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
    for (size_t k = 0; k < g.num_killed; k++)
        if (g.killed[k].id >= g.members)
            usage_error("--killed lists member %u, but there are only %u members", g.killed[k].id,
                        g.members);
}

static void print_summary(void)
{
    const struct member *ref = first_survivor();
    uint32_t survivors = 0, left = 0;
    for (size_t i = 0; i < g.count; i++) {
        survivors += g.member[i].survivor;
        left += g.member[i].left;
    }
    printf("check_traces: ok: %u members", g.members);
    if (g.count != g.members)
        printf(" (%zu processes)", g.count);
    printf(", %u survivors in final view %" PRIu64, survivors, ref->final_view);
    if (left > 0)
        printf(", %u left", left);
    printf(", %" PRIu64 " deliveries checked%s", g.checked, g.unordered ? " (unordered)" : "");
    for (uint32_t sender = 0; sender < g.members; sender++)
        for (uint32_t sg = 0; sg < g.subgroups && !sender_stays(sender) && was_initial(sender);
             sg++) {
            size_t slot = (size_t)sg * g.members + sender;
            uint64_t low = ref->next_index[slot], high = low;
            for (size_t i = 0; i < g.count; i++)
                if (g.member[i].survivor) {
                    uint64_t got = g.member[i].next_index[slot];
                    low = got < low ? got : low;
                    high = got > high ? got : high;
                }
            printf("; sender %u left, subgroup %u: ", sender, sg);
            if (low == high)
                printf("%" PRIu64 " of its messages delivered by all", low);
            else
                printf("the first %" PRIu64 "..%" PRIu64 " of its messages delivered by each", low,
                       high);
        }
    putchar('\n');
}

/* One slot per (subgroup, sender, index) for the sender ids that appear
 * (joiners only receive: sized by the senders, not by every id). */
static void allocate_seen(void)
{
    g.senders = 1;
    for (size_t p = 0; p < g.count; p++)
        for (size_t i = 0; i < g.member[p].count; i++)
            if (g.member[p].records[i].sender < g.members &&
                g.member[p].records[i].sender >= g.senders)
                g.senders = g.member[p].records[i].sender + 1;
    size_t seen_count = (size_t)g.subgroups * g.senders * g.messages;
    if (seen_count > (size_t)1 << 28)
        usage_error("too many messages to check (%zu)", seen_count);
    g.seen = calloc(seen_count, sizeof *g.seen);
    if (g.seen == NULL)
        usage_error("out of memory");
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    load_processes();
    allocate_seen();
    for (size_t i = 0; i < g.count; i++)
        if (!g.member[i].joiner)
            check_file(&g.member[i]);
    for (size_t i = 0; i < g.count; i++) /* joiners after their reference */
        if (g.member[i].joiner)
            check_file(&g.member[i]);
    check_incarnations();
    check_final_views();
    check_end_members();
    check_completeness();
    check_views();
    print_summary();
    return 0;
}
