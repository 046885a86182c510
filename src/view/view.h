/*
 * The view model: the membership of a group at one point of its history,
 * as every step of the protocol uses it.
 *
 * A view is (view id, members in rank order, per-subgroup layouts). A
 * member has a stable id (its slot: the initial members 0..n-1, then
 * joiners, never reused); its rank in the view is its index in the member
 * list and names its SST row. Layouts (struct smc_layout) list each
 * subgroup's members and senders as ranks of this view; delivery inside a
 * subgroup is round-robin over its senders (Spindle 2.1). The leader is
 * rank 0. A next view keeps the surviving members in their order and
 * appends a joiner; it is accepted only when more than half of the
 * previous view's members survive into it (the partition rule: a member in
 * the minority stops with SPINDLE_EMINORITY).
 *
 * Thread-safety: a struct view is plain data; the membership thread builds
 * a next one and publishes it under the membership's locks.
 */
#ifndef SP_VIEW_VIEW_H
#define SP_VIEW_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include <spindle/view.h>

#include "smc/smc.h"
#include "sst/sst.h"

/* Failure and agreement sets are uint64_t masks over ranks and ids. */
#define VIEW_MAX_MEMBERS SST_MAX_ROWS
/* A transition, blob or commitment names this joiner when there is none. */
#define VIEW_NO_JOINER UINT32_MAX

struct view {
    uint64_t id;
    uint32_t num_members;
    uint32_t my_rank;
    uint32_t member_ids[VIEW_MAX_MEMBERS];                       /* by rank */
    struct spindle_member_identity identities[VIEW_MAX_MEMBERS]; /* by rank */
    uint32_t num_subgroups;
    struct smc_layout *layouts; /* [num_subgroups], heap, in ranks */
};

/*
 * How a next view derives from the current one: removed ranks (failed or
 * leaving), an optional joiner appended last, and where every old rank
 * went. Filled by view_next.
 */
struct view_transition {
    uint64_t removed;                /* ranks of the current view */
    uint32_t joiner;                 /* member id, or VIEW_NO_JOINER */
    int new_rank[VIEW_MAX_MEMBERS];  /* old rank -> new rank, -1 when removed */
    uint32_t left[VIEW_MAX_MEMBERS]; /* member ids removed, in old rank order */
    struct spindle_member_identity left_identities[VIEW_MAX_MEMBERS]; /* likewise */
    uint32_t num_left;
    uint64_t survivors; /* member ids of the current view that stay */
};

/*
 * The first view: members 0..num_members-1 (ids = ranks), this member at
 * rank self, id 0, a copy of layouts; identities empty (the start-up
 * exchange fills them). SPINDLE_ENOMEM.
 */
int view_init_first(struct view *view, uint32_t num_members, uint32_t self,
                    const struct smc_layout *layouts, uint32_t num_subgroups);
/* Frees the layouts; the view is empty afterwards. Safe on a zeroed view. */
void view_clear(struct view *view);

/* Bit mask of the member ids of the view. */
uint64_t view_member_mask(const struct view *view);
/* Rank of member id, or -1 when it is not a member. */
int view_rank_of(const struct view *view, uint32_t id);

/*
 * Quorum of a view: the members of `ranks` are more than half of it, or,
 * with tie_breaker, exactly half including its leader (rank 0). Any two
 * quorums of one view share a member.
 */
bool view_is_quorum(const struct view *view, uint64_t ranks, bool tie_breaker);
/*
 * Partition rule: 0 while the members outside `suspected` (ranks) are a
 * quorum of the view (view_is_quorum); SPINDLE_EMINORITY naming the counts
 * otherwise, and SPINDLE_EREMOVED when this member itself is suspected.
 */
int view_check_majority(const struct view *view, uint64_t suspected, bool tie_breaker);

/*
 * Builds the member list of the view after `current`: its members minus
 * the ranks in removed, in their order, then joiner (VIEW_NO_JOINER: none;
 * its identity is left empty for the caller to set); id current->id + 1. Fills next (members,
 * my_rank; layouts NULL: see view_next_layouts) and how (the transition). SPINDLE_EINVAL when this
 * member is removed or the joiner is already a member.
 */
int view_next(const struct view *current, uint64_t removed, uint32_t joiner, struct view *next,
              struct view_transition *how);

/* The rank of the member of view holding name, or -1. */
int view_rank_of_name(const struct view *view, const char *name);

/* Describes view for the application (the view upcall and the layout
 * function); left/joined point into how (NULL how: nobody left or joined).
 * Pointers stay valid while view and how do. */
void view_describe(const struct view *view, const struct view_transition *how,
                   struct spindle_view_info *out);

/*
 * The layouts of next (view_next filled its members): each subgroup of
 * current keeps its members and senders that survive, renumbered; a joiner
 * becomes a member (not a sender) of every subgroup; then the application's
 * layout function, when given, may change them (every result is checked
 * with smc_layout_validate). Allocates next->layouts. SPINDLE_ENOMEM,
 * SPINDLE_EINVAL naming the view and subgroup the layout function got
 * wrong, or the function's own error.
 */
int view_next_layouts(const struct view *current, const struct view_transition *how,
                      spindle_layout_fn layout, void *layout_ctx, struct view *next);

#endif
