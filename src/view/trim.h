/*
 * Ragged-edge trim: what the survivors of one subgroup deliver when a view
 * ends, and what surviving senders resend in the next view.
 *
 * When a member fails the subgroup wedges (no new sends, receive counters
 * frozen). Each survivor's SST row then shows, per sender s, received[s]:
 * how many of s's messages it holds. Messages of one sender arrive in FIFO
 * order (one ring per sender, counters only grow; Spindle 2.3), so a
 * survivor holding received[s] messages holds exactly messages
 * 0..received[s]-1 of s. Global order is round-robin (Spindle 2.1): with S
 * senders, sequence number n = round * S + sender_rank is message `round`
 * of sender `sender_rank`.
 *
 * During the view a member passes position (s, r) in round-robin order
 * when it holds it and it is a null, or it is an application message that
 * every member holds (smc_predicate.c: smc_deliver_range). A null need
 * not be held by the others: at light load that saves the round of
 * acknowledgements of the nulls a message of a later rank waited for. So
 * a member's delivered_num may pass positions another survivor lacks
 * (nulls), and the cleanup cannot be "deliver a gap-free prefix".
 *
 * The computation (trim_compute, run by every survivor over the same
 * counts, view_install.c), Derecho's cleanup
 * (MulticastGroup::deliver_messages_upto):
 *   trim[s]   = min over survivors of received[s]
 *   deliver   in sequence order, every application message (s, r) with
 *             r < trim[s]; skip every position at or beyond its sender's
 *             trim (smc_group_deliver_trim)
 *   end       = one past the last position within a trim,
 *               max over s of (trim[s] - 1) * S + s + 1 (delivered_total;
 *               every survivor's delivered_num ends there)
 *   d[s]      = trim[s]: positions of s delivered or passed as nulls
 *
 * Why this is safe:
 *  1. Every survivor holds every position it must deliver: r < trim[s]
 *     <= that survivor's received[s].
 *  2. All survivors deliver the same messages in the same order, because
 *     all of them compute the trim from the same counts: each holds every
 *     survivor's blob and commitment for the same suspected set before it
 *     acts (view_exchange.c). (Derecho instead has the leader write the
 *     ragged trim to the SST and members echo it before acting; a new
 *     leader that takes over mid-cleanup must adopt a trim any member
 *     already holds.) A position is a null or a message for everyone (its
 *     sender decided), so the same counts name the same messages.
 *  3. Nothing already delivered is left out or delivered twice: a member
 *     delivered (s, r) during the view only once every member, the failed
 *     ones included, held it, so r < trim[s]; and it passed a position
 *     only in order, so every message within a trim below its
 *     delivered_num was delivered by it, and the cleanup delivers exactly
 *     those at or above it. What a survivor passed beyond `end` was nulls
 *     it held. trim_compute checks, when given the survivors' delivered
 *     counts, that none passed a position it lacks (SPINDLE_EPROTO).
 *  4. A failed sender's message is delivered by all survivors (within its
 *     trim) or by none (beyond it: dropped, never resent).
 *  5. A surviving sender s resends its messages d[s], d[s]+1, ... in FIFO
 *     order in the next view (smc_group_undelivered gives them after the
 *     trim was delivered: its own messages below trim[s] were delivered
 *     and none beyond); so every message of a surviving sender is
 *     delivered exactly once and in its sender order. Null messages
 *     (Spindle 3.3) occupy positions like any other and are not resent.
 *
 * What this changes in the guarantees: before, a view's delivered stream
 * was a gap-free prefix of its round-robin order, and messages of any
 * sender after the first gap were resent (surviving senders) or dropped
 * (failed senders). Now a gap in one sender's positions no longer cuts
 * off the others' messages after it: more of the view is delivered in it,
 * the delivered sequence is round-robin order restricted to the delivered
 * messages (agreed by every survivor), and a surviving sender's message
 * beyond its trim is resent in the next view even when a later-sequenced
 * message of another sender was delivered in this one (as in Derecho).
 *
 * Thread-safety: pure functions over caller-owned data.
 */
#ifndef SP_VIEW_TRIM_H
#define SP_VIEW_TRIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sst/sst.h"

#define TRIM_MAX_SENDERS SST_MAX_ROWS
/* Counts above this are rejected so that trim * S + s never overflows. */
#define TRIM_MAX_COUNT (1ull << 48)

/* One subgroup's wedged state, as the survivors' blobs report it. */
struct trim_input {
    uint32_t num_members; /* subgroup members, in the subgroup's member order */
    uint32_t num_senders; /* S, in round-robin order */
    /* sender_row[s]: the member index of sender s (to tell whether the
     * sender itself survives). */
    const uint32_t *sender_row;
    /* received[row * num_senders + s]: messages of sender s that row holds.
     * Rows of failed members are ignored. */
    const uint64_t *received;
    uint64_t failed_mask; /* bit row set: that member failed */
    /* Optional (may be NULL): delivered[row] = how many sequence numbers
     * row had passed when it wedged; checked against row's own counts
     * (point 3 above). */
    const uint64_t *delivered;
};

struct trim_result {
    uint32_t num_senders;
    uint32_t num_survivors;
    /* One past the last position within a trim: every survivor's
     * delivered_num after the cleanup. */
    uint64_t delivered_total;
    uint64_t trim[TRIM_MAX_SENDERS];             /* min over survivors of received */
    uint64_t sender_delivered[TRIM_MAX_SENDERS]; /* d[s] = trim[s]: positions of s passed */
    uint64_t sender_known[TRIM_MAX_SENDERS];     /* max over survivors of received */
    bool sender_failed[TRIM_MAX_SENDERS];
};

/*
 * Computes the trim from the survivors' received counts.
 * SPINDLE_EINVAL on malformed input (no senders array, counts above
 * TRIM_MAX_COUNT, a sender row outside the subgroup, no survivor),
 * SPINDLE_EPROTO when a survivor's delivered count passes a position its
 * own received counts lack (the counts cannot be the wedged state).
 */
int trim_compute(const struct trim_input *in, struct trim_result *out);

#endif
