/*
 * A joiner's state, streamed (docs/VIEWS.md, "State transfer"): the leader
 * sends it in chunks of VIEW_STATE_CHUNK bytes, the joiner acknowledges
 * each one once its application took it, and the leader sends a chunk only
 * once the one two before it was acknowledged. Chunks alternate between
 * two tags, so the two in flight never replace each other in the control
 * channel's mailbox (the latest blob of a tag), and each is taken out of
 * the mailbox as it is read (ctl_take_one). Neither side holds more than
 * two chunks, whatever the state's size.
 *
 * The leader streams at the start of the new view, after publishing its
 * own ready: the survivors do not wait for it, only for the joiner, and
 * the joiner acknowledges every chunk to every member, so that each
 * acknowledgement restarts their wait (view_join_await_start).
 *
 * Everything the other side sends is decoded strictly (view_wire.c) and
 * checked against the stream: a chunk at the offset expected, full unless
 * it is the last, never past the length announced; acknowledgements that
 * only grow and never pass what was sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

struct spindle_state_out {
    struct view_membership *m;
    uint32_t joiner;
    uint64_t view_id;
    uint8_t *payload; /* VIEW_STATE_CHUNK bytes: the chunk being filled */
    uint8_t *wire;    /* VIEW_WIRE_JOIN_CHUNK_MAX_SIZE bytes: its encoding */
    size_t filled;
    uint64_t sent;   /* bytes sent: the offset of the chunk being filled */
    uint64_t chunks; /* chunks sent */
    uint64_t acked;  /* bytes the joiner took */
    int error;       /* sticky: the first failure */
};

static uint32_t chunk_tag(uint64_t view, uint64_t index)
{
    return view_join_tag(view, (index & 1) != 0 ? JOIN_STATE_ODD : JOIN_STATE);
}

/* The joiner (the last rank of the view it joins) is alive while its
 * state arrives, though its table has not started: the failure detector
 * starts its clock again. */
static void excuse_joiner(struct view_membership *m)
{
    const struct view_epoch *epoch = m->current;
    sst_table_excuse(smc_group_table(epoch->smc), epoch->view.num_members - 1);
}

/* How long one side waits for the other's next step. */
static int step_timeout_ms(const struct view_membership *m)
{
    return EXCHANGE_TIMEOUTS * m->config.failure_timeout_ms;
}

/* Takes acknowledgements until the joiner took at least `upto` bytes. */
static int await_ack(struct spindle_state_out *out, uint64_t upto)
{
    uint8_t bytes[VIEW_WIRE_JOIN_STATE_ACK_SIZE];
    while (out->acked < upto) {
        size_t length = 0;
        int rc = ctl_take_one(out->m->ctl, view_join_tag(out->view_id, JOIN_STATE_ACK), out->joiner,
                              bytes, sizeof bytes, &length, step_timeout_ms(out->m));
        if (rc < 0)
            return sp_error(rc, "joiner %u took %llu of %llu bytes of state, then stopped (%s)",
                            out->joiner, (unsigned long long)out->acked,
                            (unsigned long long)out->sent, spindle_errmsg());
        struct view_join_state_ack ack;
        if (view_wire_decode_join_state_ack(bytes, length, &ack) < 0)
            return sp_error(SPINDLE_EPROTO, "joiner %u: %s", out->joiner, spindle_errmsg());
        if (ack.view_id != out->view_id)
            continue; /* an earlier attempt's */
        if (ack.error < 0)
            return sp_error(ack.error, "joiner %u refused its state at byte %llu (%s)", out->joiner,
                            (unsigned long long)ack.taken, spindle_strerror(ack.error));
        /* Taken bytes only grow, and only up to what was sent. */
        if (ack.taken < out->acked || ack.taken > out->sent)
            return sp_error(SPINDLE_EPROTO,
                            "joiner %u acknowledged %llu bytes of state after %llu, with %llu sent",
                            out->joiner, (unsigned long long)ack.taken,
                            (unsigned long long)out->acked, (unsigned long long)out->sent);
        out->acked = ack.taken;
        excuse_joiner(out->m);
    }
    return 0;
}

/* Sends the chunk being filled (last: the final one; error < 0: the stream
 * failed, no bytes), once at most one other is in flight. */
static int send_chunk(struct spindle_state_out *out, bool last, int32_t error)
{
    /* Chunk k may go once chunk k - 2 was taken: every chunk before the
     * last is full, so chunk k - 1 starts VIEW_STATE_CHUNK before this one. */
    int rc = out->chunks >= 2 ? await_ack(out, out->sent - VIEW_STATE_CHUNK) : 0;
    if (rc < 0)
        return rc;
    struct view_join_chunk chunk = {.view_id = out->view_id,
                                    .offset = out->sent,
                                    .length = (uint32_t)out->filled,
                                    .last = last,
                                    .error = error,
                                    .data = out->payload};
    size_t size = view_wire_encode_join_chunk(&chunk, out->wire, VIEW_WIRE_JOIN_CHUNK_MAX_SIZE);
    rc = ctl_publish(out->m->ctl, chunk_tag(out->view_id, out->chunks), out->wire, size,
                     1ull << out->joiner);
    if (rc < 0)
        return rc;
    out->sent += out->filled;
    out->filled = 0;
    out->chunks++;
    return 0;
}

int spindle_state_put(struct spindle_state_out *out, const void *data, size_t length)
{
    if (out == NULL || (data == NULL && length > 0))
        return sp_error(SPINDLE_EINVAL, "spindle_state_put: %s is NULL",
                        out == NULL ? "out" : "data");
    if (out->error < 0)
        return sp_error(out->error, "spindle_state_put: the stream already failed");
    const uint8_t *bytes = data;
    while (length > 0) {
        if (out->filled == VIEW_STATE_CHUNK) {
            int rc = send_chunk(out, false, 0);
            if (rc < 0) {
                out->error = rc;
                return rc;
            }
        }
        size_t part = VIEW_STATE_CHUNK - out->filled;
        if (part > length)
            part = length;
        memcpy(out->payload + out->filled, bytes, part);
        out->filled += part;
        bytes += part;
        length -= part;
    }
    return 0;
}

/* What a stream carries: the saved bytes or state_write's, or a log
 * catch-up (view_log_catchup.c). */
struct stream_source {
    const void *state; /* saved bytes (no state_write) */
    size_t length;
    bool catchup;
};

/* Fills the stream from its source. */
static int produce(struct spindle_state_out *out, const struct stream_source *source)
{
    struct view_membership *m = out->m;
    if (source->catchup)
        return view_log_catchup_write(m, out->joiner, out->view_id, out);
    if (m->config.state_write == NULL)
        return spindle_state_put(out, source->state, source->length);
    int rc = m->config.state_write(m->config.state_save_ctx, out);
    if (rc < 0 && out->error == 0)
        rc = sp_error(rc, "state_write at member %u failed (%s)", m->config.self,
                      spindle_strerror(rc));
    if (rc >= 0 && out->error < 0)
        rc = out->error; /* it swallowed a failed spindle_state_put */
    return rc < 0 ? rc : 0;
}

static int stream(struct view_membership *m, uint32_t joiner, uint64_t view,
                  const struct stream_source *source)
{
    struct spindle_state_out out = {.m = m, .joiner = joiner, .view_id = view};
    out.payload = malloc(VIEW_STATE_CHUNK);
    out.wire = malloc(VIEW_WIRE_JOIN_CHUNK_MAX_SIZE);
    int rc = out.payload != NULL && out.wire != NULL
                 ? 0
                 : sp_error(SPINDLE_ENOMEM, "no memory for the joiner's state chunks");
    uint64_t started = sp_now_ns();
    if (rc == 0)
        rc = produce(&out, source);
    if (rc == 0)
        rc = send_chunk(&out, true, 0);
    else if (out.error == 0) {
        /* The application's failure, not the channel's: the joiner learns
         * that the stream ended short. */
        char why[VIEW_WHY_MAX];
        snprintf(why, sizeof why, "%s", spindle_errmsg());
        out.filled = 0;
        if (send_chunk(&out, true, rc) < 0)
            sp_log(SP_LOG_DEBUG, "join", "joiner %u: %s", joiner, spindle_errmsg());
        rc = sp_error(rc, "%s", why);
    }
    if (rc == 0)
        rc = await_ack(&out, out.sent);
    if (rc == 0)
        sp_log(SP_LOG_INFO, "join", "joiner %u took %llu bytes of %s in %llu chunks, %.3f s",
               joiner, (unsigned long long)out.sent, source->catchup ? "log catch-up" : "state",
               (unsigned long long)out.chunks, (double)(sp_now_ns() - started) / 1e9);
    free(out.payload);
    free(out.wire);
    return rc;
}

int view_join_send_state(struct view_membership *m, uint32_t joiner, uint64_t view,
                         const void *state, size_t length)
{
    struct stream_source source = {.state = state, .length = length};
    return stream(m, joiner, view, &source);
}

int view_join_send_catchup(struct view_membership *m, uint32_t joiner, uint64_t view)
{
    struct stream_source source = {.catchup = true};
    return stream(m, joiner, view, &source);
}

/* ---- the joiner's side ------------------------------------------------- */

/* Where the chunks go: the application's state_read, or a buffer gathered
 * for state_load, or nowhere (the joiner takes no state). */
struct state_in {
    struct view_membership *m;
    struct view_log_catchup *catchup; /* a joiner restarting with its log */
    uint64_t expected;                /* announced length, or VIEW_STATE_STREAMED */
    uint8_t *buffer;                  /* gathered for state_load */
    size_t capacity;
};

static int gather(struct state_in *in, const struct view_join_chunk *chunk)
{
    if (chunk->length == 0)
        return 0;
    size_t need = (size_t)chunk->offset + chunk->length;
    if ((uint64_t)need != chunk->offset + chunk->length)
        return sp_error(SPINDLE_ENOMEM, "a state of %llu bytes cannot be held here",
                        (unsigned long long)(chunk->offset + chunk->length));
    if (in->buffer == NULL || need > in->capacity) {
        size_t capacity = in->expected != VIEW_STATE_STREAMED ? (size_t)in->expected : 0;
        if (capacity < need)
            capacity = in->capacity * 2 > need ? in->capacity * 2 : need;
        uint8_t *grown = realloc(in->buffer, capacity > 0 ? capacity : 1);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for %zu bytes of state", capacity);
        in->buffer = grown;
        in->capacity = capacity;
    }
    memcpy(in->buffer + chunk->offset, chunk->data, chunk->length);
    return 0;
}

static int take_chunk(struct state_in *in, const struct view_join_chunk *chunk)
{
    struct view_membership *m = in->m;
    if (in->catchup != NULL)
        return view_log_catchup_feed(in->catchup, chunk->data, chunk->length, chunk->last);
    if (m->config.state_read != NULL) {
        int rc = m->config.state_read(m->config.state_ctx, chunk->offset, chunk->data,
                                      chunk->length, chunk->last);
        if (rc < 0)
            return sp_error(rc, "state_read refused the state at byte %llu (%s)",
                            (unsigned long long)chunk->offset, spindle_strerror(rc));
        return 0;
    }
    return m->config.state_load != NULL ? gather(in, chunk) : 0;
}

/* Checks a chunk against the stream so far (received bytes). */
static int check_chunk(const struct state_in *in, const struct view_join_chunk *chunk,
                       uint64_t view, uint64_t received)
{
    if (chunk->view_id != view || chunk->offset != received)
        return sp_error(SPINDLE_EPROTO,
                        "the leader sent state of view %llu at byte %llu, not of %llu at %llu",
                        (unsigned long long)chunk->view_id, (unsigned long long)chunk->offset,
                        (unsigned long long)view, (unsigned long long)received);
    if (chunk->error < 0)
        return sp_error(chunk->error, "the leader's state ended at byte %llu: %s",
                        (unsigned long long)received, spindle_strerror(chunk->error));
    if (!chunk->last && chunk->length != VIEW_STATE_CHUNK)
        return sp_error(SPINDLE_EPROTO, "the leader sent a chunk of %u bytes before the last",
                        chunk->length);
    uint64_t end = received + chunk->length;
    if (in->expected != VIEW_STATE_STREAMED &&
        (end > in->expected || (chunk->last && end != in->expected)))
        return sp_error(SPINDLE_EPROTO, "the leader announced %llu bytes of state but sent %llu%s",
                        (unsigned long long)in->expected, (unsigned long long)end,
                        chunk->last ? " in all" : " so far");
    return 0;
}

static int send_ack(struct view_membership *m, uint64_t view, uint64_t taken, int32_t error)
{
    struct view_join_state_ack ack = {.view_id = view, .taken = taken, .error = error};
    uint8_t bytes[VIEW_WIRE_JOIN_STATE_ACK_SIZE];
    view_wire_encode_join_state_ack(&ack, bytes, sizeof bytes);
    /* To every member: the leader paces the stream by it, the others wait
     * for this joiner's start as long as its state keeps arriving. */
    uint64_t to = 0;
    const struct view *v = &m->current->view;
    for (uint32_t rank = 0; rank < v->num_members; rank++)
        to |= 1ull << v->member_ids[rank];
    return ctl_publish(m->ctl, view_join_tag(view, JOIN_STATE_ACK), bytes, sizeof bytes, to);
}

int view_join_receive_state(struct view_membership *m, uint32_t leader,
                            const struct view_join_view *jv, void **state, size_t *length,
                            int timeout_ms)
{
    *state = NULL;
    *length = 0;
    struct state_in in = {.m = m, .expected = jv->state_length};
    int rc = m->log_ends != NULL ? view_log_catchup_begin(m, jv->view_id, &in.catchup) : 0;
    if (rc < 0)
        return rc;
    uint8_t *wire = malloc(VIEW_WIRE_JOIN_CHUNK_MAX_SIZE);
    if (wire == NULL) {
        view_log_catchup_end(in.catchup);
        return sp_error(SPINDLE_ENOMEM, "no memory for a state chunk");
    }
    uint64_t received = 0;
    for (uint64_t index = 0; rc == 0; index++) {
        size_t size = 0;
        rc = ctl_take_one(m->ctl, chunk_tag(jv->view_id, index), leader, wire,
                          VIEW_WIRE_JOIN_CHUNK_MAX_SIZE, &size, timeout_ms);
        if (rc < 0) {
            rc = sp_error(SPINDLE_EAGAIN, "the state stopped after %llu bytes: %s",
                          (unsigned long long)received, spindle_errmsg());
            break;
        }
        struct view_join_chunk chunk;
        rc = view_wire_decode_join_chunk(wire, size, &chunk);
        if (rc == 0)
            rc = check_chunk(&in, &chunk, jv->view_id, received);
        if (rc < 0)
            break; /* the leader's failure, or its lie: nothing to tell it */
        rc = take_chunk(&in, &chunk);
        if (rc < 0) {
            /* Refused here: the leader stops sending. */
            char why[VIEW_WHY_MAX];
            snprintf(why, sizeof why, "%s", spindle_errmsg());
            send_ack(m, jv->view_id, received, rc);
            rc = sp_error(rc, "%s", why);
            break;
        }
        received += chunk.length;
        rc = send_ack(m, jv->view_id, received, 0);
        if (rc == 0 && chunk.last)
            break;
    }
    free(wire);
    if (in.catchup != NULL) {
        /* What the records were already taken into stays, durable or not:
         * the next attempt asks from where the log then ends. */
        int ended = view_log_catchup_end(in.catchup);
        if (rc == 0)
            rc = ended;
    }
    if (rc < 0) {
        free(in.buffer);
        return rc;
    }
    *state = in.buffer;
    *length = (size_t)received;
    return 0;
}

int view_join_await_start(struct view_membership *m, uint32_t joiner, uint64_t view, uint32_t tag)
{
    uint64_t window = (uint64_t)step_timeout_ms(m) * 1000000ull;
    uint64_t deadline = sp_now_ns() + window;
    uint8_t bytes[VIEW_WIRE_JOIN_STATE_ACK_SIZE];
    for (;;) {
        int rc = view_gather_ready(m, 1ull << joiner, view, tag, 20, "joiner's start");
        if (rc != SPINDLE_ETIMEDOUT)
            return rc;
        size_t length = 0;
        rc = ctl_take_one(m->ctl, view_join_tag(view, JOIN_STATE_ACK), joiner, bytes, sizeof bytes,
                          &length, 0);
        if (rc == 0) {
            deadline = sp_now_ns() + window; /* its state is still arriving */
            excuse_joiner(m);
        } else if (rc != SPINDLE_ETIMEDOUT)
            return rc;
        else if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT,
                            "view %llu: joiner %u did not start within %d ms of its last progress",
                            (unsigned long long)view, joiner, step_timeout_ms(m));
    }
}
