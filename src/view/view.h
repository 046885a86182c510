/*
 * Views: the membership of a group at one point of its history.
 *
 * A view is (view id, ordered member list, per-subgroup shards). Each member
 * has a stable id, the transport address peers connect to (struct tp_desc)
 * and the host:port of its TCP control channel. Its rank is its index in the
 * member list; the rank also names its SST row. A subgroup is split into one
 * or more shards; each shard lists its members (by member id) and the subset
 * of them that send, in the shard's member order. Delivery order inside a
 * shard is round-robin over that sender list (Spindle 2.1: "in the order the
 * senders appear in the subgroup-membership list").
 *
 * Which members form which shard is decided by a layout function supplied
 * by the application (view_layout_fn); view_layout_single and
 * view_layout_sharded are the defaults. The leader is the lowest-ranked
 * member not suspected of failure. A next view is accepted only when more
 * than half of the previous view's members survive into it (Derecho's
 * partition rule); a member that finds itself on the minority side stops
 * with SPINDLE_EMINORITY rather than form a split brain.
 *
 * Failure and agreement sets are uint64_t bit masks over ranks, which is why
 * a view holds at most VIEW_MAX_MEMBERS (= SST_MAX_ROWS) members.
 *
 * Thread-safety: a struct view is plain data with no internal locking; the
 * view layer builds one on one thread and publishes it. Functions that only
 * read a view may run concurrently with each other.
 *
 * Invariants of a validated view (view_validate): member ids are unique;
 * every shard has >= 1 member, its members are view members without
 * duplicates, and its senders are a subsequence of its members; shards are
 * stored grouped by subgroup in increasing subgroup order.
 */
#ifndef SP_VIEW_VIEW_H
#define SP_VIEW_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sst/sst.h"
#include "transport/transport.h"

#define VIEW_MAX_MEMBERS   SST_MAX_ROWS /* failure masks are uint64_t */
#define VIEW_HOST_MAX      256          /* control-channel host, NUL included */
#define VIEW_MAX_SUBGROUPS 1024
#define VIEW_MAX_SHARDS    4096 /* over all subgroups */

/* One member of a view. */
struct view_member {
    uint32_t id;              /* stable across views, unique in a group */
    uint16_t port;            /* control-channel TCP port */
    char host[VIEW_HOST_MAX]; /* control-channel host name or address */
    struct tp_desc address;   /* transport endpoint address (tp_ops.address) */
};

/* One shard of one subgroup. members/senders hold member ids. */
struct view_shard {
    uint32_t subgroup;    /* subgroup index */
    uint32_t shard_index; /* index of the shard inside its subgroup */
    uint32_t num_members;
    uint32_t num_senders;
    uint32_t members[VIEW_MAX_MEMBERS];
    uint32_t senders[VIEW_MAX_MEMBERS]; /* round-robin order */
};

struct view {
    uint64_t id; /* grows by one per installed view */
    uint32_t num_members;
    struct view_member members[VIEW_MAX_MEMBERS];
    uint32_t num_subgroups;
    uint32_t num_shards;
    uint32_t shards_capacity;
    struct view_shard *shards; /* heap, grouped by subgroup */
};

/*
 * A layout maps next's member list (already filled in) to subgroups and
 * shards by calling view_add_subgroup / view_add_shard on next. prev is the
 * view being replaced (NULL for the first view), so a layout can keep
 * members in the shards they had. Returns 0, SPINDLE_EAGAIN when the view
 * is inadequate (too few members: wait for more joins), or another negative
 * SPINDLE_E* code.
 */
typedef int (*view_layout_fn)(void *ctx, const struct view *prev, struct view *next);

/* Zeroes a view (no members, no shards). */
void view_init(struct view *view, uint64_t id);
/* Frees the shards and re-initialises the view. Safe on an init'ed view. */
void view_clear(struct view *view);
/* Deep copy into dst (which must be init'ed or cleared). SPINDLE_ENOMEM. */
int view_copy(struct view *dst, const struct view *src);

/* Appends a member. SPINDLE_EINVAL on a duplicate id, an empty or too long
 * host, an address longer than TP_DESC_MAX or a full view. */
int view_add_member(struct view *view, uint32_t id, const char *host, uint16_t port,
                    const struct tp_desc *address);

/* Starts a new subgroup; shards added next belong to it. Returns its index
 * or SPINDLE_EINVAL when VIEW_MAX_SUBGROUPS is reached. */
int view_add_subgroup(struct view *view);
/* Adds a shard to the last subgroup. members/senders are member ids; senders
 * must be a subsequence of members. SPINDLE_EINVAL on any inconsistency,
 * SPINDLE_ENOMEM. Returns the shard's index inside its subgroup. */
int view_add_shard(struct view *view, const uint32_t *members, uint32_t num_members,
                   const uint32_t *senders, uint32_t num_senders);
/* Removes every subgroup and shard (members stay). */
void view_clear_layout(struct view *view);

/* Checks every invariant listed above. 0 or SPINDLE_EINVAL with a reason. */
int view_validate(const struct view *view);

/* Rank of member id, or SPINDLE_ENOENT. */
int view_rank_of(const struct view *view, uint32_t id);
/* Number of shards of a subgroup and the index of its first shard in
 * view->shards. SPINDLE_ENOENT for an unknown subgroup. */
int view_subgroup_shards(const struct view *view, uint32_t subgroup, uint32_t *first,
                         uint32_t *count);
/* Shard (subgroup, shard_index), or NULL with SPINDLE_ENOENT recorded. */
const struct view_shard *view_shard_get(const struct view *view, uint32_t subgroup,
                                        uint32_t shard_index);
/* Position of member id in the shard's member list / sender list, or -1. */
int view_shard_member_rank(const struct view_shard *shard, uint32_t id);
int view_shard_sender_rank(const struct view_shard *shard, uint32_t id);

/* Bit mask with one bit per rank of the view. */
uint64_t view_all_mask(const struct view *view);

/* Rank of the leader: the lowest rank not in suspected_mask. SPINDLE_ENOENT
 * when every member is suspected. */
int view_leader(const struct view *view, uint64_t suspected_mask);

/* True when the ranks in mask are more than half of the view's members. */
bool view_is_majority(const struct view *view, uint64_t mask);
/*
 * Partition rule for a member that suspects suspected_mask: 0 while the
 * unsuspected members are a majority of view, SPINDLE_EMINORITY (with the
 * counts in the message) otherwise; the member must then stop.
 */
int view_check_majority(const struct view *view, uint64_t suspected_mask);

/*
 * Members that joined (in next, not in prev) and left (in prev, not in
 * next), as member ids in rank order. Each array needs VIEW_MAX_MEMBERS
 * entries; either may be NULL when not wanted.
 */
void view_diff(const struct view *prev, const struct view *next, uint32_t *joined,
               uint32_t *num_joined, uint32_t *left, uint32_t *num_left);

/*
 * Builds the view that follows prev: prev's members minus the ranks in
 * removed_mask (failed or leaving), in their order, then the joiners in the
 * order given; id prev->id + 1; shards from layout(ctx, prev, next) (the
 * default single layout when layout is NULL). Fails with SPINDLE_EMINORITY
 * when fewer than a majority of prev survive, SPINDLE_EINVAL on a joiner
 * whose id is already present, or whatever the layout returns. next must be
 * init'ed or cleared; it is cleared on failure.
 */
int view_make_next(const struct view *prev, uint64_t removed_mask,
                   const struct view_member *joiners, uint32_t num_joiners, view_layout_fn layout,
                   void *layout_ctx, struct view *next);

/* Applies a layout to a view whose members are set (prev may be NULL). */
int view_apply_layout(struct view *next, const struct view *prev, view_layout_fn layout,
                      void *layout_ctx);

/* ---- default layouts ------------------------------------------------- */

/* One subgroup, one shard, every member, every member a sender. ctx unused.
 * SPINDLE_EAGAIN for a view with no members. */
int view_layout_single(void *ctx, const struct view *prev, struct view *next);

/* ctx for view_layout_sharded. */
struct view_sharding {
    uint32_t num_shards;  /* N >= 1 */
    uint32_t shard_size;  /* K >= 1 */
    uint32_t num_senders; /* first num_senders members of each shard send; 0 = all */
};

/*
 * One subgroup of N shards of K members. The first view deals ranks
 * round-robin (rank r goes to shard r % N); later views keep every
 * surviving member in its shard and fill vacancies with unassigned members
 * in rank order, so state moves only to newcomers. Members beyond N*K are
 * spares in no shard. SPINDLE_EAGAIN when fewer than N*K members exist.
 */
int view_layout_sharded(void *ctx, const struct view *prev, struct view *next);

#endif
