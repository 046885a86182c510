/*
 * Shared-memory transport: member processes on one host map each other's
 * registered regions, so a write is a plain store into the peer's memory with
 * no CPU work at the target.
 *
 * Regions and the per-endpoint control page are memfd mappings. A descriptor
 * carries (pid, fd, length, nonce); a peer maps the object by opening
 * /proc/<pid>/fd/<fd>. Nothing is named in /dev/shm, so a process killed with
 * -9 leaks nothing: the kernel frees the memory when the last mapping goes.
 * A region's object is named for its endpoint's nonce, which the region
 * descriptor carries too: an import checks both against the nonce of the
 * peer it connected to, so it maps that peer's region or nothing.
 *
 * Slices: tp_rmr_import_slice maps only the pages of the slice, so a peer
 * holds no mapping of the rest of the region (a stray store there faults in
 * the writer, not in our memory), and a post outside the slice is refused.
 *
 * T1: aligned 8-byte words are copied with 8-byte atomic stores. T2: every
 * write ends with a release fence, so a later write is never visible before
 * an earlier one. T3: writes complete synchronously. T4: each peer is watched
 * through a pidfd; poll() reports a dead peer once.
 *
 * Doorbell: the control page holds a futex sequence word and a sleeping flag.
 * The waiter takes a token (the sequence) before its last check for work,
 * then stores sleeping=1, re-reads the sequence and waits only while it still
 * equals the token; the ringer stores its data, advances the sequence (always)
 * and issues the futex wake only if it is the one that clears sleeping
 * (exchange), so a sleeper gets one wake however many ring. Both sides use
 * sequentially consistent operations, so either the waiter sees the advanced
 * sequence or the ringer sees sleeping=1 (no lost wake-up), and ringing an
 * awake peer costs one atomic add and one load, no system call.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm/shm_impl.h"
#include "util/clock.h"
#include "util/error.h"

#define SHM_CHECK_NS (5ull * 1000 * 1000)

struct shm_control {
    uint32_t doorbell_seq; /* futex word */
    uint32_t sleeping;
    uint64_t nonce;
};

struct shm_mr {
    struct tp_mr base;
    void *addr;
    size_t length;
    int fd;
    uint64_t nonce; /* its endpoint's */
};

/* The writable window [first, end) of a peer's region of region_length
 * bytes; the mapping covers the whole pages around it, from map_offset. */
struct shm_rmr {
    struct tp_rmr base;
    uint8_t *map;
    size_t map_length;
    uint64_t map_offset;
    uint64_t first;
    uint64_t end;
    uint64_t region_length;
};

struct shm_peer {
    struct tp_peer base;
    struct shm_endpoint *ep;
    struct shm_control *control;
    int pidfd;
    int32_t pid;
    uint64_t nonce; /* its endpoint's: its regions carry it */
    atomic_bool failed;
    bool reported;
    struct shm_peer *next;
};

struct shm_endpoint {
    struct tp_endpoint base;
    int control_fd;
    struct shm_control *control;
    uint64_t nonce;
    int failure_timeout_ms;
    struct shm_peer *peers;
    uint64_t last_check_ns;
    pthread_mutex_t events_lock; /* posts (any thread) and poll share events */
    struct tp_event events[SHM_EVENTS_MAX];
    unsigned num_events;
    unsigned reserved; /* places promised to signaled posts under way */
    struct tp_stats stats;
};

extern const struct tp_ops tp_shm_ops;

/* The backend's objects behind the public ones (each starts with it). */
static struct shm_endpoint *shm_ep(struct tp_endpoint *ep)
{
    return (struct shm_endpoint *)ep;
}
static struct shm_peer *shm_peer(struct tp_peer *peer)
{
    return (struct shm_peer *)peer;
}
static struct shm_mr *shm_mr(struct tp_mr *mr)
{
    return (struct shm_mr *)mr;
}
static struct shm_rmr *shm_rmr(struct tp_rmr *rmr)
{
    return (struct shm_rmr *)rmr;
}

static long futex(uint32_t *word, int op, uint32_t value, const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, value, timeout, NULL, 0);
}

static int shm_open_ep(const struct tp_config *config, struct tp_endpoint **out)
{
    struct shm_endpoint *ep = calloc(1, sizeof *ep);
    if (ep == NULL)
        return sp_error(SPINDLE_ENOMEM, "shm: out of memory for endpoint");
    void *addr;
    int rc = shm_memfd_map("spindle-control", sizeof(struct shm_control), &ep->control_fd, &addr);
    if (rc != 0) {
        free(ep);
        return rc;
    }
    ep->base.ops = &tp_shm_ops;
    ep->control = addr;
    pthread_mutex_init(&ep->events_lock, NULL);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    ep->nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)now.tv_nsec ^ (uint64_t)now.tv_sec << 20;
    ep->control->nonce = ep->nonce;
    ep->failure_timeout_ms = config != NULL && config->failure_timeout_ms > 0
                                 ? config->failure_timeout_ms
                                 : SHM_DEFAULT_MS;
    *out = &ep->base;
    return 0;
}

static void disconnect_peer(struct shm_endpoint *ep, struct shm_peer *peer)
{
    /* events_lock: doorbell_wait walks the peer list under it alone. */
    pthread_mutex_lock(&ep->events_lock);
    for (struct shm_peer **link = &ep->peers; *link != NULL; link = &(*link)->next) {
        if (*link == peer) {
            __atomic_store_n(link, peer->next, __ATOMIC_RELAXED);
            break;
        }
    }
    /* Queued events must not name the peer once it is freed. */
    unsigned kept = 0;
    for (unsigned i = 0; i < ep->num_events; i++)
        if (ep->events[i].peer != &peer->base)
            ep->events[kept++] = ep->events[i];
    ep->num_events = kept;
    pthread_mutex_unlock(&ep->events_lock);
    munmap(peer->control, sizeof(struct shm_control));
    close(peer->pidfd);
    free(peer);
}

static void shm_disconnect(struct tp_endpoint *ep, struct tp_peer *peer)
{
    disconnect_peer(shm_ep(ep), shm_peer(peer));
}

static void shm_close(struct tp_endpoint *tep)
{
    if (tep == NULL)
        return;
    struct shm_endpoint *ep = shm_ep(tep);
    while (ep->peers != NULL)
        disconnect_peer(ep, ep->peers);
    munmap(ep->control, sizeof(struct shm_control));
    close(ep->control_fd);
    pthread_mutex_destroy(&ep->events_lock);
    free(ep);
}

static int shm_address(struct tp_endpoint *tep, struct tp_desc *out)
{
    struct shm_endpoint *ep = shm_ep(tep);
    return shm_desc_make(out, SHM_KIND_ADDRESS, ep->control_fd, sizeof(struct shm_control),
                         ep->nonce);
}

static int shm_mr_alloc(struct tp_endpoint *tep, size_t length, unsigned flags, void **addr,
                        struct tp_mr **out)
{
    if (length == 0)
        return sp_error(SPINDLE_EINVAL, "shm: cannot allocate a region of 0 bytes");
    struct shm_mr *mr = calloc(1, sizeof *mr);
    if (mr == NULL)
        return sp_error(SPINDLE_ENOMEM, "shm: out of memory for region");
    mr->base.ops = &tp_shm_ops;
    mr->nonce = shm_ep(tep)->nonce;
    char name[48];
    shm_region_name(mr->nonce, name, sizeof name);
    int rc = shm_memfd_map(name, length, &mr->fd, &mr->addr);
    if (rc != 0) {
        free(mr);
        return rc;
    }
    mr->length = length;
    *addr = mr->addr;
    *out = &mr->base;
    return 0;
}

static void shm_mr_free(struct tp_endpoint *ep, struct tp_mr *tmr)
{
    if (tmr == NULL)
        return;
    struct shm_mr *mr = shm_mr(tmr);
    munmap(mr->addr, mr->length);
    close(mr->fd);
    free(mr);
}

static int shm_mr_export(struct tp_mr *tmr, struct tp_desc *out)
{
    struct shm_mr *mr = shm_mr(tmr);
    return shm_desc_make(out, SHM_KIND_REGION, mr->fd, mr->length, mr->nonce);
}

static int shm_connect(struct tp_endpoint *tep, const struct tp_desc *peer_addr, int timeout_ms,
                       struct tp_peer **out)
{
    struct shm_endpoint *ep = shm_ep(tep);
    struct shm_wire wire;
    int rc = shm_desc_decode(peer_addr, SHM_KIND_ADDRESS, &wire);
    if (rc != 0)
        return rc;
    int pidfd = (int)syscall(SYS_pidfd_open, wire.pid, 0);
    if (pidfd < 0)
        return sp_error(SPINDLE_EUNREACH, "shm: peer pid %d is not running: %s", wire.pid,
                        strerror(errno));
    void *control;
    rc = shm_map_remote(&wire, "spindle-control", 0, sizeof(struct shm_control), &control);
    if (rc != 0) {
        close(pidfd);
        return rc;
    }
    struct shm_peer *peer = calloc(1, sizeof *peer);
    if (peer == NULL) {
        munmap(control, sizeof(struct shm_control));
        close(pidfd);
        return sp_error(SPINDLE_ENOMEM, "shm: out of memory for peer");
    }
    peer->base.ops = &tp_shm_ops;
    peer->control = control;
    if (__atomic_load_n(&peer->control->nonce, __ATOMIC_ACQUIRE) != wire.nonce) {
        disconnect_peer(ep, peer);
        return sp_error(SPINDLE_EUNREACH,
                        "shm: peer pid %d no longer owns that endpoint "
                        "(stale address)",
                        wire.pid);
    }
    peer->ep = ep;
    peer->pidfd = pidfd;
    peer->pid = wire.pid;
    peer->nonce = wire.nonce;
    pthread_mutex_lock(&ep->events_lock); /* see shm_disconnect */
    peer->next = ep->peers;
    __atomic_store_n(&ep->peers, peer, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&ep->events_lock);
    *out = &peer->base;
    return 0;
}

/* Imports the window [first, first + length) of a peer's region (the whole
 * region when length is 0), mapping only the pages around it. */
static int import_window(struct tp_peer *tpeer, const struct tp_desc *desc, uint64_t first,
                         uint64_t length, struct tp_rmr **out)
{
    struct shm_peer *peer = shm_peer(tpeer);
    struct shm_wire wire;
    int rc = shm_desc_decode(desc, SHM_KIND_REGION, &wire);
    if (rc != 0)
        return rc;
    if (wire.pid != peer->pid)
        return sp_error(SPINDLE_EINVAL, "shm: region of pid %d imported through peer pid %d",
                        wire.pid, peer->pid);
    if (wire.nonce != peer->nonce)
        return sp_error(SPINDLE_EPROTO,
                        "shm: region of pid %d carries nonce %#llx, not its endpoint's %#llx",
                        wire.pid, (unsigned long long)wire.nonce, (unsigned long long)peer->nonce);
    if (length == 0)
        length = wire.length;
    else if ((rc = tp_slice_check("shm", first, length, wire.length,
                                  tp_shm_ops.attr->slice_align)) != 0)
        return rc;
    /* The mapping starts and ends on page boundaries; the window is what
     * posts are held to. */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_offset = first / page * page;
    uint64_t map_end = (first + length + page - 1) / page * page;
    if (map_end > wire.length)
        map_end = wire.length;
    struct shm_rmr *rmr = calloc(1, sizeof *rmr);
    if (rmr == NULL)
        return sp_error(SPINDLE_ENOMEM, "shm: out of memory for remote region");
    rmr->base.ops = &tp_shm_ops;
    char name[48];
    shm_region_name(wire.nonce, name, sizeof name);
    void *addr;
    rc = shm_map_remote(&wire, name, map_offset, (size_t)(map_end - map_offset), &addr);
    if (rc != 0) {
        free(rmr);
        return rc;
    }
    rmr->map = addr;
    rmr->map_length = (size_t)(map_end - map_offset);
    rmr->map_offset = map_offset;
    rmr->first = first;
    rmr->end = first + length;
    rmr->region_length = wire.length;
    *out = &rmr->base;
    return 0;
}

static int shm_rmr_import(struct tp_peer *peer, const struct tp_desc *desc, struct tp_rmr **out)
{
    return import_window(peer, desc, 0, 0, out);
}

static int shm_rmr_import_slice(struct tp_peer *peer, const struct tp_desc *desc, uint64_t offset,
                                uint64_t length, struct tp_rmr **out)
{
    if (length == 0)
        return sp_error(SPINDLE_EINVAL, "shm: an empty slice at offset %llu",
                        (unsigned long long)offset);
    return import_window(peer, desc, offset, length, out);
}

static void shm_rmr_release(struct tp_peer *peer, struct tp_rmr *trmr)
{
    if (trmr == NULL)
        return;
    struct shm_rmr *rmr = shm_rmr(trmr);
    munmap(rmr->map, rmr->map_length);
    free(rmr);
}

/* Checks the peer's pidfd; marks it failed when the process has exited. */
static bool peer_check(struct shm_peer *peer)
{
    if (atomic_load(&peer->failed))
        return false;
    struct pollfd pfd = {.fd = peer->pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0) {
        atomic_store(&peer->failed, true);
        return false;
    }
    return true;
}

/* One write: 8-byte atomic stores for aligned words (T1). Every store is a
 * release store, so a reader that sees any word of a later write also sees
 * every word of the earlier ones (T2). On x86 a release store is a plain mov;
 * a release fence would do the same job but ThreadSanitizer cannot model one. */
static void copy_write(uint8_t *dst, const uint8_t *src, size_t length)
{
    while (length > 0 && ((uintptr_t)dst & 7) != 0) {
        __atomic_store_n(dst++, *src++, __ATOMIC_RELEASE);
        length--;
    }
    /* The source is the owner's live row: with early unlock it may be
     * updated (one atomic word at a time) while being copied, so aligned
     * words are read atomically too. */
    bool aligned = ((uintptr_t)src & 7) == 0;
    while (length >= 8) {
        uint64_t word;
        if (aligned)
            word = __atomic_load_n((const uint64_t *)(const void *)src, __ATOMIC_ACQUIRE);
        else
            memcpy(&word, src, 8);
        __atomic_store_n((uint64_t *)(void *)dst, word, __ATOMIC_RELEASE);
        dst += 8;
        src += 8;
        length -= 8;
    }
    while (length > 0) {
        __atomic_store_n(dst++, *src++, __ATOMIC_RELEASE);
        length--;
    }
}

static void stat_add(uint64_t *counter, uint64_t amount)
{
    __atomic_fetch_add(counter, amount, __ATOMIC_RELAXED);
}

/* SPINDLE_EINVAL naming write i, outside the window its peer lets us write. */
static int refuse_write(const struct shm_peer *peer, unsigned i, const struct tp_write *w,
                        const struct shm_rmr *remote)
{
    if (remote == NULL)
        return sp_error(SPINDLE_EINVAL, "shm: write %u to peer pid %d names no remote region", i,
                        peer->pid);
    if (remote->first == 0 && remote->end == remote->region_length)
        return sp_error(SPINDLE_EINVAL,
                        "shm: write %u of %u bytes at offset %llu exceeds "
                        "the peer region of %llu bytes",
                        i, w->length, (unsigned long long)w->remote_offset,
                        (unsigned long long)remote->region_length);
    return sp_error(SPINDLE_EINVAL,
                    "shm: write %u of %u bytes at offset %llu is outside the slice [%llu, %llu) "
                    "that peer pid %d lets this process write",
                    i, w->length, (unsigned long long)w->remote_offset,
                    (unsigned long long)remote->first, (unsigned long long)remote->end, peer->pid);
}

static int shm_post_writes(struct tp_peer *tpeer, const struct tp_write *writes, unsigned count,
                           unsigned flags, uint64_t cookie)
{
    struct shm_peer *peer = shm_peer(tpeer);
    if (atomic_load(&peer->failed))
        return sp_error(SPINDLE_EPEERFAILED, "shm: peer pid %d has failed", peer->pid);
    for (unsigned i = 0; i < count; i++) {
        const struct tp_write *w = &writes[i];
        const struct shm_rmr *remote = w->remote == NULL ? NULL : shm_rmr(w->remote);
        if (remote == NULL || w->remote_offset < remote->first || w->remote_offset > remote->end ||
            w->length > remote->end - w->remote_offset)
            return refuse_write(peer, i, w, remote);
    }
    struct shm_endpoint *ep = peer->ep;
    bool signaled = (flags & TP_POST_SIGNALED) != 0;
    if (signaled) {
        /* The completion needs a place in the queue (T3: a signaled batch
         * is always reported); a full queue refuses the post before
         * anything is written. Failure reports keep a reserve of their own. */
        pthread_mutex_lock(&ep->events_lock);
        bool room = ep->num_events + ep->reserved < SHM_EVENTS_MAX - SHM_FAILURE_SLOTS;
        if (room)
            ep->reserved++;
        pthread_mutex_unlock(&ep->events_lock);
        if (!room)
            return sp_error(SPINDLE_EAGAIN, "shm: %u completions wait to be polled",
                            SHM_EVENTS_MAX - SHM_FAILURE_SLOTS);
    }
    for (unsigned i = 0; i < count; i++) {
        const struct shm_rmr *remote = shm_rmr(writes[i].remote);
        copy_write(remote->map + (writes[i].remote_offset - remote->map_offset), writes[i].local,
                   writes[i].length);
        stat_add(&ep->stats.bytes_written, writes[i].length);
    }
    stat_add(&ep->stats.writes_posted, count);
    if (count > 0) {
        stat_add(&ep->stats.batches_posted, 1);
        stat_add(&ep->stats.doorbells, 1);
    }
    if (signaled) {
        stat_add(&ep->stats.signaled, 1);
        pthread_mutex_lock(&ep->events_lock);
        ep->reserved--;
        ep->events[ep->num_events++] =
            (struct tp_event){.type = TP_EVENT_WRITE_DONE, .peer = tpeer, .cookie = cookie};
        pthread_mutex_unlock(&ep->events_lock);
    }
    return 0;
}

/* Queues the failure event of a dead peer once; events_lock held. */
static void report_failed(struct shm_endpoint *ep, struct shm_peer *peer)
{
    if (peer->reported || ep->num_events >= SHM_EVENTS_MAX)
        return;
    peer->reported = true;
    ep->events[ep->num_events++] = (struct tp_event){
        .type = TP_EVENT_PEER_FAILED, .peer = &peer->base, .error = SPINDLE_EPEERFAILED};
}

/* Peers whose pidfds one poll() looks at. */
#define SHM_CHECK_BATCH 32

/* Queues a failure event for every newly dead peer; events_lock held. The
 * live peers' pidfds go to one poll() (per SHM_CHECK_BATCH of them): the
 * predicate thread checks before every sleep, and a system call per peer
 * there was one per peer and sleep. */
static void check_peers(struct shm_endpoint *ep, uint64_t now)
{
    ep->last_check_ns = now;
    struct shm_peer *peer = ep->peers;
    while (peer != NULL) {
        struct pollfd pfds[SHM_CHECK_BATCH];
        struct shm_peer *polled[SHM_CHECK_BATCH];
        nfds_t count = 0;
        for (; peer != NULL && count < SHM_CHECK_BATCH; peer = peer->next) {
            if (atomic_load(&peer->failed)) {
                report_failed(ep, peer);
                continue;
            }
            pfds[count] = (struct pollfd){.fd = peer->pidfd, .events = POLLIN};
            polled[count++] = peer;
        }
        if (count == 0 || poll(pfds, count, 0) <= 0)
            continue;
        for (nfds_t i = 0; i < count; i++) {
            if (pfds[i].revents == 0)
                continue;
            atomic_store(&polled[i]->failed, true);
            report_failed(ep, polled[i]);
        }
    }
}

static int shm_poll(struct tp_endpoint *tep, struct tp_event *events, int max)
{
    struct shm_endpoint *ep = shm_ep(tep);
    pthread_mutex_lock(&ep->events_lock);
    uint64_t now = sp_now_ns();
    if (now - ep->last_check_ns >= SHM_CHECK_NS)
        check_peers(ep, now);
    int n = 0;
    while (n < max && (unsigned)n < ep->num_events) {
        events[n] = ep->events[n];
        n++;
    }
    memmove(ep->events, ep->events + n, (ep->num_events - (unsigned)n) * sizeof ep->events[0]);
    ep->num_events -= (unsigned)n;
    pthread_mutex_unlock(&ep->events_lock);
    return n;
}

static int shm_peer_state(struct tp_peer *tpeer)
{
    struct shm_peer *peer = shm_peer(tpeer);
    if (!peer_check(peer))
        return sp_error(SPINDLE_EPEERFAILED, "shm: peer pid %d has failed", peer->pid);
    return 0;
}

/* Advances the sequence; wakes the waiter only when it sleeps (the same
 * store/load pairing as shm_doorbell_wait: no lost wake-up). Only the
 * ringer that clears the sleeping flag issues the futex wake: a sleeper
 * woken but not yet running would otherwise take one system call from
 * every commit and every peer's post meanwhile (at window 100, as many as
 * the wakes it needed). A ringer that finds the flag cleared by another
 * has advanced the sequence before, so the woken thread's next wait
 * cannot sleep on a token older than its ring. Returns whether it issued
 * a wake. */
static bool ring(struct shm_control *control)
{
    __atomic_add_fetch(&control->doorbell_seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&control->sleeping, __ATOMIC_SEQ_CST) == 0 ||
        __atomic_exchange_n(&control->sleeping, 0, __ATOMIC_SEQ_CST) == 0)
        return false;
    futex(&control->doorbell_seq, FUTEX_WAKE, 1, NULL);
    return true;
}

static int shm_doorbell_ring(struct tp_peer *tpeer)
{
    struct shm_peer *peer = shm_peer(tpeer);
    if (atomic_load(&peer->failed))
        return sp_error(SPINDLE_EPEERFAILED, "shm: peer pid %d has failed", peer->pid);
    /* Always advance the sequence, so a peer that armed its doorbell before
     * our writes landed and checked for work before they did cannot go to
     * sleep on a stale token; only the futex wake is skipped when the peer
     * is awake. (Skipping the advance too lost wake-ups: the peer's
     * sleeping flag is set after its last check for work.) */
    if (ring(peer->control))
        stat_add(&peer->ep->stats.wakeups_sent, 1);
    return 0;
}

static void shm_doorbell_ring_self(struct tp_endpoint *ep)
{
    (void)ring(shm_ep(ep)->control);
}

static uint64_t shm_doorbell_arm(struct tp_endpoint *ep)
{
    return __atomic_load_n(&shm_ep(ep)->control->doorbell_seq, __ATOMIC_SEQ_CST);
}

static int shm_doorbell_wait(struct tp_endpoint *tep, uint64_t token, int timeout_ms)
{
    struct shm_endpoint *ep = shm_ep(tep);
    /* Wake at least twice per failure timeout so dead peers are noticed. */
    bool has_peers = __atomic_load_n(&ep->peers, __ATOMIC_RELAXED) != NULL;
    int cap = has_peers ? ep->failure_timeout_ms / 2 : timeout_ms;
    /* The check in poll is rate-limited: a peer that died since the last
     * one would otherwise go unnoticed for a whole sleep (a ring from a
     * peer that noticed it may have come before we armed). Look now. */
    pthread_mutex_lock(&ep->events_lock);
    check_peers(ep, sp_now_ns());
    bool news = ep->num_events > 0;
    pthread_mutex_unlock(&ep->events_lock);
    if (news)
        return 0;
    if (cap < 1)
        cap = 1;
    if (timeout_ms < 0 || timeout_ms > cap)
        timeout_ms = cap;
    /* Sequentially consistent store then load: with the ringer's seq_cst
     * increment then load of `sleeping`, at least one side sees the other. */
    __atomic_store_n(&ep->control->sleeping, 1, __ATOMIC_SEQ_CST);
    uint32_t seq = __atomic_load_n(&ep->control->doorbell_seq, __ATOMIC_SEQ_CST);
    if (seq == (uint32_t)token) {
        struct timespec timeout = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
        stat_add(&ep->stats.sleeps, 1);
        futex(&ep->control->doorbell_seq, FUTEX_WAIT, seq, &timeout);
        seq = __atomic_load_n(&ep->control->doorbell_seq, __ATOMIC_SEQ_CST);
    }
    __atomic_store_n(&ep->control->sleeping, 0, __ATOMIC_SEQ_CST);
    return seq != (uint32_t)token ? 0 : SPINDLE_ETIMEDOUT;
}

static void shm_stats(struct tp_endpoint *ep, struct tp_stats *out)
{
    uint64_t *dst = (uint64_t *)(void *)out;
    uint64_t *src = (uint64_t *)(void *)&shm_ep(ep)->stats;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

extern const struct tp_attr tp_shm_attr;

const struct tp_ops tp_shm_ops = {
    .name = "shm",
    .attr = &tp_shm_attr,
    .open = shm_open_ep,
    .close = shm_close,
    .address = shm_address,
    .mr_alloc = shm_mr_alloc,
    .mr_free = shm_mr_free,
    .mr_export = shm_mr_export,
    .connect = shm_connect,
    .disconnect = shm_disconnect,
    .rmr_import = shm_rmr_import,
    .rmr_import_slice = shm_rmr_import_slice,
    .rmr_release = shm_rmr_release,
    .post_writes = shm_post_writes,
    .poll = shm_poll,
    .peer_state = shm_peer_state,
    .doorbell_ring = shm_doorbell_ring,
    .doorbell_ring_self = shm_doorbell_ring_self,
    .doorbell_arm = shm_doorbell_arm,
    .doorbell_wait = shm_doorbell_wait,
    .stats = shm_stats,
};
