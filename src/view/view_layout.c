/*
 * Subgroup layouts of a next view: the default (survivors keep their
 * places, a joiner receives in every subgroup) and the application's
 * layout function, checked like any layout.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "view/view.h"

/* Copies layout with removed ranks dropped and the rest renumbered. */
static void map_layout(const struct smc_layout *old, const int *new_rank, struct smc_layout *out)
{
    *out = *old;
    out->num_members = 0;
    out->num_senders = 0;
    for (uint32_t i = 0; i < old->num_members; i++)
        if (new_rank[old->members[i]] >= 0)
            out->members[out->num_members++] = (uint32_t)new_rank[old->members[i]];
    for (uint32_t s = 0; s < old->num_senders; s++)
        if (new_rank[old->senders[s]] >= 0)
            out->senders[out->num_senders++] = (uint32_t)new_rank[old->senders[s]];
}

/* Runs the layout function over next->layouts (filled with the default). */
static int apply_layout_fn(const struct view_transition *how, spindle_layout_fn layout,
                           void *layout_ctx, struct view *next)
{
    uint32_t count = next->num_subgroups;
    struct spindle_subgroup_layout *user = calloc(count > 0 ? count : 1, sizeof *user);
    if (user == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the layout of view %llu",
                        (unsigned long long)next->id);
    for (uint32_t g = 0; g < count; g++) {
        const struct smc_layout *l = &next->layouts[g];
        user[g].num_members = l->num_members;
        memcpy(user[g].members, l->members, l->num_members * sizeof(uint32_t));
        user[g].num_senders = l->num_senders;
        memcpy(user[g].senders, l->senders, l->num_senders * sizeof(uint32_t));
    }
    /* What every member sees alike: not its own rank, not its clock. */
    struct spindle_view_info info;
    view_describe(next, how, &info);
    info.my_rank = SPINDLE_RANK_ANY;
    int rc = layout(layout_ctx, &info, count, user);
    if (rc < 0)
        rc = sp_error(rc, "the layout function refused view %llu (%s)",
                      (unsigned long long)next->id, spindle_strerror(rc));
    for (uint32_t g = 0; g < count && rc == 0; g++) {
        if (user[g].num_members > next->num_members || user[g].num_senders > user[g].num_members) {
            rc = sp_error(SPINDLE_EINVAL,
                          "layout function, view %llu subgroup %u: %u members and %u senders "
                          "in a view of %u",
                          (unsigned long long)next->id, g, user[g].num_members, user[g].num_senders,
                          next->num_members);
            break;
        }
        struct smc_layout *out = &next->layouts[g];
        out->num_members = user[g].num_members;
        memcpy(out->members, user[g].members, user[g].num_members * sizeof(uint32_t));
        out->num_senders = user[g].num_senders;
        memcpy(out->senders, user[g].senders, user[g].num_senders * sizeof(uint32_t));
        rc = smc_layout_validate(out, g, next->num_members);
        if (rc < 0)
            rc = sp_error(rc, "layout function, view %llu: %s", (unsigned long long)next->id,
                          spindle_errmsg());
    }
    free(user);
    return rc;
}

int view_next_layouts(const struct view *current, const struct view_transition *how,
                      spindle_layout_fn layout, void *layout_ctx, struct view *next)
{
    next->layouts =
        calloc(current->num_subgroups > 0 ? current->num_subgroups : 1, sizeof *next->layouts);
    if (next->layouts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the layouts of view %llu",
                        (unsigned long long)next->id);
    next->num_subgroups = current->num_subgroups;
    uint32_t joiner_rank = next->num_members - 1;
    for (uint32_t g = 0; g < current->num_subgroups; g++) {
        map_layout(&current->layouts[g], how->new_rank, &next->layouts[g]);
        if (how->joiner != VIEW_NO_JOINER)
            next->layouts[g].members[next->layouts[g].num_members++] = joiner_rank;
    }
    return layout == NULL ? 0 : apply_layout_fn(how, layout, layout_ctx, next);
}
