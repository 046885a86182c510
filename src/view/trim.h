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
 * The computation (trim_compute, run by every survivor over the same
 * counts, view_install.c):
 *   trim[s]   = min over survivors of received[s]
 *   N         = min over s of (trim[s] * S + s)
 *   deliver   sequence numbers 0 .. N-1 (N = delivered_total)
 *   d[s]      = messages of s in that prefix = ceil((N - s) / S) if N > s, else 0
 * Sequence N itself is message trim[s*] of the minimising sender s*, which
 * some survivor lacks; round-robin order forbids delivering anything after
 * it in this view, so delivery stops there.
 *
 * Why this is safe:
 *  1. Every survivor holds every message it must deliver: n = r*S + s < N
 *     <= trim[s]*S + s gives r < trim[s] <= that survivor's received[s].
 *  2. All survivors deliver the same prefix, because all of them compute
 *     the trim from the same counts: each holds every survivor's blob and
 *     commitment for the same suspected set before it acts
 *     (view_exchange.c). (Derecho instead has the leader write the ragged
 *     trim to the SST and members echo it before acting; a new leader that
 *     takes over mid-cleanup must adopt a trim any member already holds.)
 *  3. Nothing already delivered is taken back: a member delivered n during
 *     the view only once n was stable, i.e. every member, the failed ones
 *     included, had received every message up to n; so every survivor's
 *     received[s] covers them and N > n. trim_compute checks this when
 *     given the survivors' delivered counts (SPINDLE_EPROTO otherwise).
 *  4. A failed sender's message is delivered by all survivors (sequence
 *     < N) or by none (>= N: dropped, never resent).
 *  5. A surviving sender s resends its messages d[s], d[s]+1, ... in FIFO
 *     order in the next view (smc_group_undelivered gives them after the
 *     trim was delivered); messages below d[s] were delivered here, so
 *     every message of a surviving sender is delivered exactly once and in
 *     its sender order. Null messages (Spindle 3.3) occupy positions like
 *     any other and are simply not resent.
 *
 * Derecho's cleanup (MulticastGroup::deliver_messages_upto) instead
 * delivers, in sequence order, every message within its sender's trim and
 * skips positions beyond a trim. That is also uniform across survivors; we
 * stop at the first missing position so a view's delivered stream is
 * always a gap-free prefix of its round-robin order, at the cost of
 * resending (surviving senders) or dropping (failed senders) messages that
 * lie after the gap.
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
     * row had delivered when it wedged; used to check point 3 above. */
    const uint64_t *delivered;
};

struct trim_result {
    uint32_t num_senders;
    uint32_t num_survivors;
    uint64_t delivered_total;        /* survivors deliver sequence numbers [0, delivered_total) */
    uint64_t trim[TRIM_MAX_SENDERS]; /* min over survivors of received */
    uint64_t sender_delivered[TRIM_MAX_SENDERS]; /* d[s]: messages of s inside the prefix */
    uint64_t sender_known[TRIM_MAX_SENDERS];     /* max over survivors of received */
    bool sender_failed[TRIM_MAX_SENDERS];
};

/*
 * Computes the trim from the survivors' received counts.
 * SPINDLE_EINVAL on malformed input (no senders array, counts above
 * TRIM_MAX_COUNT, a sender row outside the subgroup, no survivor),
 * SPINDLE_EPROTO when a survivor's delivered count exceeds the prefix
 * (the received counts cannot be the wedged state).
 */
int trim_compute(const struct trim_input *in, struct trim_result *out);

#endif
