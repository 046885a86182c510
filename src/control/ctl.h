/*
 * Out-of-band bootstrap exchange: before one-sided writes can flow, members
 * swap small blobs (endpoint addresses, region descriptors) over a channel
 * that needs no transport: a shared directory for processes on one host, or
 * TCP for members on several hosts (host:port per member).
 *
 * ctl_allgather is collective: every member calls it with the same tag
 * and blob length; it returns once every member's blob for that tag is
 * known, or fails with SPINDLE_ETIMEDOUT naming the members still missing,
 * SPINDLE_EUNREACH naming an unreachable member, or SPINDLE_EADDRINUSE
 * naming the port that could not be bound.
 *
 * ctl_allgather is not thread-safe: one thread per struct ctl.
 */
#ifndef SP_TRANSPORT_OOB_H
#define SP_TRANSPORT_OOB_H

#include <stddef.h>
#include <stdint.h>

struct ctl;

struct ctl_member {
    uint32_t id;
    const char *host; /* TCP only */
    uint16_t port;    /* TCP only */
};

/* Local exchange through files in dir (created if missing). */
int ctl_open_dir(const char *dir, uint32_t self_index, uint32_t num_members, struct ctl **out);
/* TCP exchange: listens on members[self_index] and connects to the others.
 * A connection from a member of another group (group_name) is refused. */
int ctl_open_tcp(const char *group_name, const struct ctl_member *members, uint32_t num_members,
                 uint32_t self_index, int timeout_ms, struct ctl **out);
/* all receives num_members * length bytes, member i's blob at i * length. */
int ctl_allgather(struct ctl *ctl, uint32_t tag, const void *mine, size_t length, void *all,
                  int timeout_ms);

/*
 * Exchange among a subset (view changes, barriers of a later view): bit i
 * of a mask is member index i. publish makes blob this member's latest for
 * tag at every member in `to` (self and unreachable members are skipped); a
 * later publish of the same tag replaces it. collect waits up to timeout_ms
 * (0: just look) for the latest blob of tag from every member in `from`
 * other than self, copying member i's to all + i * length and setting bit i
 * of *have (may be NULL) for each present. Returns 0 when all are there,
 * SPINDLE_ETIMEDOUT naming the missing ones, SPINDLE_EPROTO when one sent a
 * blob of another length or broke the format, SPINDLE_EUNREACH when one's
 * connection is gone. Unlike allgather, both are thread-safe.
 */
int ctl_publish(struct ctl *ctl, uint32_t tag, const void *blob, size_t length, uint64_t to);
int ctl_collect(struct ctl *ctl, uint32_t tag, uint64_t from, void *all, size_t length,
                int timeout_ms, uint64_t *have);
void ctl_close(struct ctl *ctl);

/*
 * Joins (TCP exchange only). A member keeps its listening socket open after
 * set-up. A process that wants to join sends one request to any member
 * (ctl_join_ask: connect, request frame, wait for one answer frame,
 * which is malloc'ed into *reply). The member sees it with ctl_join_poll
 * (1 and the request copied out while one is pending, 0 when none; at most
 * one is pending at a time, others are refused) and answers it once with
 * ctl_join_answer, which closes that connection. A joiner given slot
 * self_index (>= num_initial) then opens its own exchange with
 * ctl_open_tcp_joiner: members[0..self_index] lists the current members'
 * addresses (NULL host: absent) and its own; it connects to each, and from
 * then on publish/collect reach it like any member. ctl_add_member
 * records a joiner's address (for answers the membership layer builds).
 */
int ctl_join_ask(const char *group_name, const char *host, uint16_t port, const void *request,
                 size_t length, void **reply, size_t *reply_length, int timeout_ms);
int ctl_join_poll(struct ctl *ctl, int timeout_ms, void *request, size_t capacity, size_t *length);
int ctl_join_answer(struct ctl *ctl, const void *reply, size_t length);
int ctl_open_tcp_joiner(const char *group_name, const struct ctl_member *members,
                        uint32_t num_initial, uint32_t self_index, int timeout_ms,
                        struct ctl **out);
void ctl_add_member(struct ctl *ctl, uint32_t id, const char *host, uint16_t port);
/* collect from the one member `from` into out (TCP only). */
int ctl_collect_one(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t length,
                    int timeout_ms);

#endif
