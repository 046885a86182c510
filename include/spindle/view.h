/*
 * libspindle views: what the application learns of membership and how it
 * shapes it.
 *
 * A view is the group's membership at one point of its history: an ordered
 * list of member ids (rank 0 is the leader) and, per subgroup, its members
 * and senders as ranks of that view. With tolerate_failures the group
 * installs a new view when members fail, leave or join; every member that
 * survives a view delivers the same messages in the same order in it
 * (virtual synchrony). The application hears of each view through the
 * view_changed upcall, may reshape subgroups with a layout function, and
 * hands a joiner its state through state_save / state_load
 * (struct spindle_group_options, <spindle/group.h>).
 */
#ifndef SPINDLE_VIEW_H
#define SPINDLE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spindle/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of members in one view (member ids are 0..63). A joiner
 * gets an id that no member of the view holds: the id of a member that
 * failed or left may be given again, so an id in `joined` is a new member
 * whatever the id meant before. */
#define SPINDLE_MAX_MEMBERS 64u

/* Longest member name, its terminating NUL included. */
#define SPINDLE_MEMBER_NAME_MAX 64u

/*
 * A member's persistent identity, which outlives its member id: the name
 * the application gave it (spindle_group_options.member_name; printable
 * ASCII without spaces, unique among the members of a view) and its
 * incarnation, a number that grows each time the process behind the name
 * starts again. Member ids are slots of one view and are given again to
 * later joiners; a name with its incarnation says who held the slot.
 */
struct spindle_member_identity {
    char name[SPINDLE_MEMBER_NAME_MAX];
    uint64_t incarnation;
};

/* A newly installed view, as the view_changed upcall reports it. Arrays
 * are valid until the upcall returns. detected_ns/installed_ns are
 * CLOCK_MONOTONIC times of the failure report and of the installation. */
struct spindle_view_info {
    uint64_t view_id;
    uint32_t num_members;
    const uint32_t *members; /* member ids, in rank order */
    uint32_t my_rank;
    uint32_t num_joined;
    const uint32_t *joined;
    uint32_t num_left;
    const uint32_t *left;
    uint64_t detected_ns;
    uint64_t installed_ns;
    /* Identities in the order of members, joined and left. */
    const struct spindle_member_identity *identities;
    const struct spindle_member_identity *joined_identities;
    const struct spindle_member_identity *left_identities;
};
typedef void (*spindle_view_fn)(void *ctx, const struct spindle_view_info *view);

/*
 * State transfer to a joiner. state_save runs at the member that admits a
 * joiner (the lowest-ranked member of the view it joins), on the library's
 * membership thread (in dispatch mode in spindle_dispatch, on the
 * dispatching thread: docs/DISPATCH.md), right after that member delivered
 * the last message of the view before the joiner's first one: the state it returns is the
 * state as of the joiner's first view. It stores a malloc'ed buffer in
 * *data (the library frees it) and its size in *length, and returns 0 or
 * a negative SPINDLE_E* code (the join then fails). state_load runs at the
 * joiner inside spindle_group_create, before its first delivery. A state
 * has no size limit: it travels in chunks of 1 MiB, two in flight at most,
 * each acknowledged by the joiner (docs/VIEWS.md, "State transfer"); the
 * joiner gathers it whole for state_load.
 */
typedef int (*spindle_state_save_fn)(void *ctx, void **data, size_t *length);
typedef int (*spindle_state_load_fn)(void *ctx, const void *data, size_t length);

/*
 * Streamed state transfer, for states that neither side should hold whole
 * (spindle_group_options.state_write and state_read; either side may use
 * the whole-state calls instead, and the two kinds meet: a saved state
 * reaches state_read in pieces, a written one is gathered for state_load).
 *
 * state_write runs where and when state_save would (with state_ctx; not in
 * dispatch mode: spindle_group_create refuses it there) and hands the state
 * over in pieces of any size with spindle_state_put, which sends it as the
 * joiner takes it: it returns once the piece is sent or queued, blocking
 * while two chunks are in flight. It returns 0, or a negative SPINDLE_E*
 * code, which ends the stream and fails the join, as spindle_state_put's
 * errors do (SPINDLE_ETIMEDOUT or SPINDLE_EUNREACH when the joiner stopped
 * taking, or the code its state_read refused the state with: pass them
 * on).
 *
 * state_read runs at the joiner inside spindle_group_create (with
 * state_ctx), once per chunk, in order: offset is the position of data in
 * the state, last true on the final call (whose length may be 0). A call
 * at offset 0 starts the state over: a join attempt that failed part way
 * is retried from the beginning. It returns 0, or a negative SPINDLE_E*
 * code, which refuses the state (the join fails).
 */
struct spindle_state_out;
typedef int (*spindle_state_write_fn)(void *ctx, struct spindle_state_out *out);
typedef int (*spindle_state_read_fn)(void *ctx, uint64_t offset, const void *data, size_t length,
                                     bool last);
/* Appends length bytes of data to the state state_write is handing over;
 * see above. SPINDLE_EINVAL for a NULL out or data with a length. */
SPINDLE_API int spindle_state_put(struct spindle_state_out *out, const void *data, size_t length);

/* One subgroup of a view as a layout function sees and sets it: members
 * and senders are ranks in the view (0..num_members-1 of spindle_view_info). */
struct spindle_subgroup_layout {
    uint32_t num_members;
    uint32_t members[SPINDLE_MAX_MEMBERS];
    uint32_t num_senders;
    uint32_t senders[SPINDLE_MAX_MEMBERS];
};

/*
 * Layout function: maps each new view to its subgroups. It is called at
 * every member for every view after the first, with the same arguments at
 * every member: view->my_rank is SPINDLE_RANK_ANY and detected_ns and
 * installed_ns are 0, so that it cannot answer differently at different
 * members; it must be a function of its arguments alone, as it may be
 * called more than once for one view id (a change that starts again under
 * a larger set of failed members, a leader admitting a joiner).
 * subgroups[] arrives filled with the default, which it may change: every
 * subgroup keeps its members and senders that are still in the view, and a
 * joiner becomes a member (a receiver, not a sender) of every subgroup.
 * Window size, payload size and mode are fixed at creation. Returns 0, or
 * a negative SPINDLE_E* code, which stops the member.
 */
#define SPINDLE_RANK_ANY 0xffffffffu
typedef int (*spindle_layout_fn)(void *ctx, const struct spindle_view_info *view,
                                 uint32_t num_subgroups, struct spindle_subgroup_layout *subgroups);

#ifdef __cplusplus
}
#endif

#endif
