/*
 * Ragged-edge trim: what the survivors of one shard deliver when a view
 * ends, and what surviving senders resend in the next view.
 *
 * When a member fails the shard wedges (no new sends, receive counters
 * frozen). Each survivor's SST row then shows, per sender s, received[s]:
 * how many of s's messages it holds. Messages of one sender arrive in FIFO
 * order (one ring per sender, counters only grow; Spindle 2.3), so a
 * survivor holding received[s] messages holds exactly messages
 * 0..received[s]-1 of s. Global order is round-robin (Spindle 2.1): with S
 * senders, sequence number n = round * S + sender_rank is message `round`
 * of sender `sender_rank`.
 *
 * The computation (leader side, trim_compute):
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
 *  2. All survivors deliver the same prefix, because all of them apply the
 *     same trim vector, which the leader publishes (Derecho: the leader
 *     writes the ragged trim to the SST and members echo it before acting;
 *     a new leader that takes over mid-cleanup must adopt a trim any member
 *     already holds instead of computing a new one).
 *  3. Nothing already delivered is taken back: a member delivered n during
 *     the view only once n was stable, i.e. every member, the failed ones
 *     included, had received every message up to n; so every survivor's
 *     received[s] covers them and N > n. trim_compute checks this when
 *     given the survivors' delivered counts (SPINDLE_EPROTO otherwise).
 *  4. A failed sender's message is delivered by all survivors (sequence
 *     < N) or by none (>= N: dropped, never resent).
 *  5. A surviving sender s resends its messages d[s], d[s]+1, ... in FIFO
 *     order in the next view; messages below d[s] were delivered here, so
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

#include "view/view.h"

#define TRIM_MAX_SENDERS VIEW_MAX_MEMBERS
/* Counts above this are rejected so that trim * S + s never overflows. */
#define TRIM_MAX_COUNT (1ull << 48)

/* One shard's wedged state, as the leader reads it from the SST. */
struct trim_input {
    uint32_t num_members; /* shard members = SST rows of the shard, shard order */
    uint32_t num_senders; /* S, in round-robin order */
    /* sender_row[s]: the shard member row of sender s (to tell whether the
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

/* A message named by its sender rank and its index in that sender's FIFO. */
struct trim_msg {
    uint32_t sender;
    uint64_t index;
};

/*
 * Leader side: computes the trim from the survivors' received counts.
 * SPINDLE_EINVAL on malformed input (no senders array, counts above
 * TRIM_MAX_COUNT, a sender row outside the shard, no survivor),
 * SPINDLE_EPROTO when a survivor's delivered count exceeds the prefix
 * (the received counts cannot be the wedged state).
 */
int trim_compute(const struct trim_input *in, struct trim_result *out);

/*
 * Follower side: derives delivered_total and sender_delivered from a trim
 * vector received from the leader (sender_failed and sender_known are left
 * false / equal to the trim). SPINDLE_EINVAL on too many senders or counts
 * above TRIM_MAX_COUNT.
 */
int trim_from_vector(uint32_t num_senders, const uint64_t *trim, struct trim_result *out);

/* Last sequence number delivered by the trim, -1 when none. */
static inline int64_t trim_last_seq(const struct trim_result *result)
{
    return (int64_t)result->delivered_total - 1;
}

/* Sender and index of sequence number seq under S senders (S >= 1). */
static inline struct trim_msg trim_seq_message(uint32_t num_senders, uint64_t seq)
{
    struct trim_msg msg = {(uint32_t)(seq % num_senders), seq / num_senders};
    return msg;
}

/*
 * Resend range of a surviving sender that has sent `sent` messages: its
 * messages [*first, sent) were not delivered and are resent in order.
 * SPINDLE_EINVAL for an unknown or failed sender, or sent below what the
 * trim says was delivered.
 */
int trim_resend_range(const struct trim_result *result, uint32_t sender, uint64_t sent,
                      uint64_t *first, uint64_t *count);

/*
 * All messages to resend, given each sender's sent count (sent[s], failed
 * senders ignored), in their original global order (increasing old sequence
 * number). Stores up to cap entries; *count receives the total.
 * SPINDLE_EMSGSIZE when cap is too small (*count still set),
 * SPINDLE_EINVAL as for trim_resend_range.
 */
int trim_resend_list(const struct trim_result *result, const uint64_t *sent, struct trim_msg *out,
                     size_t cap, size_t *count);

#endif
