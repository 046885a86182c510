/* Point-to-point rings of an smc_group (smc_p2p.h, docs/P2P.md). */
#include <string.h>
#include <time.h>

#include <spindle/p2p.h>

#include "smc/smc_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/* How long a waiting sender or query sleeps before it looks again at what
 * no wake-up announces (a target found failed, a window published). */
#define WAIT_SLICE_MS 20

int smc_p2p_add_columns(struct smc_group *group, struct sst_schema *schema, uint32_t window)
{
    struct smc_p2p *p2p = &group->p2p;
    if (group->num_rows < 2)
        return 0;
    if (window == 0)
        window = SPINDLE_P2P_DEFAULT_WINDOW;
    if (window > SPINDLE_P2P_MAX_WINDOW)
        return sp_error(SPINDLE_EINVAL, "p2p_window %u must be 1..%u", window,
                        SPINDLE_P2P_MAX_WINDOW);
    p2p->enabled = true;
    p2p->window = window;
    p2p->slot_bytes = smc_p2p_slot_bytes(SPINDLE_P2P_MAX_PAYLOAD);
    p2p->ring_bytes =
        (p2p->slot_bytes * window + SST_CACHE_LINE - 1) / SST_CACHE_LINE * SST_CACHE_LINE;
    int column = sst_schema_add_counter(schema);
    if (column < 0)
        return column;
    p2p->window_offset = sst_column_offset(schema, column);
    for (uint32_t i = 0; i < 2 * group->num_rows; i++) {
        column = sst_schema_add_counter(schema);
        if (column < 0)
            return column;
        if (i == 0)
            p2p->sent_offset = sst_column_offset(schema, column);
        if (i == group->num_rows)
            p2p->received_offset = sst_column_offset(schema, column);
    }
    return 0;
}

void smc_p2p_place(struct smc_group *group, const struct smc_side_shape *shape)
{
    struct smc_p2p *p2p = &group->p2p;
    if (!p2p->enabled)
        return;
    for (uint32_t row = 0; row < group->num_rows; row++) {
        p2p->in_at[row] = smc_side_p2p_in(shape, row, group->my_row);
        p2p->at_peer[row] = smc_side_p2p_in(shape, group->my_row, row);
    }
    p2p->out_base = smc_side_p2p_out(shape, 0, group->my_row);
}

void smc_p2p_init_row(struct smc_group *group)
{
    if (group->p2p.enabled)
        sst_write_u64(group->table, group->p2p.window_offset, group->p2p.window);
}

/* ---- predicate thread ---------------------------------------------------- */

/* A peer broke the ring protocol: nothing more is taken from it, and it is
 * suspected like a failed member (ARCHITECTURE.md, "Trust"). */
static void p2p_lied(struct smc_group *group, uint32_t row, const char *what)
{
    if (group->p2p.lied[row])
        return;
    group->p2p.lied[row] = true;
    SP_LOG_ERR("smc", "p2p: row %u broke the ring protocol (%s): suspected", row, what);
    sst_table_suspect(group->table, row, SPINDLE_EPROTO);
}

static uint64_t sent_to_me(struct smc_group *group, uint32_t row)
{
    return sst_read_u64(group->table, row, group->p2p.sent_offset + 8 * group->my_row);
}

static uint64_t credit_of(struct smc_group *group, uint32_t row)
{
    return sst_read_u64(group->table, row, group->p2p.received_offset + 8 * group->my_row);
}

static bool delivery_held(struct smc_group *group)
{
    struct smc_p2p *p2p = &group->p2p;
    if (!p2p->held)
        return false;
    if (group->options.deliver_progress != NULL &&
        group->options.deliver_progress(group->options.deliver_ctx) == p2p->held_token)
        return true;
    p2p->held = false;
    return false;
}

/* This member's window, pushed once, before anything it sends: a peer
 * replies into the ring this member publishes with it, so a query whose
 * guard overtook the window would find no ring to reply into. Engine
 * lock held (the predicate thread's trigger, or a sender's try_send). */
static void push_config(struct smc_group *group)
{
    if (group->p2p.config_pushed)
        return;
    group->p2p.config_pushed = true;
    sst_push(group->table, group->p2p.window_offset, 8, NULL, 0);
}

static bool p2p_predicate(void *ctx)
{
    struct smc_group *group = ctx;
    struct smc_p2p *p2p = &group->p2p;
    if (__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE))
        return false;
    if (!p2p->config_pushed)
        return true;
    bool held = delivery_held(group);
    bool waiting = __atomic_load_n(&p2p->waiters, __ATOMIC_ACQUIRE) > 0;
    for (uint32_t row = 0; row < group->num_rows; row++) {
        /* Nothing more is taken from a row that lied or failed: what it
         * left in its ring is not work (the trigger would skip it). */
        if (row == group->my_row || p2p->lied[row] || sst_row_failed(group->table, row))
            continue;
        if (!held && sent_to_me(group, row) != p2p->received[row])
            return true;
        if (waiting && credit_of(group, row) != p2p->credit_seen[row])
            return true;
    }
    return false;
}

/* A reply came: hands it to the query waiting for it, if one still is (a
 * reply after its query gave up is dropped). */
static void complete_query(struct smc_group *group, uint32_t row, const struct smc_p2p_slot *header,
                           const void *data)
{
    struct smc_p2p *p2p = &group->p2p;
    pthread_mutex_lock(&group->wait_lock);
    for (uint32_t i = 0; i < SMC_P2P_MAX_PENDING; i++) {
        struct smc_p2p_pending *q = &p2p->pending[i];
        if (!q->used || q->done || q->id != header->query_id || q->row != row)
            continue;
        size_t copy = header->length < q->capacity ? header->length : q->capacity;
        if (copy > 0)
            memcpy(q->reply, data, copy);
        q->length = header->length;
        q->done = true;
        pthread_cond_broadcast(&group->wait_cond);
        break;
    }
    pthread_mutex_unlock(&group->wait_lock);
}

/* Takes what row wrote into its ring to this member, in order, and pushes
 * the new count back to it (its credit). */
static void receive_from(struct smc_group *group, uint32_t row)
{
    struct smc_p2p *p2p = &group->p2p;
    uint64_t sent = sent_to_me(group, row);
    uint64_t taken = p2p->received[row];
    if (sent == taken)
        return;
    if (sent < taken || sent - taken > p2p->window || sent > SMC_COUNTER_MAX) {
        p2p_lied(group, row, "p2p_sent outside its window");
        return;
    }
    const uint8_t *ring = sst_side(group->table) + p2p->in_at[row];
    while (taken < sent) {
        const uint8_t *slot = ring + (taken % p2p->window) * p2p->slot_bytes;
        struct smc_p2p_slot header;
        if (smc_p2p_slot_decode(slot, p2p->slot_bytes, taken, SPINDLE_P2P_MAX_PAYLOAD, &header) <
            0) {
            p2p_lied(group, row, spindle_errmsg());
            break;
        }
        const void *data = slot + SMC_P2P_HEADER_SIZE;
        if (header.kind == SMC_P2P_REPLY) {
            complete_query(group, row, &header, data);
        } else if (group->options.p2p_deliver != NULL &&
                   group->options.p2p_deliver(group->options.deliver_ctx, row, &header, data) ==
                       SPINDLE_EAGAIN) {
            p2p->held = true;
            p2p->held_token = group->options.deliver_progress != NULL
                                  ? group->options.deliver_progress(group->options.deliver_ctx)
                                  : 0;
            break;
        }
        taken++;
    }
    if (taken == p2p->received[row])
        return;
    p2p->received[row] = taken;
    uint32_t offset = p2p->received_offset + 8 * row;
    sst_write_u64(group->table, offset, taken);
    sst_push(group->table, offset, 8, &row, 1);
}

/* Wakes senders waiting for room once a target's credit moved. */
static void watch_credit(struct smc_group *group)
{
    struct smc_p2p *p2p = &group->p2p;
    bool moved = false;
    for (uint32_t row = 0; row < group->num_rows; row++) {
        if (row == group->my_row || p2p->lied[row])
            continue;
        uint64_t credit = credit_of(group, row);
        if (credit == p2p->credit_seen[row])
            continue;
        if (credit < p2p->credit_seen[row] || credit > p2p->sent[row]) {
            p2p_lied(group, row, "p2p_received beyond what was sent to it");
            continue;
        }
        p2p->credit_seen[row] = credit;
        moved = true;
    }
    if (moved)
        smc_wake_waiters(group);
}

static void p2p_trigger(void *ctx)
{
    struct smc_group *group = ctx;
    struct smc_p2p *p2p = &group->p2p;
    push_config(group);
    if (!delivery_held(group))
        for (uint32_t row = 0; row < group->num_rows; row++)
            if (row != group->my_row && !p2p->lied[row] && !sst_row_failed(group->table, row))
                receive_from(group, row);
    watch_credit(group);
}

int smc_p2p_start(struct smc_group *group)
{
    if (!group->p2p.enabled)
        return 0;
    int rc = sst_predicate_add(group->engine, p2p_predicate, p2p_trigger, group, SST_PRED_RECURRENT,
                               &group->p2p.predicate_id);
    if (rc == 0)
        group->p2p.started = true;
    return rc;
}

void smc_p2p_stop(struct smc_group *group)
{
    if (group->p2p.started) {
        sst_predicate_remove(group->engine, group->p2p.predicate_id);
        group->p2p.started = false;
    }
}

/* ---- application threads --------------------------------------------------- */

/* One try at writing the message into the ring to row (engine lock held):
 * 0, SPINDLE_EAGAIN when the ring is full or the target has not yet
 * published its window, or an error. */
static int try_send(struct smc_group *group, uint32_t row, const struct smc_p2p_slot *header,
                    const void *data)
{
    struct smc_p2p *p2p = &group->p2p;
    if (sst_row_failed(group->table, row))
        return sp_error(SPINDLE_EPEERFAILED, "p2p: the target (row %u) failed", row);
    uint64_t window = sst_read_u64(group->table, row, p2p->window_offset);
    if (window == 0)
        return SPINDLE_EAGAIN; /* its first push has not come yet */
    if (window != p2p->window)
        return sp_error(SPINDLE_EPROTO,
                        "p2p: the target (row %u) uses p2p_window %llu, this member %u; every "
                        "member must use the same",
                        row, (unsigned long long)window, p2p->window);
    push_config(group); /* queued ahead of this message's slot and guard */
    uint64_t position = p2p->sent[row];
    uint64_t credit = credit_of(group, row);
    if (credit > position)
        return sp_error(SPINDLE_EPROTO,
                        "p2p: the target (row %u) claims %llu messages taken of %llu sent", row,
                        (unsigned long long)credit, (unsigned long long)position);
    if (position - credit >= p2p->window)
        return SPINDLE_EAGAIN;
    uint64_t in_ring = (position % p2p->window) * p2p->slot_bytes;
    uint64_t local = p2p->out_base + (uint64_t)row * p2p->ring_bytes + in_ring;
    uint8_t *slot = sst_side(group->table) + local;
    smc_p2p_slot_encode(slot, position, header);
    if (header->length > 0)
        memcpy(slot + SMC_P2P_HEADER_SIZE, data, header->length);
    uint32_t bytes = SMC_P2P_HEADER_SIZE + ((header->length + 7u) & ~7u);
    uint64_t remote = p2p->at_peer[row] + in_ring;
    int rc = sst_push_side(group->table, local, bytes, &row, &remote, 1);
    if (rc < 0)
        return rc;
    /* The guard, in a later write than the slot (T2). */
    __atomic_store_n(&p2p->sent[row], position + 1, __ATOMIC_RELAXED);
    uint32_t offset = p2p->sent_offset + 8 * row;
    sst_write_u64(group->table, offset, position + 1);
    return sst_push(group->table, offset, 8, &row, 1);
}

/* Sleeps on wait_cond until woken or WAIT_SLICE_MS passed (or deadline).
 * wait_lock held. */
static void wait_slice(struct smc_group *group, uint64_t deadline_ns)
{
    uint64_t now = sp_now_ns();
    uint64_t until = now + (uint64_t)WAIT_SLICE_MS * 1000000ull;
    if (deadline_ns < until)
        until = deadline_ns;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000000ull),
                          .tv_nsec = (long)(until % 1000000000ull)};
    pthread_cond_timedwait(&group->wait_cond, &group->wait_lock, &ts);
}

static int check_args(struct smc_group *group, uint32_t row, uint32_t length)
{
    if (!group->p2p.enabled)
        return sp_error(SPINDLE_EINVAL, "p2p: a group of one member has no one to send to");
    if (row >= group->num_rows || row == group->my_row)
        return sp_error(SPINDLE_EINVAL, "p2p: row %u is not another member of the %u", row,
                        group->num_rows);
    if (length > SPINDLE_P2P_MAX_PAYLOAD)
        return sp_error(SPINDLE_EMSGSIZE, "p2p: message of %u bytes exceeds %u", length,
                        SPINDLE_P2P_MAX_PAYLOAD);
    return 0;
}

/* True when the ring to row has a free slot by the credit in memory now,
 * or try_send will fail for another reason than room (no lock: the credit is a word only row
 * writes; sent[row] is stored atomically by senders under the engine lock). */
static bool ring_has_room(struct smc_group *group, uint32_t row)
{
    if (sst_read_u64(group->table, row, group->p2p.window_offset) == 0)
        return false; /* not published yet: nothing to wake on but the slice */
    uint64_t sent = __atomic_load_n(&group->p2p.sent[row], __ATOMIC_RELAXED);
    uint64_t credit = credit_of(group, row);
    return credit > sent || sent - credit < group->p2p.window;
}

int smc_p2p_send(struct smc_group *group, uint32_t row, const struct smc_p2p_slot *header,
                 const void *data, bool nonblock, bool locked, uint64_t deadline_ns)
{
    int rc = check_args(group, row, header->length);
    if (rc < 0)
        return rc;
    bool counted = false;
    for (;;) {
        rc = smc_group_state_error(group);
        if (rc < 0)
            break;
        if (!locked)
            sst_engine_lock(group->engine);
        rc = try_send(group, row, header, data);
        if (!locked)
            sst_engine_unlock(group->engine);
        if (rc != SPINDLE_EAGAIN)
            break;
        if (nonblock || locked) {
            if (sst_read_u64(group->table, row, group->p2p.window_offset) == 0)
                rc = sp_error(SPINDLE_EAGAIN, "p2p: row %u has not published its ring yet", row);
            else
                rc = sp_error(SPINDLE_EAGAIN,
                              "p2p: the ring to row %u is full (%u messages it has not taken yet)",
                              row, group->p2p.window);
            break;
        }
        if (sp_now_ns() >= deadline_ns) {
            rc = sp_error(SPINDLE_ETIMEDOUT, "p2p: the ring to row %u stayed full", row);
            break;
        }
        if (!counted) {
            counted = true;
            __atomic_add_fetch(&group->p2p.waiters, 1, __ATOMIC_ACQ_REL);
            sst_engine_wake(group->engine);
        }
        /* Looked at again under wait_lock, which the predicate's wake-up
         * takes: a credit that moved after try_send is seen here, or its
         * wake-up comes once this thread waits. */
        pthread_mutex_lock(&group->wait_lock);
        if (!ring_has_room(group, row))
            wait_slice(group, deadline_ns);
        pthread_mutex_unlock(&group->wait_lock);
    }
    if (counted)
        __atomic_sub_fetch(&group->p2p.waiters, 1, __ATOMIC_ACQ_REL);
    return rc;
}

/* Takes a free entry of the pending table for a query to row. wait_lock
 * held. */
static struct smc_p2p_pending *pending_take(struct smc_p2p *p2p, uint32_t row, void *reply,
                                            size_t capacity)
{
    for (uint32_t i = 0; i < SMC_P2P_MAX_PENDING; i++) {
        struct smc_p2p_pending *q = &p2p->pending[i];
        if (q->used)
            continue;
        *q = (struct smc_p2p_pending){.used = true,
                                      .id = ++p2p->next_query,
                                      .row = row,
                                      .reply = reply,
                                      .capacity = capacity};
        return q;
    }
    return NULL;
}

/* Why a query to row cannot get its reply any more, or 0. wait_lock held
 * (only atomics are read). */
static int query_lost(struct smc_group *group, uint32_t row)
{
    if (sst_row_failed(group->table, row))
        return sp_error(SPINDLE_EPEERFAILED, "p2p query: the target (row %u) failed", row);
    if (smc_group_state_error(group) < 0)
        return sp_error(SPINDLE_EPEERFAILED,
                        "p2p query: the view ended (a member failed or the group stopped) "
                        "before the target (row %u) replied",
                        row);
    return 0;
}

int smc_p2p_query(struct smc_group *group, uint32_t row, const void *request, uint32_t length,
                  void *reply, size_t capacity, size_t *reply_length, uint64_t deadline_ns)
{
    int rc = check_args(group, row, length);
    if (rc < 0)
        return rc;
    struct smc_p2p *p2p = &group->p2p;
    pthread_mutex_lock(&group->wait_lock);
    struct smc_p2p_pending *q = pending_take(p2p, row, reply, capacity);
    pthread_mutex_unlock(&group->wait_lock);
    if (q == NULL)
        return sp_error(SPINDLE_EAGAIN, "p2p query: %u queries wait already, the most a group has",
                        SMC_P2P_MAX_PENDING);
    struct smc_p2p_slot header = {.kind = SMC_P2P_QUERY, .length = length, .query_id = q->id};
    rc = smc_p2p_send(group, row, &header, request, false, false, deadline_ns);
    pthread_mutex_lock(&group->wait_lock);
    while (rc == 0 && !q->done) {
        rc = query_lost(group, row);
        if (rc == 0 && sp_now_ns() >= deadline_ns)
            rc = sp_error(SPINDLE_ETIMEDOUT, "p2p query: no reply from row %u in time", row);
        if (rc == 0)
            wait_slice(group, deadline_ns);
    }
    if (q->done) {
        *reply_length = q->length;
        rc = q->length > capacity ? sp_error(SPINDLE_EMSGSIZE,
                                             "p2p query: the reply of %zu bytes is longer than "
                                             "the reply buffer of %zu bytes",
                                             q->length, capacity)
                                  : 0;
    }
    q->used = false;
    pthread_mutex_unlock(&group->wait_lock);
    return rc;
}
