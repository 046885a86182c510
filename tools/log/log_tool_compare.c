/*
 * spindle-log compare: members of a subgroup deliver the same messages in
 * the same order (ARCHITECTURE.md "Views and virtual synchrony"), so where
 * two logs both hold a subgroup's messages, from the later of their first
 * messages to the earlier of their last ones, they must hold the same
 * messages, one for one; and a view both installed must be the same view.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log_tool.h"
#include "util/error.h"

/* Delivery order: view id, then sequence number. */
static int order(const struct tool_entry *a, const struct tool_entry *b)
{
    if (a->view_id != b->view_id)
        return a->view_id < b->view_id ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return 0;
}

static bool same_message(const struct tool_entry *a, const struct tool_entry *b)
{
    return a->sender_id == b->sender_id && a->sender_index == b->sender_index &&
           a->length == b->length && a->payload_crc == b->payload_crc;
}

static void describe(const char *dir, const struct tool_entry *e)
{
    printf("    %s, position %" PRIu64 ": view %" PRIu64 " seq %" PRIu64
           ", sender %u index %" PRIu64 ", %u bytes, payload crc32c 0x%08x\n",
           dir, e->position, e->view_id, e->seq, e->sender_id, e->sender_index, e->length,
           e->payload_crc);
}

/* One subgroup: 0 and *common, or 1 (printed) where the logs part. */
static int compare_stream(const struct tool_log *a, const struct tool_log *b, uint32_t subgroup,
                          uint64_t *common)
{
    const struct tool_stream *x = &a->streams[subgroup], *y = &b->streams[subgroup];
    if (x->count == 0 || y->count == 0)
        return 0;
    size_t i = 0, j = 0;
    while (i < x->count && order(&x->entries[i], &y->entries[0]) < 0)
        i++;
    while (j < y->count && order(&y->entries[j], &x->entries[0]) < 0)
        j++;
    for (; i < x->count && j < y->count; i++, j++) {
        const struct tool_entry *p = &x->entries[i], *q = &y->entries[j];
        if (order(p, q) == 0 && same_message(p, q)) {
            (*common)++;
            continue;
        }
        printf("spindle-log: subgroup %u: the logs part after %" PRIu64 " common messages: %s\n",
               subgroup, *common,
               order(p, q) != 0 ? "one holds a message the other lacks"
                                : "the same place holds different messages");
        describe(a->dir, p);
        describe(b->dir, q);
        return 1;
    }
    return 0;
}

/* The same members, and the same trims unless one of the two is the
 * member's first view (it records no trims: it joined in that view). */
static bool same_view(const struct log_view *v, const struct log_view *w)
{
    if (v->member_count != w->member_count ||
        memcmp(v->members, w->members, v->member_count * sizeof v->members[0]) != 0)
        return false;
    if (v->subgroup_count == 0 || w->subgroup_count == 0)
        return true;
    return v->subgroup_count == w->subgroup_count &&
           memcmp(v->delivered_through, w->delivered_through,
                  v->subgroup_count * sizeof v->delivered_through[0]) == 0;
}

/* Views both logs hold (both in growing id order). */
static int compare_views(const struct tool_log *a, const struct tool_log *b, uint64_t *common)
{
    size_t i = 0, j = 0;
    while (i < a->view_count && j < b->view_count) {
        const struct log_view *v = &a->views[i], *w = &b->views[j];
        if (v->view_id < w->view_id) {
            i++;
        } else if (w->view_id < v->view_id) {
            j++;
        } else if (!same_view(v, w)) {
            printf("spindle-log: view %" PRIu64 " differs: %s and %s record other members or "
                   "another trim\n",
                   v->view_id, a->dir, b->dir);
            return 1;
        } else {
            (*common)++;
            i++;
            j++;
        }
    }
    return 0;
}

static int compare_pair(const struct tool_log *a, const struct tool_log *b)
{
    uint64_t messages = 0, views = 0;
    for (uint32_t s = 0; s < SPINDLE_MAX_SUBGROUPS; s++)
        if (compare_stream(a, b, s, &messages) != 0)
            return 1;
    if (compare_views(a, b, &views) != 0)
        return 1;
    printf("%s and %s agree: %" PRIu64 " messages and %" PRIu64 " views in common\n", a->dir,
           b->dir, messages, views);
    return 0;
}

int tool_compare(char **dirs, int count)
{
    struct tool_log *logs = calloc((size_t)count, sizeof *logs);
    if (logs == NULL) {
        fprintf(stderr, "spindle-log: out of memory\n");
        return 1;
    }
    int status = 0;
    int loaded = 0;
    for (; loaded < count; loaded++) {
        if (tool_load(dirs[loaded], 0, &logs[loaded]) != 0) {
            fprintf(stderr, "spindle-log: %s\n", spindle_errmsg());
            status = 1;
            loaded++;
            break;
        }
        if (logs[loaded].report.tail_bytes > 0)
            printf("%s: %" PRIu64 " bytes of torn tail in %s left out (spindle-log check cuts "
                   "them)\n",
                   dirs[loaded], logs[loaded].report.tail_bytes, logs[loaded].report.tail_segment);
    }
    for (int i = 0; status == 0 && i < count; i++)
        for (int j = i + 1; status == 0 && j < count; j++)
            status = compare_pair(&logs[i], &logs[j]);
    for (int i = 0; i < loaded; i++)
        tool_free(&logs[i]);
    free(logs);
    return status;
}
