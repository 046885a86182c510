/* The view model (view/view.h). */
#include "view/view.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int view_init_first(struct view *view, uint32_t num_members, uint32_t self,
                    const struct smc_layout *layouts, uint32_t num_subgroups)
{
    memset(view, 0, sizeof *view);
    view->layouts = calloc(num_subgroups > 0 ? num_subgroups : 1, sizeof *view->layouts);
    if (view->layouts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u subgroup layouts", num_subgroups);
    if (num_subgroups > 0)
        memcpy(view->layouts, layouts, num_subgroups * sizeof *layouts);
    view->num_subgroups = num_subgroups;
    view->num_members = num_members;
    view->my_rank = self;
    for (uint32_t rank = 0; rank < num_members; rank++)
        view->member_ids[rank] = rank;
    return 0;
}

void view_clear(struct view *view)
{
    free(view->layouts);
    memset(view, 0, sizeof *view);
}

uint64_t view_member_mask(const struct view *view)
{
    uint64_t mask = 0;
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        mask |= 1ull << view->member_ids[rank];
    return mask;
}

int view_rank_of(const struct view *view, uint32_t id)
{
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if (view->member_ids[rank] == id)
            return (int)rank;
    return -1;
}

bool view_is_quorum(const struct view *view, uint64_t ranks, bool tie_breaker)
{
    uint64_t in_view = view->num_members >= 64 ? ~0ull : (1ull << view->num_members) - 1;
    uint32_t count = (uint32_t)__builtin_popcountll(ranks & in_view);
    if (2 * count > view->num_members)
        return true;
    return tie_breaker && 2 * count == view->num_members && (ranks & 1) != 0;
}

int view_check_majority(const struct view *view, uint64_t suspected, bool tie_breaker)
{
    if ((suspected >> view->my_rank) & 1)
        return sp_error(SPINDLE_EREMOVED,
                        "view %llu: removed from the group: the other members suspect this member "
                        "(they found it failed, stopped or lying)",
                        (unsigned long long)view->id);
    uint64_t in_view = view->num_members >= 64 ? ~0ull : (1ull << view->num_members) - 1;
    uint64_t survivors = in_view & ~suspected;
    if (!view_is_quorum(view, survivors, tie_breaker))
        return sp_error(SPINDLE_EMINORITY,
                        "view %llu: only %u of %u members survive, not a majority%s: this "
                        "member is in a minority and stops",
                        (unsigned long long)view->id, (unsigned)__builtin_popcountll(survivors),
                        view->num_members,
                        tie_breaker ? " nor half with the leader (tie_breaker)" : "");
    return 0;
}

int view_next(const struct view *current, uint64_t removed, uint32_t joiner, struct view *next,
              struct view_transition *how)
{
    memset(next, 0, sizeof *next);
    memset(how, 0, sizeof *how);
    if ((removed >> current->my_rank) & 1)
        return sp_error(SPINDLE_EINVAL, "view %llu: this member is among the removed",
                        (unsigned long long)current->id);
    if (joiner != VIEW_NO_JOINER && view_rank_of(current, joiner) >= 0)
        return sp_error(SPINDLE_EINVAL, "view %llu: joiner %u is already a member",
                        (unsigned long long)current->id, joiner);
    how->removed = removed;
    how->joiner = joiner;
    next->id = current->id + 1;
    next->num_subgroups = current->num_subgroups;
    for (uint32_t rank = 0; rank < current->num_members; rank++) {
        uint32_t id = current->member_ids[rank];
        if ((removed >> rank) & 1) {
            how->new_rank[rank] = -1;
            how->left_identities[how->num_left] = current->identities[rank];
            how->left[how->num_left++] = id;
            continue;
        }
        how->new_rank[rank] = (int)next->num_members;
        how->survivors |= 1ull << id;
        next->identities[next->num_members] = current->identities[rank];
        next->member_ids[next->num_members++] = id;
    }
    if (joiner != VIEW_NO_JOINER && next->num_members < VIEW_MAX_MEMBERS)
        next->member_ids[next->num_members++] = joiner;
    next->my_rank = (uint32_t)how->new_rank[current->my_rank];
    return 0;
}

void view_describe(const struct view *view, const struct view_transition *how,
                   struct spindle_view_info *out)
{
    memset(out, 0, sizeof *out);
    out->view_id = view->id;
    out->num_members = view->num_members;
    out->members = view->member_ids;
    out->my_rank = view->my_rank;
    out->identities = view->identities;
    if (how != NULL) {
        out->num_left = how->num_left;
        out->left = how->left;
        out->left_identities = how->left_identities;
        out->num_joined = how->joiner != VIEW_NO_JOINER ? 1 : 0;
        out->joined = &how->joiner;
        /* view_next appends the joiner last. */
        if (out->num_joined > 0 && view->num_members > 0)
            out->joined_identities = &view->identities[view->num_members - 1];
    }
}

int view_rank_of_name(const struct view *view, const char *name)
{
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if (strcmp(view->identities[rank].name, name) == 0)
            return (int)rank;
    return -1;
}
