/*
 * check_traces --mode unordered: where a joiner of an unordered subgroup
 * starts. In atomic mode every survivor delivered the same messages before
 * the joiner's first view, so any of them tells where it starts; in
 * unordered mode they may differ at that view change (no trim), and the
 * joiner starts where the member that handed it the state was: the same
 * process for every (subgroup, sender).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>

#include "check_traces.h"

/* counts[slot]: what c had delivered per (subgroup, sender) before view
 * (the next app_index it expected). */
static void counts_before(const struct member *c, uint64_t view, uint64_t *counts, size_t slots)
{
    for (size_t s = 0; s < slots; s++)
        counts[s] = 0;
    size_t before = view_start(c, view);
    for (size_t i = 0; i < before; i++) {
        const struct record *r = &c->records[i];
        counts[(size_t)r->subgroup * g.members + r->sender] = r->index + 1;
    }
}

void unordered_joiner_start(struct member *joiner)
{
    size_t slots = (size_t)g.subgroups * g.members;
    uint64_t *first = malloc(slots * sizeof *first), *counts = malloc(slots * sizeof *counts);
    if (first == NULL || counts == NULL)
        fail_at(joiner->trace_path, 0, "out of memory");
    for (size_t s = 0; s < slots; s++)
        first[s] = UINT64_MAX;
    const struct record *earliest = NULL; /* the joiner's first record of its first slot */
    for (size_t i = 0; i < joiner->count; i++) {
        const struct record *r = &joiner->records[i];
        size_t slot = (size_t)r->subgroup * g.members + r->sender;
        if (r->subgroup < g.subgroups && r->sender < g.members && first[slot] == UINT64_MAX) {
            first[slot] = r->index;
            earliest = earliest != NULL ? earliest : r;
        }
    }
    for (size_t k = 0; k < g.count; k++) {
        const struct member *c = &g.member[k];
        if (c == joiner || process_start(c) >= joiner->joined_view)
            continue;
        counts_before(c, joiner->joined_view, counts, slots);
        bool match = true;
        for (size_t s = 0; s < slots && match; s++)
            match = first[s] == UINT64_MAX || first[s] == counts[s];
        if (match) {
            for (size_t s = 0; s < slots; s++)
                joiner->next_index[s] = counts[s];
            free(first);
            free(counts);
            return;
        }
    }
    if (earliest == NULL)
        fail_at(joiner->trace_path, 0, "no process was in the group before view %" PRIu64,
                joiner->joined_view);
    fail_at(joiner->trace_path, earliest->line,
            "joiner of view %" PRIu64 " starts at subgroup %u sender %u index %" PRIu64
            " (and so on), where no process that was in the group before it (the one that "
            "handed over the state) was: a gap or a duplicate at its start",
            joiner->joined_view, earliest->subgroup, earliest->sender, earliest->index);
}
