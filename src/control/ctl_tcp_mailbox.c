/*
 * TCP control channel, framed exchange: each connection has an outgoing
 * queue and an incoming mailbox holding the latest blob of each tag (so a
 * member may publish ahead of others, and a later blob of a tag replaces an
 * earlier one). Non-blocking sockets in one poll loop, so large blobs
 * cannot deadlock on full socket buffers.
 *
 * Everything received is checked: a frame header that breaks the codec
 * (control/ctl_wire.h), a false sender, an oversized length or a wrong
 * checksum drops that connection with a logged reason, and waiting for
 * that member then fails with SPINDLE_EPROTO naming it. What a member
 * may make another hold is bounded: a partial frame of at most
 * CTL_BLOB_MAX, and a queue of at most CTL_PEER_OUT_MAX for a member that
 * does not read (beyond it that member is dropped, as gone). Each round of
 * progress also advances the connections not yet identified
 * (ctl_tcp_accept.c), never waiting on one. publish, collect
 * and allgather may be called from several threads (collect polls in short
 * slices under the lock so that one waiter does not hold the others up).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/ctl_tcp_impl.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/log.h"

int ctl_read_frame(int fd, struct ctl_sess *sess, uint32_t max, uint64_t deadline, uint8_t **out,
                   size_t *length, const char **why)
{
    uint8_t bytes[CTL_FRAME_SIZE];
    struct ctl_frame f;
    *out = NULL;
    int rc = ctl_sess_read(sess, fd, bytes, sizeof bytes, deadline);
    if (rc != 0) {
        *why = rc == SPINDLE_EPROTO ? sess->why : "no complete frame in time";
        return SPINDLE_EPROTO;
    }
    if (ctl_wire_decode_frame(bytes, sizeof bytes, &f) < 0) {
        *why = "garbage instead of a frame";
        return SPINDLE_EPROTO;
    }
    if (f.length > max) {
        *why = "an oversized frame";
        return SPINDLE_EPROTO;
    }
    uint8_t *body = malloc(f.length > 0 ? f.length : 1);
    if (body == NULL) {
        *why = "no memory for the frame";
        return SPINDLE_ENOMEM;
    }
    rc = ctl_sess_read(sess, fd, body, f.length, deadline);
    if (rc != 0 || sp_crc32c(0, body, f.length) != f.crc) {
        free(body);
        *why = rc == SPINDLE_EPROTO ? sess->why : "a truncated or corrupt frame";
        return SPINDLE_EPROTO;
    }
    *out = body;
    *length = f.length;
    return 0;
}

int ctl_write_frame(int fd, struct ctl_sess *sess, uint32_t from, const void *blob, size_t length,
                    uint64_t deadline)
{
    struct ctl_frame f = {0, from, (uint32_t)length, sp_crc32c(0, blob, length)};
    uint8_t bytes[CTL_FRAME_SIZE];
    ctl_wire_encode_frame(&f, bytes);
    int rc = ctl_sess_write(sess, fd, bytes, sizeof bytes, deadline);
    if (rc == 0 && length > 0)
        rc = ctl_sess_write(sess, fd, blob, length, deadline);
    return rc;
}

/* Appends bytes to member j's outgoing queue, sealed as one record when
 * the connection is keyed. Lock held. */
static int ctl_queue(struct ctl_tcp *ctl, uint32_t j, const void *bytes, size_t length)
{
    struct ctl_peer *p = &ctl->peers[j];
    if (length == 0 || p->fd < 0)
        return 0;
    size_t size = ctl_sess_sealed_size(&p->sess, length);
    if (p->out_sent > 0 && p->out_len + size > p->out_cap) { /* reuse what has left */
        memmove(p->out, p->out + p->out_sent, p->out_len - p->out_sent);
        p->out_len -= p->out_sent;
        p->out_sent = 0;
    }
    if (p->out_len + size > CTL_PEER_OUT_MAX) {
        char why[160];
        snprintf(why, sizeof why, "member %u does not read: %zu bytes queued for it, at most %zu",
                 ctl->members[j].id, p->out_len + size, (size_t)CTL_PEER_OUT_MAX);
        ctl_drop(ctl, j, SPINDLE_EUNREACH, why);
        return 0; /* as for any member that is gone: collects name it */
    }
    if (p->out_len + size > p->out_cap) {
        size_t cap = p->out_cap ? p->out_cap : 256;
        while (cap < p->out_len + size)
            cap *= 2;
        if (cap > CTL_PEER_OUT_MAX)
            cap = CTL_PEER_OUT_MAX;
        uint8_t *grown = realloc(p->out, cap);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "control: out of memory queueing %zu bytes", length);
        p->out = grown;
        p->out_cap = cap;
    }
    ctl_sess_seal(&p->sess, bytes, length, p->out + p->out_len);
    p->out_len += size;
    return 0;
}

void ctl_drop(struct ctl_tcp *ctl, uint32_t j, int error, const char *why)
{
    struct ctl_peer *p = &ctl->peers[j];
    if (p->fd < 0)
        return;
    if (error == SPINDLE_EPROTO)
        SP_LOG_WARNING("control", "member %u: dropping the connection of member %u: %s",
                       ctl->members[ctl->self].id, ctl->members[j].id, why);
    close(p->fd);
    p->fd = -1;
    ctl_sess_clear(&p->sess);
    p->error = error;
    snprintf(p->why, sizeof p->why, "%s", why);
    free(p->body);
    p->body = NULL;
}

void ctl_reset_slot(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    if (p->fd >= 0)
        close(p->fd);
    free(p->out);
    free(p->body);
    for (uint32_t i = 0; i < p->box_len; i++)
        free(p->box[i].data);
    ctl_sess_clear(&p->sess);
    memset(p, 0, sizeof *p);
    p->fd = -1;
}

/* Stores a complete frame's blob as member j's latest for its tag. */
static void ctl_store(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    struct ctl_msg *slot = NULL;
    for (uint32_t i = 0; i < p->box_len; i++)
        if (p->box[i].tag == p->hdr.tag)
            slot = &p->box[i];
    if (slot == NULL) {
        if (p->box_len == CTL_BOX_TAGS) {
            free(p->box[0].data);
            memmove(p->box, p->box + 1, (CTL_BOX_TAGS - 1) * sizeof *p->box);
            p->box_len--;
        }
        slot = &p->box[p->box_len++];
        slot->data = NULL;
    }
    free(slot->data);
    slot->tag = p->hdr.tag;
    slot->length = p->hdr.length;
    slot->data = p->body;
    p->body = NULL;
}

/* Checks member j's complete frame header; false (connection dropped)
 * when it breaks the format. */
static bool ctl_header_ok(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    char why[320];
    if (ctl_wire_decode_frame(p->hdr_bytes, sizeof p->hdr_bytes, &p->hdr) < 0)
        snprintf(why, sizeof why, "member %u sent garbage (%s)", ctl->members[j].id,
                 spindle_errmsg());
    else if (p->hdr.from != j)
        snprintf(why, sizeof why, "member %u claims to be index %u", ctl->members[j].id,
                 p->hdr.from);
    else
        why[0] = '\0';
    if (why[0] != '\0') {
        ctl_drop(ctl, j, SPINDLE_EPROTO, why);
        return false;
    }
    p->body = malloc(p->hdr.length > 0 ? p->hdr.length : 1);
    if (p->body == NULL) {
        ctl_drop(ctl, j, SPINDLE_ENOMEM, "out of memory for a blob");
        return false;
    }
    return true;
}

/* Reads what member j has sent, frame by frame, into its mailbox. */
static void ctl_read(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    char why[224];
    while (p->fd >= 0) {
        uint8_t *dst;
        size_t want;
        if (p->got < CTL_FRAME_SIZE) {
            dst = p->hdr_bytes + p->got;
            want = CTL_FRAME_SIZE - p->got;
        } else {
            dst = p->body + (p->got - CTL_FRAME_SIZE);
            want = CTL_FRAME_SIZE + p->hdr.length - p->got;
        }
        ssize_t n = want > 0 ? ctl_sess_recv(&p->sess, p->fd, dst, want) : 0;
        if (n == CTL_SESS_REFUSED) {
            snprintf(why, sizeof why, "member %u: %s", ctl->members[j].id, p->sess.why);
            ctl_drop(ctl, j, SPINDLE_EPROTO, why);
            return;
        }
        if (want > 0 && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (want > 0 && n <= 0) {
            snprintf(why, sizeof why, "member %u %s", ctl->members[j].id,
                     n == 0 ? "closed its connection" : strerror(errno));
            ctl_drop(ctl, j, SPINDLE_EUNREACH, why);
            return;
        }
        p->got += (size_t)n;
        if (p->got == CTL_FRAME_SIZE && !ctl_header_ok(ctl, j))
            return;
        if (p->got >= CTL_FRAME_SIZE && p->got == CTL_FRAME_SIZE + p->hdr.length) {
            if (sp_crc32c(0, p->body, p->hdr.length) != p->hdr.crc) {
                snprintf(why, sizeof why, "member %u sent a corrupt blob for tag %u",
                         ctl->members[j].id, p->hdr.tag);
                ctl_drop(ctl, j, SPINDLE_EPROTO, why);
                return;
            }
            ctl_store(ctl, j);
            p->got = 0;
        }
    }
}

void ctl_write(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    while (p->fd >= 0 && p->out_sent < p->out_len) {
        ssize_t n = send(p->fd, p->out + p->out_sent, p->out_len - p->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n < 0) {
            char why[160];
            snprintf(why, sizeof why, "sending to member %u failed: %s", ctl->members[j].id,
                     strerror(errno));
            ctl_drop(ctl, j, SPINDLE_EUNREACH, why);
            return;
        }
        p->out_sent += (size_t)n;
    }
    if (p->out_sent == p->out_len)
        p->out_sent = p->out_len = 0;
}

/* One poll of every connection and the listener, up to ms; true when a
 * member's connection had something (the caller has news to look at). */
static bool ctl_progress_round(struct ctl_tcp *ctl, int ms)
{
    struct pollfd pfds[CTL_MAX_MEMBERS + 1 + CTL_PENDING_MAX];
    uint32_t n = CTL_MAX_MEMBERS;
    for (uint32_t j = 0; j < n; j++) {
        const struct ctl_peer *p = &ctl->peers[j];
        pfds[j] =
            (struct pollfd){p->fd, (short)(POLLIN | (p->out_len > p->out_sent ? POLLOUT : 0)), 0};
    }
    /* The listener and the connections not yet identified: advanced
     * without blocking, their deadlines met even when nothing happens. */
    uint32_t late = ctl_pending_poll_set(ctl, pfds + n, &ms);
    int ready = poll(pfds, n + late, ms);
    if (ready < 0)
        return true;
    ctl_pending_progress(ctl, pfds + n, late);
    bool news = false;
    for (uint32_t j = 0; ready > 0 && j < n; j++) {
        if (pfds[j].fd < 0 || pfds[j].revents == 0)
            continue;
        news = true;
        if (pfds[j].revents & POLLOUT)
            ctl_write(ctl, j);
        if (pfds[j].revents & (POLLIN | POLLHUP | POLLERR))
            ctl_read(ctl, j);
    }
    return news;
}

void ctl_progress(struct ctl_tcp *ctl, int ms)
{
    /* While connections are pending and the caller's time lasts, go on:
     * one that was just accepted has its hello on the way, and its dialer
     * waits for the answer (a joiner connecting to its slot should not wait
     * for the member's next call). A member's news or a join request ends
     * it at once. */
    uint64_t deadline = sp_now_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000ull;
    bool joining = ctl->join_fd >= 0;
    while (!ctl_progress_round(ctl, ms) && ctl_pending_any(ctl) && (joining || ctl->join_fd < 0) &&
           (ms = ctl_remaining_ms(deadline)) > 0)
        ;
}

int ctl_tcp_publish(struct ctl *base, uint32_t tag, const void *blob, size_t length, uint64_t to)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (length > CTL_BLOB_MAX)
        return sp_error(SPINDLE_EINVAL, "control: blob of %zu bytes exceeds %u", length,
                        CTL_BLOB_MAX);
    struct ctl_frame f = {tag, ctl->self, (uint32_t)length, sp_crc32c(0, blob, length)};
    uint8_t header[CTL_FRAME_SIZE];
    ctl_wire_encode_frame(&f, header);
    int rc = 0;
    pthread_mutex_lock(&ctl->lock);
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS && rc == 0; j++) {
        if (j == ctl->self || ((to >> j) & 1) == 0 || ctl->peers[j].fd < 0)
            continue;
        rc = ctl_queue(ctl, j, header, sizeof header);
        if (rc == 0)
            rc = ctl_queue(ctl, j, blob, length);
        if (rc == 0)
            ctl_write(ctl, j);
    }
    pthread_mutex_unlock(&ctl->lock);
    return rc;
}

/* Copies member j's latest blob of tag: 1 when copied, 0 when none yet, an
 * error when its length differs. Lock held. */
static int ctl_take(struct ctl_tcp *ctl, uint32_t j, uint32_t tag, void *out, size_t length)
{
    const struct ctl_peer *p = &ctl->peers[j];
    for (uint32_t i = 0; i < p->box_len; i++) {
        if (p->box[i].tag != tag)
            continue;
        if (p->box[i].length != length)
            return sp_error(SPINDLE_EPROTO,
                            "control: member %u sent %u bytes for tag %u, expected %zu",
                            ctl->members[j].id, p->box[i].length, tag, length);
        memcpy(out, p->box[i].data, length);
        return 1;
    }
    return 0;
}

/* Names the members of mask, "1, 4, 7", into names. */
static void ctl_name_members(const struct ctl_tcp *ctl, uint64_t mask, char *names, size_t cap)
{
    names[0] = '\0';
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++)
        if ((mask >> j) & 1) {
            size_t used = strlen(names);
            snprintf(names + used, cap - used, "%s%u", used ? ", " : "", ctl->members[j].id);
        }
}

/* One look at the mailboxes for the members of want not yet in *got. Lock
 * held. 0, or the error of a member that sent a bad blob or is gone. */
static int ctl_take_all(struct ctl_tcp *ctl, uint32_t tag, uint64_t want, uint64_t *got, void *all,
                        size_t length, size_t stride)
{
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++) {
        if (((want >> j) & 1) == 0 || ((*got >> j) & 1) != 0)
            continue;
        int r = ctl_take(ctl, j, tag, (uint8_t *)all + (size_t)j * stride, length);
        if (r < 0)
            return r;
        if (r == 1)
            *got |= 1ull << j;
        else if (ctl->peers[j].fd < 0 && ctl->peers[j].used) /* never used: may join */
            return sp_error(ctl->peers[j].error ? ctl->peers[j].error : SPINDLE_EUNREACH,
                            "control: member %u is gone: %s", ctl->members[j].id,
                            ctl->peers[j].why);
    }
    return 0;
}

/* collect with member j's blob at all + j * stride (stride 0: one member). */
static int ctl_collect_at(struct ctl *base, uint32_t tag, uint64_t from, void *all, size_t length,
                          size_t stride, int timeout_ms, uint64_t *have)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    uint64_t got = 0, want = from & ~(1ull << ctl->self);
    int rc = 0;
    for (;;) {
        pthread_mutex_lock(&ctl->lock);
        /* Read what has arrived first: a later blob of a tag replaces an
         * earlier one (a survivor that starts a view change again under a
         * larger set publishes its blob again), and with every earlier
         * blob in the mailbox nothing else would read the later ones. */
        ctl_progress(ctl, 0);
        rc = ctl_take_all(ctl, tag, want, &got, all, length, stride);
        /* Done when every blob is here and what this member queued for
         * them has left too (they may be waiting for it). */
        bool flushed = true;
        for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++)
            if (((want >> j) & 1) && ctl->peers[j].fd >= 0 &&
                ctl->peers[j].out_sent < ctl->peers[j].out_len)
                flushed = false;
        int ms = ctl_remaining_ms(deadline);
        if (rc == 0 && (got != want || !flushed) && ms > 0)
            ctl_progress(ctl, ms < 5 ? ms : 5); /* short slices: others share the lock */
        pthread_mutex_unlock(&ctl->lock);
        if (rc != 0 || (got == want && flushed))
            break;
        if (ms == 0) {
            char names[256];
            ctl_name_members(ctl, want & ~got, names, sizeof names);
            rc = sp_error(SPINDLE_ETIMEDOUT, "control: tag %u still waiting for members %s%s", tag,
                          names, got == want ? " (still sending to them)" : "");
            break;
        }
    }
    if (have != NULL)
        *have = got;
    return rc;
}

int ctl_tcp_collect(struct ctl *base, uint32_t tag, uint64_t from, void *all, size_t length,
                    int timeout_ms, uint64_t *have)
{
    return ctl_collect_at(base, tag, from, all, length, length, timeout_ms, have);
}

int ctl_tcp_collect_one(struct ctl *base, uint32_t tag, uint32_t from, void *out, size_t length,
                        int timeout_ms)
{
    if (from >= CTL_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "control: no member %u", from);
    return ctl_collect_at(base, tag, 1ull << from, out, length, 0, timeout_ms, NULL);
}

/* Removes member j's blob of tag into out: 1 when taken, 0 when none yet,
 * SPINDLE_EPROTO when it is larger than capacity (dropped). Lock held. */
static int ctl_remove(struct ctl_tcp *ctl, uint32_t j, uint32_t tag, void *out, size_t capacity,
                      size_t *length)
{
    struct ctl_peer *p = &ctl->peers[j];
    for (uint32_t i = 0; i < p->box_len; i++) {
        if (p->box[i].tag != tag)
            continue;
        struct ctl_msg msg = p->box[i];
        memmove(p->box + i, p->box + i + 1, (p->box_len - i - 1) * sizeof *p->box);
        p->box_len--;
        int rc = 1;
        if (msg.length > capacity)
            rc =
                sp_error(SPINDLE_EPROTO, "control: member %u sent %u bytes for tag %u, at most %zu",
                         ctl->members[j].id, msg.length, tag, capacity);
        else {
            memcpy(out, msg.data, msg.length);
            *length = msg.length;
        }
        free(msg.data);
        return rc;
    }
    return 0;
}

int ctl_tcp_take_one(struct ctl *base, uint32_t tag, uint32_t from, void *out, size_t capacity,
                     size_t *length, int timeout_ms)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (from >= CTL_MAX_MEMBERS || from == ctl->self)
        return sp_error(SPINDLE_EINVAL, "control: cannot take from member %u", from);
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    for (;;) {
        pthread_mutex_lock(&ctl->lock);
        ctl_progress(ctl, 0);
        int rc = ctl_remove(ctl, from, tag, out, capacity, length);
        const struct ctl_peer *p = &ctl->peers[from];
        if (rc == 0 && p->fd < 0 && p->used)
            rc = sp_error(p->error ? p->error : SPINDLE_EUNREACH, "control: member %u is gone: %s",
                          ctl->members[from].id, p->why);
        int ms = ctl_remaining_ms(deadline);
        if (rc == 0 && ms > 0)
            ctl_progress(ctl, ms < 5 ? ms : 5); /* short slices: others share the lock */
        pthread_mutex_unlock(&ctl->lock);
        if (rc != 0)
            return rc < 0 ? rc : 0;
        if (ms == 0)
            return sp_error(SPINDLE_ETIMEDOUT, "control: tag %u still waiting for member %u", tag,
                            ctl->members[from].id);
    }
}

int ctl_tcp_allgather(struct ctl *base, uint32_t tag, const void *mine, size_t length, void *all,
                      int timeout_ms)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    uint64_t everyone = ctl->num_members >= 64 ? UINT64_MAX : (1ull << ctl->num_members) - 1;
    memcpy((uint8_t *)all + (size_t)ctl->self * length, mine, length);
    int rc = ctl_tcp_publish(base, tag, mine, length, everyone);
    if (rc == 0)
        rc = ctl_tcp_collect(base, tag, everyone, all, length, timeout_ms > 0 ? timeout_ms : 30000,
                             NULL);
    return rc;
}
