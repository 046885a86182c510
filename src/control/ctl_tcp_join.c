/*
 * TCP control channel, joins: the listening socket stays open after
 * set-up (its connections are accepted and identified without blocking,
 * under caps: ctl_tcp_accept.c). A process that wants to join opens a
 * short connection with a hello from CTL_JOIN_FROM and one request frame;
 * the member keeps it pending (one at a time) until the membership layer
 * answers with one frame, then closes it. A joiner that was given a member id connects to
 * every current member (hello from its id and its admission), and from
 * then on is a member of the framed exchange like any other. An id may be
 * given again once its holder is gone: a hello with a larger admission
 * than the slot's holder replaces it (connection, queue and mailbox), a
 * hello with the same or a smaller one is refused, so a stale process
 * (a joiner that was dropped, then resumed) cannot take a newer holder's
 * place, and the members that started the group (admission 0) never
 * connect late.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/ctl_tcp_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/* A join request may leave the group open (0). Modelled in
 * models/join.pml (LATE_OK, with ctl_tcp_expect_member and
 * ctl_tcp_remove_member). */
const char *ctl_late_refusal(const struct ctl_tcp *ctl, const struct ctl_hello *hello, char *why,
                             size_t cap)
{
    if (hello->group != ctl->group && !(hello->from == CTL_JOIN_FROM && hello->group == 0))
        return "a member of another group";
    if (ctl_hello_compatible(hello, &ctl->versions, "the connecting process") < 0) {
        snprintf(why, cap, "%s", spindle_errmsg());
        return why;
    }
    if (hello->from == CTL_JOIN_FROM)
        return ctl->join_fd >= 0 ? "a join request while another one is pending" : NULL;
    if (hello->num_members != ctl->num_members)
        return "another member count";
    if (hello->from >= CTL_MAX_MEMBERS || hello->from == ctl->self || hello->admission == 0)
        return "a member index it may not connect as";
    const struct ctl_peer *p = &ctl->peers[hello->from];
    if (hello->admission <= p->admission) {
        snprintf(why, cap, "member index %u of admission %llu, held by admission %llu", hello->from,
                 (unsigned long long)hello->admission, (unsigned long long)p->admission);
        return why;
    }
    return NULL;
}

const char *ctl_late_take(struct ctl_tcp *ctl, struct ctl_pending *p)
{
    const struct ctl_hello *hello = &p->hello;
    if (hello->from == CTL_JOIN_FROM) {
        /* Another request may have come in while this one was read. */
        if (ctl->join_fd >= 0)
            return "a join request while another one is pending";
        ctl->join_fd = p->fd;
        ctl->join_sess = p->sess;
        ctl->join = p->body;
        ctl->join_len = p->frame.length;
    } else {
        struct ctl_peer *slot = &ctl->peers[hello->from];
        if (slot->used)
            SP_LOG_INFO_("control", "member %u: slot %u passes from admission %llu to %llu",
                         ctl->self, hello->from, (unsigned long long)slot->admission,
                         (unsigned long long)hello->admission);
        ctl_reset_slot(ctl, hello->from);
        slot->fd = p->fd;
        slot->sess = p->sess;
        slot->sess.rec_max = 0; /* a member: blobs up to CTL_BLOB_MAX */
        slot->used = true;
        slot->admission = hello->admission;
        SP_LOG_INFO_("control", "member %u: joiner %u connected", ctl->self, hello->from);
    }
    p->fd = -1;
    memset(&p->sess, 0, sizeof p->sess); /* passed on, not to be cleared */
    p->body = NULL;
    return NULL;
}

int ctl_join_ask(const char *group_name, const struct ctl_versions *versions,
                 const struct ctl_keyring *keys, const char *host, uint16_t port,
                 const void *request, size_t length, void **reply, size_t *reply_length,
                 int timeout_ms)
{
    if (host == NULL || versions == NULL || reply == NULL || reply_length == NULL ||
        length > CTL_JOIN_REQUEST_MAX)
        return sp_error(SPINDLE_EINVAL,
                        "control: join request of %zu bytes (at most %u) or no host", length,
                        CTL_JOIN_REQUEST_MAX);
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    struct ctl_hello hello = {CTL_JOIN_FROM, 0, ctl_group_hash(group_name), *versions, 0}, answer;
    int fd = -1;
    int rc = keys != NULL && keys->count > 0 ? ctl_crypto_init() : 0;
    struct ctl_sess sess = {0};
    if (rc == 0)
        rc = ctl_dial("the join contact", host, port, &hello, versions, keys, deadline, &fd,
                      &answer, &sess);
    if (rc != 0)
        return rc;
    rc = ctl_write_frame(fd, &sess, CTL_JOIN_FROM, request, length, deadline);
    const char *why = "the connection broke";
    uint8_t *bytes = NULL;
    if (rc == 0)
        rc = ctl_read_frame(fd, &sess, CTL_BLOB_MAX, deadline, &bytes, reply_length, &why);
    close(fd);
    if (rc != 0) {
        rc = sp_error(SPINDLE_EUNREACH, "control: %s:%u did not answer the join request: %s", host,
                      port, why);
        ctl_sess_clear(&sess);
        return rc;
    }
    ctl_sess_clear(&sess);
    *reply = bytes;
    return 0;
}

int ctl_tcp_join_poll(struct ctl *base, int timeout_ms, void *request, size_t capacity,
                      size_t *length)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    pthread_mutex_lock(&ctl->lock);
    /* One round: a request that is still coming in (it takes a few rounds:
     * handshake, hello, its frame) is seen at a later call. */
    if (ctl->join_fd < 0)
        ctl_progress(ctl, timeout_ms);
    int rc = 0;
    if (ctl->join_fd >= 0) {
        if (ctl->join_len > capacity) {
            SP_LOG_WARNING("control", "member %u: refusing a join request of %zu bytes", ctl->self,
                           ctl->join_len);
            close(ctl->join_fd);
            ctl->join_fd = -1;
            ctl_sess_clear(&ctl->join_sess);
            free(ctl->join);
            ctl->join = NULL;
        } else {
            memcpy(request, ctl->join, ctl->join_len);
            *length = ctl->join_len;
            rc = 1;
        }
    }
    pthread_mutex_unlock(&ctl->lock);
    return rc;
}

int ctl_tcp_join_answer(struct ctl *base, const void *reply, size_t length)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    pthread_mutex_lock(&ctl->lock);
    int fd = ctl->join_fd;
    struct ctl_sess sess = ctl->join_sess;
    memset(&ctl->join_sess, 0, sizeof ctl->join_sess);
    ctl->join_fd = -1;
    free(ctl->join);
    ctl->join = NULL;
    pthread_mutex_unlock(&ctl->lock);
    if (fd < 0)
        return sp_error(SPINDLE_EINVAL, "control: no join request is pending");
    int rc = ctl_write_frame(fd, &sess, ctl->self, reply, length, sp_now_ns() + 2000000000ull);
    ctl_sess_clear(&sess);
    close(fd);
    return rc == 0 ? 0
                   : sp_error(SPINDLE_EUNREACH, "control: the joiner went away before the answer");
}

void ctl_tcp_add_member(struct ctl *base, uint32_t id, const char *host, uint16_t port)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (id >= CTL_MAX_MEMBERS || host == NULL)
        return;
    pthread_mutex_lock(&ctl->lock);
    char *copy = strdup(host);
    if (copy != NULL) {
        free((char *)ctl->members[id].host);
        ctl->members[id].host = copy;
        ctl->members[id].port = port;
    }
    pthread_mutex_unlock(&ctl->lock);
}

void ctl_tcp_remove_member(struct ctl *base, uint32_t id)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (id >= CTL_MAX_MEMBERS || id == ctl->self)
        return;
    pthread_mutex_lock(&ctl->lock);
    struct ctl_peer *p = &ctl->peers[id];
    /* Still used, with its admission: only a later holder connects. */
    bool used = p->used;
    uint64_t admission = p->admission;
    ctl_reset_slot(ctl, id);
    p->used = used;
    p->admission = admission;
    p->error = SPINDLE_EUNREACH;
    snprintf(p->why, sizeof p->why, "it left the group");
    pthread_mutex_unlock(&ctl->lock);
}

void ctl_tcp_expect_member(struct ctl *base, uint32_t id, uint64_t admission)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (id >= CTL_MAX_MEMBERS || id == ctl->self || admission == 0)
        return;
    pthread_mutex_lock(&ctl->lock);
    struct ctl_peer *p = &ctl->peers[id];
    if (p->admission < admission) {
        ctl_reset_slot(ctl, id);
        p->admission = admission - 1;
    }
    pthread_mutex_unlock(&ctl->lock);
}
