/*
 * The SMC predicate: one recurrent predicate per smc_group, evaluated by the
 * engine's single predicate thread for every subgroup (Spindle 2.4). Its
 * trigger runs, per subgroup, the send, receive, null-send and delivery
 * steps in that order, queueing pushes; the engine posts them when the lock
 * is released (Spindle 3.4), one batch and one doorbell per peer.
 *
 * Why one trigger for all steps: sent_num is a guard over ring data, and a
 * queued push reads its source when it is posted. Keeping every write of
 * sent_num inside one trigger, after the ring pushes it covers, means no
 * queued counter push can ever expose a position whose data is still
 * unqueued.
 *
 * Modelled in models/smc.pml (inline trigger: one step per function here).
 */
#include <string.h>

#include "smc/smc_impl.h"
#include "util/log.h"

/*
 * A peer whose row or ring breaks the protocol (a buggy or hostile
 * member: a slot longer than max_payload, a counter that goes back or
 * past SMC_COUNTER_MAX) is failed like a crashed one, with the reason
 * logged once; the view change removes it. Nothing it wrote is read past
 * its bounds, and the checks hold under asynchrony: a row's counters only
 * grow in every interleaving, as each is one aligned 8-byte word its
 * owner writes with increasing values.
 */
static void fail_liar(struct smc_group *group, const struct smc_subgroup *sub, uint32_t row,
                      const char *what, unsigned long long value)
{
    if (sst_row_failed(group->table, row))
        return;
    sp_log(SP_LOG_WARN, "smc",
           "subgroup %u: the member of row %u broke the protocol (%s %llu): failed", sub->index,
           row, what, value);
    sst_table_suspect(group->table, row, SPINDLE_EPROTO);
}

/* sent_num of a sender: it only grows and stays below SMC_COUNTER_MAX;
 * otherwise the sender is failed and its last good value kept. */
static uint64_t read_sent(struct smc_group *group, struct smc_subgroup *sub,
                          struct smc_sender *sender)
{
    uint64_t sent = sst_read_u64(group->table, sender->row, sub->sent_offset);
    if (sent >= sender->sent_seen && sent <= SMC_COUNTER_MAX) {
        sender->sent_seen = sent;
        return sent;
    }
    sender->lied = true;
    fail_liar(group, sub, sender->row,
              sent > SMC_COUNTER_MAX ? "sent_num" : "sent_num going back to",
              (unsigned long long)sent);
    return sender->sent_seen;
}

/* held_by_all[s] = min over members m of received_num[m][s]: a message of
 * sender s at a round below it is held by every member (stable, Spindle
 * 2.1), and may be delivered. */
static void held_by_all(struct smc_group *group, const struct smc_subgroup *sub,
                        uint64_t *held_by_all)
{
    uint32_t senders = sub->layout.num_senders;
    for (uint32_t s = 0; s < senders; s++)
        held_by_all[s] = UINT64_MAX;
    for (uint32_t m = 0; m < sub->layout.num_members; m++) {
        uint32_t row = sub->layout.members[m];
        for (uint32_t s = 0; s < senders; s++) {
            uint64_t received = sst_read_u64(group->table, row, sub->received_offset + 8 * s);
            /* Nobody receives past SMC_COUNTER_MAX, nor more of my
             * positions than I published (others read sent_num from my
             * row, written before any push of it). */
            bool mine = (int)s == sub->my_sender_rank;
            if (received > SMC_COUNTER_MAX || (mine && received > sub->published)) {
                fail_liar(group, sub, row,
                          mine ? "received_num of this member's positions" : "received_num",
                          (unsigned long long)received);
                received = 0; /* holds delivery back until the change removes it */
            }
            if (received < held_by_all[s])
                held_by_all[s] = received;
        }
    }
}

/* The first sequence number this member lacks: min over senders s of
 * recv_position[s] * S + s. Nothing at or past it can be passed here. */
static uint64_t first_missing(const struct smc_subgroup *sub)
{
    uint32_t senders = sub->layout.num_senders;
    uint64_t bound = UINT64_MAX;
    for (uint32_t s = 0; s < senders; s++) {
        uint64_t missing = sub->senders[s].recv_position * senders + s;
        if (missing < bound)
            bound = missing;
    }
    return bound;
}

/* True when the delivery step can pass the next position (smc_deliver_range
 * says when). */
static bool can_pass(struct smc_group *group, const struct smc_subgroup *sub)
{
    /* Every row is read (and checked) whatever the next position holds,
     * so a lying row is found while the subgroup is idle too. */
    uint64_t all[SST_MAX_ROWS];
    held_by_all(group, sub, all);
    uint32_t senders = sub->layout.num_senders;
    if (senders == 0 || sub->delivered >= first_missing(sub))
        return false;
    uint32_t s = (uint32_t)(sub->delivered % senders);
    uint64_t round = sub->delivered / senders;
    const struct smc_sender *sender = &sub->senders[s];
    uint32_t index = (uint32_t)(sender->deliv_app % sub->layout.window_size);
    if (sender->deliv_app >= sender->recv_app || sender->app_position[index] != round)
        return true; /* a null this member holds */
    return round < all[s];
}

/*
 * Persistence frontier (docs/LOGS.md "Persistence frontiers"). A member's
 * persisted_num can never pass what it delivered, nor what it holds: so
 * no honest column passes this member's first unpublished position
 * (published * S + my sender rank; others only hold what was published),
 * however its writes are ordered against the owner's other counters (a
 * NIC may read a queued write's source late). A column past that bound or
 * going back fails its owner, whose last good value is kept (it holds the
 * frontier back until the view change removes it). The frontier is the
 * minimum of every column and this member's own, which is at most what it
 * delivered, below the first sequence number it misses (min over senders
 * s of received[s] * S + s): so a peer's column counts only up to that.
 * An honest peer's column may be above it (it passes nulls that it holds
 * and this member does not yet, smc_deliver_range): such a column is
 * clamped, not taken for a lie. Own column: read from local state.
 */
static uint64_t global_frontier(struct smc_group *group, struct smc_subgroup *sub)
{
    uint64_t frontier = sub->persisted;
    uint64_t bound = first_missing(sub);
    uint64_t most = sub->my_sender_rank >= 0
                        ? sub->published * sub->layout.num_senders + (uint64_t)sub->my_sender_rank
                        : SMC_COUNTER_MAX;
    for (uint32_t m = 0; m < sub->layout.num_members; m++) {
        uint32_t row = sub->layout.members[m];
        if (row == group->my_row)
            continue;
        uint64_t column = sst_read_u64(group->table, row, sub->persisted_offset);
        if (column > most || column < sub->column_seen[m]) {
            fail_liar(group, sub, row,
                      column > most ? "persisted_num past what it can have delivered"
                                    : "persisted_num going back to",
                      (unsigned long long)column);
            column = sub->column_seen[m];
        }
        sub->column_seen[m] = column;
        if (column > bound)
            column = bound;
        if (column < frontier)
            frontier = column;
    }
    return frontier;
}

/* True when this member's column can move (the log made a mark durable)
 * or the global frontier has news to report. */
static bool persist_has_work(struct smc_group *group, struct smc_subgroup *sub)
{
    if (sub->mark_count > 0 && sub->marks[sub->mark_head].position <=
                                   group->options.persist_durable(group->options.deliver_ctx))
        return true;
    if (__atomic_load_n(&group->frontier_held, __ATOMIC_ACQUIRE))
        return false;
    return global_frontier(group, sub) > sub->frontier_reported;
}

static bool subgroup_has_work(struct smc_group *group, struct smc_subgroup *sub)
{
    if (sub->my_sender_rank >= 0) {
        if (__atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE) != sub->pushed)
            return true;
        bool reserver = __atomic_load_n(&sub->reserve_waiting, __ATOMIC_ACQUIRE);
        bool room = __atomic_load_n(&sub->room_wanted, __ATOMIC_ACQUIRE);
        bool waiting = reserver || room;
        if ((reserver && smc_room_for_waiter(group, sub)) || (room && smc_slot_free(group, sub)))
            return true;
        if (waiting && __atomic_load_n(&sub->posted_mark, __ATOMIC_RELAXED) != sub->pushed)
            return true; /* a pass marks the last pass's slots posted */
    }
    if (sub->my_member_rank < 0 || sub->layout.num_senders == 0)
        return false;
    if (sub->persists && persist_has_work(group, sub))
        return true;
    /* Held at the delivery bound with no room made since: it waits, and
     * whoever makes room wakes the engine. An unordered subgroup is held
     * in its receive step, so what arrived meanwhile waits too. */
    bool held = sub->held && group->options.deliver_progress != NULL &&
                group->options.deliver_progress(group->options.deliver_ctx) == sub->held_token;
    bool receive_held = held && sub->layout.mode == SPINDLE_MODE_UNORDERED;
    for (uint32_t s = 0; s < sub->layout.num_senders && !receive_held; s++)
        if (!sub->senders[s].lied &&
            read_sent(group, sub, &sub->senders[s]) > sub->senders[s].recv_position)
            return true;
    if (held)
        return false;
    return sub->layout.mode == SPINDLE_MODE_ATOMIC && can_pass(group, sub);
}

bool smc_predicate(void *ctx)
{
    struct smc_group *group = ctx;
    if (__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE))
        return false;
    if (__atomic_load_n(&group->slow_row, __ATOMIC_ACQUIRE) >= 0)
        return true;
    for (uint32_t g = 0; g < group->num_subgroups; g++)
        if (subgroup_has_work(group, &group->subgroups[g]))
            return true;
    return false;
}

static void push(struct smc_group *group, struct smc_subgroup *sub, uint32_t offset,
                 uint32_t length)
{
    if (sub->num_peers > 0)
        sst_push(group->table, offset, length, sub->peers, sub->num_peers);
}

/* Writes sent_num/null_num and pushes them in one write, after the ring
 * data they cover (T2). */
static void publish(struct smc_group *group, struct smc_subgroup *sub, uint64_t sent)
{
    if (sent == sub->published)
        return;
    sub->published = sent;
    sst_write_u64(group->table, sub->null_offset, sub->nulls);
    sst_write_u64(group->table, sub->sent_offset, sent);
    push(group, sub, sub->sent_offset, 16);
}

/* Pushes bytes [offset, offset + length) of my ring in sub from my side
 * region to the same place of my ring in every peer's side region. */
static void push_ring(struct smc_group *group, struct smc_subgroup *sub, uint64_t offset,
                      uint32_t length)
{
    if (sub->num_peers == 0)
        return;
    uint64_t remote[SST_MAX_ROWS];
    for (uint32_t i = 0; i < sub->num_peers; i++)
        remote[i] = sub->ring_at_peer[i] + offset;
    uint64_t local = sub->ring_at[sub->my_sender_rank] + offset;
    sst_push_side(group->table, local, length, sub->peers, remote, sub->num_peers);
}

/* Unused bytes of ring slots that one write may carry across rather than
 * starting another. Spindle's send batching covers a run of ready slots
 * with one write per peer; when the messages are much smaller than the
 * slots (max_payload sized for the largest), such a write would be mostly
 * the slots' unused tails: past this gap the run is split into several
 * writes, which still go to the peer in one post, behind one doorbell
 * (sst_unlock_and_post). Messages that fill their slots give one write,
 * as before. */
#define SMC_PUSH_GAP 1024u

/* Pushes ring slots [first, first + count) (no wrap), each up to the end
 * of its message's data. */
static void push_slots(struct smc_group *group, struct smc_subgroup *sub, uint64_t first,
                       uint32_t count)
{
    uint32_t window = sub->layout.window_size;
    uint32_t start = (uint32_t)(first % window);
    const uint8_t *ring = smc_ring(group, sub, (uint32_t)sub->my_sender_rank);
    uint64_t begin = (uint64_t)start * sub->slot_size, end = begin;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t offset = (uint64_t)(start + i) * sub->slot_size;
        uint64_t header =
            __atomic_load_n((const uint64_t *)(const void *)(ring + offset), __ATOMIC_ACQUIRE);
        uint32_t length = (uint32_t)(header & SMC_LENGTH_MASK);
        if (offset - end > SMC_PUSH_GAP) {
            push_ring(group, sub, begin, (uint32_t)(end - begin));
            begin = offset;
        }
        end = offset + SMC_HEADER_SIZE + ((length + 7u) & ~7u);
    }
    push_ring(group, sub, begin, (uint32_t)(end - begin));
}

static smc_header_hook_fn send_header;

/* Used by tests only (tests/view/test_view_change.c). */
// cppcheck-suppress unusedFunction
void smc_test_send_header(smc_header_hook_fn fn)
{
    send_header = fn;
}

/* Gives the committed message app (not yet pushed) the next position and
 * writes its slot header. The position is taken here, not at commit: the
 * predicate may have sent nulls since (Spindle 3.3), and nulls are only
 * ever assigned when nothing committed is unpushed (null_step), so
 * positions still follow commit order. */
static void assign_position(struct smc_group *group, struct smc_subgroup *sub, uint64_t app)
{
    uint32_t index = (uint32_t)(app % sub->layout.window_size);
    uint64_t position = sub->next_position++;
    sub->slot_position[index] = position;
    uint8_t *header =
        smc_ring(group, sub, (uint32_t)sub->my_sender_rank) + (size_t)index * sub->slot_size;
    uint64_t word = smc_header(position, sub->slot_length[index]);
    if (send_header != NULL)
        word = send_header(sub->index, position, word);
    __atomic_store_n((uint64_t *)(void *)header, word, __ATOMIC_RELEASE);
}

/* Send step (Spindle 3.2): every ready contiguous slot in one post per peer
 * (one write, or a few when the messages leave long unused tails, two
 * runs when the ring wraps), then the counter; baseline: one message. */
static void send_step(struct smc_group *group, struct smc_subgroup *sub)
{
    uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE);
    if (committed == sub->pushed)
        return;
    uint32_t window = sub->layout.window_size;
    uint64_t count = group->options.batching ? committed - sub->pushed : 1;
    uint64_t first = sub->pushed;
    for (uint64_t i = 0; i < count; i++)
        assign_position(group, sub, first + i);
    uint32_t to_ring_end = window - (uint32_t)(first % window);
    uint32_t head = count < to_ring_end ? (uint32_t)count : to_ring_end;
    push_slots(group, sub, first, head);
    if (count > head)
        push_slots(group, sub, first + head, (uint32_t)(count - head));
    /* Release: slot_holder reads the positions of pushed slots. */
    __atomic_store_n(&sub->pushed, first + count, __ATOMIC_RELEASE);
    group->stats.send_batches[smc_bucket(count)]++;
    group->stats.send_batch_count++;
    group->stats.send_batch_messages += count;
    /* Every position below the next one is pushed or a null; the next
     * unpushed message (if any) will take it. */
    publish(group, sub, sub->next_position);
}

/* What sub may deliver now (smc_options.deliver_room; SIZE_MAX without
 * a bound), and in *token the progress token read before it. */
static size_t delivery_room(struct smc_group *group, const struct smc_subgroup *sub,
                            uint64_t *token)
{
    *token = 0;
    if (group->options.deliver_room == NULL)
        return SIZE_MAX;
    /* The token first: room that grows after it changes it too. */
    if (group->options.deliver_progress != NULL)
        *token = group->options.deliver_progress(group->options.deliver_ctx);
    return group->options.deliver_room(group->options.deliver_ctx, sub->index);
}

static smc_hold_hook_fn hold_receive;

/* Used by tests only (tests/view/test_view_join_unordered.c). */
// cppcheck-suppress unusedFunction
void smc_test_hold_receive(smc_hold_hook_fn fn)
{
    hold_receive = fn;
}

static smc_ack_hook_fn ack_hook;

/* Used by tests only (tests/view/test_view_change.c). */
// cppcheck-suppress unusedFunction
void smc_test_ack_value(smc_ack_hook_fn fn)
{
    ack_hook = fn;
}

/* Receives what arrived from one sender; returns the application messages
 * taken. Unordered subgroups hand them to the batch at once. */
static uint32_t receive_sender(struct smc_group *group, struct smc_subgroup *sub, uint32_t s,
                               uint32_t *batched, size_t *room)
{
    struct smc_sender *sender = &sub->senders[s];
    if (sender->lied || (hold_receive != NULL && hold_receive(sub->index, sender->row)))
        return 0;
    uint64_t sent = read_sent(group, sub, sender);
    uint32_t window = sub->layout.window_size;
    uint8_t *ring = smc_ring(group, sub, s);
    uint32_t taken = 0;
    while (sender->recv_position < sent) {
        uint32_t index = (uint32_t)(sender->recv_app % window);
        uint8_t *slot = ring + (size_t)index * sub->slot_size;
        uint64_t header = __atomic_load_n((uint64_t *)(void *)slot, __ATOMIC_ACQUIRE);
        struct smc_slot_header decoded;
        if (smc_slot_header_decode(header, sender->recv_position, sub->layout.max_payload,
                                   sub->slot_size, &decoded) != 0) {
            /* The upcall would read past the slot: never taken. */
            sender->lied = true;
            fail_liar(group, sub, sender->row, "slot length",
                      (unsigned long long)(header & SMC_LENGTH_MASK));
            break;
        }
        bool here = decoded.kind == SMC_SLOT_MESSAGE;
        uint32_t length = decoded.length;
        bool delivers = sub->layout.mode == SPINDLE_MODE_UNORDERED && sender->skip == 0;
        if (here && delivers) {
            size_t cost = (size_t)group->options.deliver_overhead + length;
            if (cost > *room) {
                /* Bounded delivery: it waits in the ring, unacknowledged,
                 * holding its sender's window. */
                group->stats.deliveries_held++;
                break;
            }
            *room -= cost;
        }
        if (here) {
            sender->app_position[index] = sender->recv_position;
            sender->app_length[index] = length;
            if (sub->layout.mode == SPINDLE_MODE_UNORDERED && sender->skip > 0) {
                /* A resend of what this member delivered in the last view
                 * (smc_group_skip): taken, not delivered again (an own one
                 * counts as delivered for flush). */
                sender->skip--;
                if (sender->row == group->my_row)
                    __atomic_add_fetch(&sub->delivered_own, 1, __ATOMIC_RELEASE);
            } else if (sub->layout.mode == SPINDLE_MODE_UNORDERED) {
                struct spindle_message *msg = &sub->batch[(*batched)++];
                msg->subgroup = sub->index;
                msg->sender_id = sender->row;
                msg->sender_index = sender->recv_app;
                msg->seq = sender->recv_position * sub->layout.num_senders + s;
                msg->data = slot + SMC_HEADER_SIZE;
                msg->length = length;
            }
            sender->recv_app++;
            sender->recv_position++;
            taken++;
        } else {
            /* The next application message sits later (or is not yet
             * published): everything before it is null (Spindle 3.3). */
            uint64_t next_app =
                decoded.kind == SMC_SLOT_LATER ? sender->recv_position + decoded.distance : sent;
            sender->recv_position = next_app < sent ? next_app : sent;
        }
        if (!group->options.batching)
            break;
    }
    return taken;
}

static void deliver_batch(struct smc_group *group, struct smc_subgroup *sub, uint32_t count)
{
    if (count == 0)
        return;
    group->stats.messages_delivered += count;
    group->stats.delivery_batches[smc_bucket(count)]++;
    group->stats.delivery_batch_count++;
    group->stats.delivery_batch_messages += count;
    if (group->options.deliver != NULL)
        group->options.deliver(group->options.deliver_ctx, sub->batch, count);
    if (sub->my_sender_rank >= 0) {
        uint64_t own = 0;
        for (uint32_t i = 0; i < count; i++)
            own += sub->batch[i].sender_id == group->my_row;
        /* smc_flush_persistent reads delivered_through once it sees its
         * own messages delivered (delivered_num in the row is written
         * only after this). */
        if (sub->persists)
            __atomic_store_n(&sub->delivered_through, sub->delivered, __ATOMIC_RELEASE);
        if (own > 0)
            __atomic_add_fetch(&sub->delivered_own, own, __ATOMIC_RELEASE);
    }
}

/* Receive step (Spindle 3.2): all arrived messages of every sender, one
 * acknowledgement (batching) or one per message (baseline). An unordered
 * subgroup delivers them first: its upcall reads them in the ring, and an
 * acknowledgement lets their sender reuse the slots (slot_holder counts
 * what every member received there). */
static void receive_senders(struct smc_group *group, struct smc_subgroup *sub, uint32_t first,
                            uint32_t end, bool set_held)
{
    uint32_t taken = 0, batched = 0;
    uint64_t moved = 0;
    /* Unordered subgroups deliver on receipt: a bound on delivery
     * (smc_options.deliver_room) bounds what is taken. */
    bool bounded = sub->layout.mode == SPINDLE_MODE_UNORDERED;
    uint64_t held_before = group->stats.deliveries_held;
    uint64_t token = 0;
    size_t room = bounded ? delivery_room(group, sub, &token) : SIZE_MAX;
    for (uint32_t s = first; s < end; s++) {
        uint64_t before = sub->senders[s].recv_position;
        taken += receive_sender(group, sub, s, &batched, &room);
        if (sub->senders[s].recv_position != before)
            moved |= 1ull << s;
    }
    bool held = group->stats.deliveries_held != held_before;
    if (bounded && (set_held || held)) {
        sub->held = held;
        sub->held_token = token;
    }
    if (taken > 0) {
        group->stats.receive_batches[smc_bucket(taken)]++;
        group->stats.receive_batch_count++;
        group->stats.receive_batch_messages += taken;
    }
    if (sub->layout.mode == SPINDLE_MODE_UNORDERED && batched > 0) {
        /* Delivered on receipt: delivered_num counts messages. */
        deliver_batch(group, sub, batched);
        sub->delivered += batched;
        sst_write_u64(group->table, sub->delivered_offset, sub->delivered);
        if (!group->options.batching)
            push(group, sub, sub->delivered_offset, 8);
    }
    for (uint32_t s = first; s < end; s++) {
        if (((moved >> s) & 1) == 0)
            continue;
        uint32_t offset = sub->received_offset + 8 * s;
        uint64_t received = sub->senders[s].recv_position;
        if (ack_hook != NULL)
            received = ack_hook(sub->index, s, received);
        sst_write_u64(group->table, offset, received);
        if (group->options.batching)
            sub->ack_dirty = true;
        else
            push(group, sub, offset, 8);
    }
}

static void receive_step(struct smc_group *group, struct smc_subgroup *sub)
{
    receive_senders(group, sub, 0, sub->layout.num_senders, true);
}

/*
 * Null-send rule (Spindle 3.3): for every sender i whose message k (its
 * last received position) we hold, this sender j must have sent position k
 * when j < i (m(j,k) precedes m(i,k)), or k - 1 when j > i. Missing
 * positions become nulls, sent as one counter update. Only when nothing of
 * ours is pending, so nulls never overtake a committed message. Quiescent:
 * a null answers a received message and never reaches past its round.
 */
static void null_step(struct smc_group *group, struct smc_subgroup *sub)
{
    if (!group->options.null_sends || sub->layout.mode != SPINDLE_MODE_ATOMIC ||
        sub->my_sender_rank < 0 || sub->my_member_rank < 0)
        return;
    if (__atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE) != sub->pushed)
        return;
    uint32_t me = (uint32_t)sub->my_sender_rank;
    uint64_t needed = 0;
    for (uint32_t s = 0; s < sub->layout.num_senders; s++) {
        uint64_t received = sub->senders[s].recv_position;
        if (s == me || received == 0)
            continue;
        uint64_t round = received - 1;
        uint64_t positions = me < s ? round + 1 : round;
        if (positions > needed)
            needed = positions;
    }
    if (needed <= sub->next_position)
        return;
    uint64_t count = needed - sub->next_position;
    sub->next_position = needed;
    sub->nulls += count;
    group->stats.nulls_sent += count;
    publish(group, sub, sub->next_position);
}

/* Delivery step (Spindle 3.2, 3.5): in round-robin order, every message
 * every member holds and every null this member holds, as one upcall;
 * nulls are skipped. Baseline: one message. */
static void delivery_step(struct smc_group *group, struct smc_subgroup *sub)
{
    uint64_t token = 0;
    size_t room = delivery_room(group, sub, &token);
    uint64_t held_before = group->stats.deliveries_held;
    uint64_t all[SST_MAX_ROWS];
    held_by_all(group, sub, all);
    struct smc_pass_limits limits = {all, first_missing(sub), false};
    smc_deliver_range(group, sub, &limits, room);
    sub->held = group->stats.deliveries_held != held_before;
    sub->held_token = token;
}

/* A full FIFO of marks (a disk far behind delivery) keeps every second
 * one, the later of each pair: a mark is only ever replaced by a later
 * position for a larger count, so the column stays correct and moves in
 * steps twice as coarse, evenly over the backlog. */
static void halve_marks(struct smc_subgroup *sub)
{
    struct smc_mark kept[SMC_PERSIST_MARKS / 2] = {{0, 0}}; /* rare: a full FIFO */
    uint32_t count = 0;
    for (uint32_t i = 1; i < sub->mark_count; i += 2)
        kept[count++] = sub->marks[(sub->mark_head + i) % SMC_PERSIST_MARKS];
    memcpy(sub->marks, kept, count * sizeof kept[0]);
    sub->mark_head = 0;
    sub->mark_count = count;
}

/* Persist step: a mark for what the delivery step delivered, this
 * member's column raised to the newest durable mark, and the persisted
 * upcall when the global frontier grew (after the delivery upcalls of
 * everything below it: a mark is taken once they returned). */
static void persist_step(struct smc_group *group, struct smc_subgroup *sub)
{
    const struct smc_options *o = &group->options;
    if (sub->delivered > sub->marked) {
        if (sub->mark_count == SMC_PERSIST_MARKS)
            halve_marks(sub);
        sub->marks[(sub->mark_head + sub->mark_count) % SMC_PERSIST_MARKS] =
            (struct smc_mark){o->persist_mark(o->deliver_ctx), sub->delivered};
        sub->mark_count++;
        sub->marked = sub->delivered;
    }
    uint64_t durable = o->persist_durable(o->deliver_ctx);
    uint64_t persisted = sub->persisted;
    while (sub->mark_count > 0 && sub->marks[sub->mark_head].position <= durable) {
        persisted = sub->marks[sub->mark_head].seq;
        sub->mark_head = (sub->mark_head + 1) % SMC_PERSIST_MARKS;
        sub->mark_count--;
    }
    if (persisted > sub->persisted) {
        sub->persisted = persisted;
        sst_write_u64(group->table, sub->persisted_offset, persisted);
        sub->persist_dirty = true;
    }
    uint64_t frontier = global_frontier(group, sub);
    if (frontier > __atomic_load_n(&sub->frontier, __ATOMIC_RELAXED))
        __atomic_store_n(&sub->frontier, frontier, __ATOMIC_RELEASE);
    if (frontier > sub->frontier_reported &&
        !__atomic_load_n(&group->frontier_held, __ATOMIC_ACQUIRE)) {
        sub->frontier_reported = frontier;
        if (o->persisted != NULL)
            o->persisted(o->deliver_ctx, sub->index, frontier);
    }
}

/* The sequence number of the next application message this member can
 * deliver in sub (every position before it that it received is null), or
 * the bound when it holds none below it. At the trim, a message beyond
 * its sender's trim is not one (nor is any later one of that sender). */
static uint64_t next_app_seq(const struct smc_subgroup *sub, const struct smc_pass_limits *limits)
{
    uint32_t senders = sub->layout.num_senders;
    uint64_t next = limits->bound;
    for (uint32_t t = 0; t < senders; t++) {
        const struct smc_sender *sender = &sub->senders[t];
        if (sender->deliv_app >= sender->recv_app)
            continue;
        uint64_t round = sender->app_position[sender->deliv_app % sub->layout.window_size];
        if (limits->at_trim && round >= limits->deliverable[t])
            continue;
        uint64_t seq = round * senders + t;
        if (seq < next)
            next = seq;
    }
    return next;
}

/*
 * The delivery rule. Position (sender s, round r) is passed, in
 * round-robin order (Spindle 2.1), when this member holds it and it is a
 * null (Spindle 3.3), or it is an application message every member holds
 * (r < deliverable[s]); the walk stops at the first position it cannot
 * pass. A null need not be held by every member: what the others do with
 * it cannot differ (a position is a null or a message for everyone), and
 * at a view change the trim delivers every message within its sender's
 * trim rather than a gap-free prefix (view/trim.h), so no survivor needs
 * another to have passed it. This saves, at light load, the round of
 * acknowledgements of the nulls that a message of a later rank waited for.
 * At the trim (limits->at_trim) every position below the bound is held or
 * beyond its sender's trim: messages within the trim are delivered and the
 * rest is skipped.
 */
void smc_deliver_range(struct smc_group *group, struct smc_subgroup *sub,
                       const struct smc_pass_limits *limits, size_t room)
{
    uint32_t senders = sub->layout.num_senders;
    uint32_t window = sub->layout.window_size;
    uint32_t count = 0, nulls_in_a_row = 0;
    uint64_t start = sub->delivered;
    while (sub->delivered < limits->bound) {
        uint32_t s = (uint32_t)(sub->delivered % senders);
        uint64_t round = sub->delivered / senders;
        struct smc_sender *sender = &sub->senders[s];
        uint32_t index = (uint32_t)(sender->deliv_app % window);
        bool message = sender->deliv_app < sender->recv_app && sender->app_position[index] == round;
        if (round >= limits->deliverable[s]) {
            if (!limits->at_trim && message)
                break;       /* not held by every member yet */
            message = false; /* at the trim: beyond it, delivered nowhere */
        }
        if (message) {
            size_t cost = (size_t)group->options.deliver_overhead + sender->app_length[index];
            if (cost > room) {
                group->stats.deliveries_held++;
                break; /* bounded delivery: it waits in the ring */
            }
            room -= cost;
        }
        sub->delivered++;
        if (message) {
            uint8_t *slot = smc_ring(group, sub, s) + (size_t)index * sub->slot_size;
            struct spindle_message *msg = &sub->batch[count++];
            msg->subgroup = sub->index;
            msg->sender_id = sender->row;
            msg->sender_index = sender->deliv_app;
            msg->seq = sub->delivered - 1;
            msg->data = slot + SMC_HEADER_SIZE;
            msg->length = sender->app_length[index];
            sender->deliv_app++;
            nulls_in_a_row = 0;
            if (!group->options.batching)
                break;
        } else {
            group->stats.nulls_received++;
            /* A round of nulls: skip to the next message at once, so that
             * a long run of them (idle senders, or a peer's counter far
             * ahead) costs one step, not one per position. */
            if (++nulls_in_a_row >= senders) {
                uint64_t next = next_app_seq(sub, limits);
                if (next > sub->delivered) {
                    group->stats.nulls_received += next - sub->delivered;
                    sub->delivered = next;
                }
                nulls_in_a_row = 0;
            }
        }
    }
    if (sub->delivered == start)
        return;
    deliver_batch(group, sub, count);
    sst_write_u64(group->table, sub->delivered_offset, sub->delivered);
    if (group->options.batching)
        sub->ack_dirty = true;
    else
        push(group, sub, sub->delivered_offset, 8);
}

/* received_num[0..S-1], delivered_num and persisted_num (when it moved)
 * in one write. */
static void push_acks(struct smc_group *group, struct smc_subgroup *sub)
{
    if (!sub->ack_dirty && !sub->persist_dirty)
        return;
    uint32_t from = sub->ack_dirty ? sub->received_offset : sub->persisted_offset;
    uint32_t to = (sub->persist_dirty ? sub->persisted_offset : sub->delivered_offset) + 8;
    push(group, sub, from, to - from);
    sub->ack_dirty = false;
    sub->persist_dirty = false;
}

/* A pass: the predicate thread's (smc_trigger), or the transport's
 * progress thread's on arrival (smc_arrival_trigger, light). */
static void pass(struct smc_group *group, bool light)
{
    bool wake = false;
    uint32_t ready[SPINDLE_MAX_SUBGROUPS];
    uint32_t num_ready = 0;
    if (__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE))
        return;
    int32_t slow = __atomic_exchange_n(&group->slow_row, -1, __ATOMIC_ACQ_REL);
    if (slow >= 0)
        sst_table_suspect(group->table, (uint32_t)slow, SPINDLE_ETIMEDOUT);
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        struct smc_subgroup *sub = &group->subgroups[g];
        uint64_t own_before = __atomic_load_n(&sub->delivered_own, __ATOMIC_RELAXED);
        uint64_t frontier_before = __atomic_load_n(&sub->frontier, __ATOMIC_RELAXED);
        /* Everything pushed in earlier passes was posted when they ended,
         * unless an own pass's post is still under way (smc_own_pass). */
        if (__atomic_load_n(&group->own_posting, __ATOMIC_ACQUIRE) == 0)
            __atomic_store_n(&sub->posted_mark, sub->pushed, __ATOMIC_RELEASE);
        if (sub->my_sender_rank >= 0 && !light)
            send_step(group, sub);
        if (sub->my_member_rank >= 0 && sub->layout.num_senders > 0 && !(light && sub->persists)) {
            receive_step(group, sub);
            null_step(group, sub);
            if (sub->layout.mode == SPINDLE_MODE_ATOMIC)
                delivery_step(group, sub);
            if (sub->persists)
                persist_step(group, sub);
            push_acks(group, sub);
        }
        /* Once per wait (wait_for_slot raises the flag again). */
        if (sub->my_sender_rank >= 0 && __atomic_load_n(&sub->reserve_waiting, __ATOMIC_ACQUIRE) &&
            smc_room_for_waiter(group, sub) &&
            __atomic_exchange_n(&sub->reserve_waiting, 0, __ATOMIC_SEQ_CST) != 0)
            wake = true;
        /* After this pass's delivery: the upcall's own messages count as
         * delivered now. */
        if (sub->my_sender_rank >= 0 && __atomic_load_n(&sub->room_wanted, __ATOMIC_ACQUIRE) &&
            smc_slot_free(group, sub) && num_ready < SPINDLE_MAX_SUBGROUPS) {
            __atomic_store_n(&sub->room_wanted, 0, __ATOMIC_RELEASE);
            ready[num_ready++] = g;
        }
        if ((__atomic_load_n(&sub->delivered_own, __ATOMIC_RELAXED) != own_before ||
             __atomic_load_n(&sub->frontier, __ATOMIC_RELAXED) != frontier_before) &&
            __atomic_load_n(&group->flush_waiters, __ATOMIC_ACQUIRE) > 0)
            wake = true;
    }
    if (wake)
        smc_wake_waiters(group);
    for (uint32_t i = 0; i < num_ready; i++)
        group->options.send_ready(group->options.deliver_ctx, ready[i]);
}

void smc_trigger(void *ctx)
{
    pass(ctx, false);
}

/*
 * Arrival pass (sst_predicate_set_arrival): over a transport whose own
 * progress thread applies landed writes (libfabric), that thread runs this
 * after applying some while the predicate thread sleeps, under the lock,
 * instead of waking it: at light load each hop was that thread's wake-up
 * after the record (21 us median, p90 98 us on busy vCPUs,
 * docs/PERFORMANCE.md). It is the pass's receiving half, which answers
 * what arrived: receive, nulls, delivery, the acknowledgement push, and
 * the upcalls of delivery and send_ready with their usual rules (the lock
 * held: never two at once). Left to the predicate thread, woken for them
 * (sst_arrival, as the predicate still holds): sending (send_step, whose
 * pushes may need the ring's whole room), logged subgroups (persist_step,
 * the log's appends), a slow row to suspect, and anything while wedged,
 * stopped or failed (view changes). Upcalls run here as they would there;
 * the transport's progress waits meanwhile, as the multicast already did.
 */
void smc_arrival_trigger(void *ctx)
{
    struct smc_group *group = ctx;
    if (__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->failed, __ATOMIC_ACQUIRE) != 0 ||
        __atomic_load_n(&group->slow_row, __ATOMIC_ACQUIRE) >= 0)
        return;
    pass(group, true); /* returns at once when wedged */
}

/*
 * Own pass (smc_options.own_inline): the committing thread sends its
 * unordered message and delivers it to itself, under the lock, instead of
 * waking the predicate thread for it: at light load that thread sleeps,
 * and the wake-up was most of the time from commit to own delivery. The
 * steps are the predicate's own (send, then receive of this sender alone,
 * then the acknowledgement), so order and exactly-once hold as they do
 * between two passes; the lock keeps the upcall on one thread at a time.
 * Only this member's own ring is read: nothing another process wrote, so
 * nothing here can fail a peer. The caller posts (sst_engine_unlock) and
 * then calls smc_own_posted. Modelled in models/own_pass.pml.
 */
void smc_own_pass(struct smc_group *group, struct smc_subgroup *sub)
{
    uint64_t own_before = __atomic_load_n(&sub->delivered_own, __ATOMIC_RELAXED);
    send_step(group, sub);
    uint32_t me = (uint32_t)sub->my_sender_rank;
    receive_senders(group, sub, me, me + 1, false);
    push_acks(group, sub);
    __atomic_add_fetch(&group->own_posting, 1, __ATOMIC_ACQ_REL);
    if (__atomic_load_n(&sub->delivered_own, __ATOMIC_RELAXED) != own_before &&
        __atomic_load_n(&group->flush_waiters, __ATOMIC_ACQUIRE) > 0)
        smc_wake_waiters(group);
}

/* After the own pass's post: what it pushed (pushed, read under the lock
 * as the pass left it) is posted, and so is everything queued before it
 * (posts keep queue order, sst_unlock_and_post). */
void smc_own_posted(struct smc_group *group, struct smc_subgroup *sub, uint64_t pushed)
{
    uint64_t mark = __atomic_load_n(&sub->posted_mark, __ATOMIC_ACQUIRE);
    while (mark < pushed && !__atomic_compare_exchange_n(&sub->posted_mark, &mark, pushed, true,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    __atomic_sub_fetch(&group->own_posting, 1, __ATOMIC_ACQ_REL);
    if (__atomic_load_n(&sub->reserve_waiting, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&sub->room_wanted, __ATOMIC_ACQUIRE))
        sst_engine_wake(group->engine);
}

/* Nothing of the other senders waits here: nothing arrived that this
 * member has not received, nothing it could deliver. Lock held. */
static bool others_quiet(struct smc_group *group, struct smc_subgroup *sub)
{
    for (uint32_t s = 0; s < sub->layout.num_senders; s++) {
        struct smc_sender *sender = &sub->senders[s];
        if ((int)s != sub->my_sender_rank && !sender->lied &&
            read_sent(group, sub, sender) > sender->recv_position)
            return false;
    }
    return !can_pass(group, sub);
}

/*
 * Commit's send (sst_engine_run_inline): over a transport with the arrival
 * pass (libfabric), the committing thread of an atomic subgroup runs the
 * sending half of a pass for its subgroup while the predicate thread
 * sleeps, instead of waking it: at light load that wake-up was the first
 * hop of every delivery (38 us median from commit to the push posted,
 * docs/PERFORMANCE.md). The steps are the pass's, in its order: send (the
 * ring slots, then sent_num, T2), receipt of this sender's own positions
 * (the acknowledgement a pass sends with them), nulls (Spindle 3.3: only
 * now that nothing committed is unpushed), the acknowledgement push; the
 * post follows before the lock is released (sst.h). No delivery and no
 * upcall: the peers' acknowledgements bring the delivery, on the arrival
 * pass or the predicate thread. Left to that thread, woken for them:
 * anything while wedged, stopped or failed, a slow row to suspect, and a
 * commit that meets other senders' messages to receive or deliver (a
 * pass of that thread answers them and sends in one post).
 * Modelled in models/smc.pml (commit_send).
 */
bool smc_commit_send_pass(void *ctx)
{
    const struct smc_commit_send *what = ctx;
    struct smc_group *group = what->group;
    struct smc_subgroup *sub = what->sub;
    if (__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->failed, __ATOMIC_ACQUIRE) != 0 ||
        __atomic_load_n(&group->slow_row, __ATOMIC_ACQUIRE) >= 0 || !others_quiet(group, sub))
        return false;
    send_step(group, sub);
    uint32_t me = (uint32_t)sub->my_sender_rank;
    receive_senders(group, sub, me, me + 1, false);
    null_step(group, sub);
    push_acks(group, sub);
    return true;
}

/*
 * Durable pass (smc_group_durable): the log's writer thread runs the
 * persist step itself after each sync, under the lock, instead of waking
 * the predicate thread only for it (the wake was about a quarter of that
 * thread's sleeps under logged load, docs/LOGS.md). Under the lock nothing
 * else writes this member's row or queues a push, so the column and the
 * frontier move exactly as in a pass, and the push joins the queue in
 * order (sst_unlock_and_post). Marks are taken by the delivery's own pass,
 * after its upcalls, so a frontier reported here never passes a message
 * before its delivery upcall. With the lock busy the caller wakes the
 * predicate thread, as before: its pass or its last look before sleeping
 * (sleep_on_doorbell arms the doorbell first) sees the durable position.
 */
static bool durable_pass(struct smc_group *group)
{
    if (__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->failed, __ATOMIC_ACQUIRE) != 0)
        return false;
    bool held = group->p2p.held;
    bool moved = false;
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        struct smc_subgroup *sub = &group->subgroups[g];
        if (!sub->persists || sub->my_member_rank < 0 || sub->layout.num_senders == 0)
            continue;
        held |= sub->held; /* the sync made room: that delivery may go on */
        uint64_t frontier_before = __atomic_load_n(&sub->frontier, __ATOMIC_RELAXED);
        persist_step(group, sub);
        push_acks(group, sub);
        moved |= __atomic_load_n(&sub->frontier, __ATOMIC_RELAXED) != frontier_before;
    }
    if (moved && __atomic_load_n(&group->flush_waiters, __ATOMIC_ACQUIRE) > 0)
        smc_wake_waiters(group);
    return !held;
}

bool smc_group_durable(struct smc_group *group)
{
    /* Only for a sleeping thread: an awake one does it in its next pass,
     * and would wait on the lock meanwhile. */
    if (!sst_engine_asleep(group->engine) || !sst_engine_trylock(group->engine))
        return false;
    bool done = durable_pass(group);
    sst_engine_unlock(group->engine);
    return done;
}
