/*
 * Dispatch mode (spindle_group_options.dispatch, docs/DISPATCH.md): the
 * library's threads queue upcalls, the application runs them.
 *
 * Producers: the deliver hook copies each delivered batch (at most 64
 * messages, view/view_epoch.c) into one item, on the predicate thread (on
 * the membership thread for a view change's trim); the view hook copies a
 * view, on the membership thread as soon as the view is installed, before
 * anything is delivered in it (view_config.report_at_install). So the
 * queue holds upcalls in the order they happened.
 *
 * The bound: the multicast asks group_dispatch_room before each delivery
 * step and stops at it (smc_options.deliver_room), counting each message
 * as SPINDLE_DISPATCH_OVERHEAD (or the log's larger overhead) plus its
 * length, exactly as queued here; what does not fit waits in the ring.
 * Only a trim, delivered whole, passes the bound. Producers never wait.
 *
 * Consumer: spindle_dispatch, one thread at a time (run_lock), pops an
 * item under `lock`, runs it with no lock held but run_lock, frees it,
 * then moves `progress` and wakes the predicate thread, which tries held
 * subgroups again.
 *
 * The descriptor is an eventfd whose counter is non-zero exactly while
 * the queue holds an item, the queue is closed (shutdown, leave) or the
 * member stopped on its own (`stopped`: removed, cut off in a minority,
 * set by the membership through view_config.stopped): `signalled`, under
 * `lock`; level-triggered readiness. So a loop learns of every end the
 * moment it happens, without reading the status now and then.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "group/group_impl.h"
#include "util/error.h"
#include "util/log.h"

#define DEFAULT_QUEUE_BYTES ((size_t)8 << 20)

enum item_kind { ITEM_MESSAGES, ITEM_VIEW, ITEM_SEND_READY, ITEM_STATE_SAVE, ITEM_P2P };

/* A state_save the membership thread waits for (ITEM_STATE_SAVE); shared
 * by the queue and the waiter, freed by the last of the two (lock). */
struct state_call {
    int refs;
    bool running, done, cancelled;
    int rc;
    void *data;
    size_t length;
};

struct item {
    struct item *next;
    size_t bytes; /* what it counts against the bound */
    enum item_kind kind;
    uint32_t subgroup;        /* ITEM_SEND_READY */
    struct state_call *state; /* ITEM_STATE_SAVE */
    size_t count;             /* messages */
    struct spindle_message *messages;
    struct spindle_view_info view;
    struct spindle_p2p_message p2p; /* ITEM_P2P: data follows the item */
};

struct group_dispatch {
    pthread_mutex_t lock; /* the queue, bytes, closed, signalled */
    pthread_cond_t cond;  /* an item was queued or the queue closed */
    pthread_mutex_t run_lock;
    struct item *head, *tail;
    size_t items;
    size_t bytes, limit;
    size_t largest;    /* what the largest message costs */
    size_t peak;       /* the most bytes queued at once */
    uint64_t progress; /* atomic: grows as room is freed */
    bool closed;
    bool stopped; /* the member stopped on its own: nothing more is queued */
    bool signalled;
    int fd;
};

int group_dispatch_create(const struct spindle_group_options *options, uint32_t largest_payload,
                          struct group_dispatch **out)
{
    size_t largest = (size_t)SPINDLE_DISPATCH_OVERHEAD + largest_payload;
    size_t limit = options->dispatch_queue_bytes;
    if (limit == 0)
        limit = DEFAULT_QUEUE_BYTES > 2 * largest ? DEFAULT_QUEUE_BYTES : 2 * largest;
    if (limit < largest)
        return sp_error(SPINDLE_EINVAL,
                        "dispatch_queue_bytes %zu cannot hold one message of max_payload %u "
                        "(%zu bytes with its overhead of %u)",
                        limit, largest_payload, largest, SPINDLE_DISPATCH_OVERHEAD);
    struct group_dispatch *d = calloc(1, sizeof *d);
    if (d == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the dispatch queue");
    d->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->fd < 0) {
        int err = errno;
        free(d);
        return sp_error(SPINDLE_EIO, "dispatch: eventfd: %s", strerror(err));
    }
    d->limit = limit;
    d->largest = largest;
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->run_lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cond, &attr);
    pthread_condattr_destroy(&attr);
    *out = d;
    return 0;
}

/* Makes the fd readable or not to match the queue. Lock held. */
static void signal_state(struct group_dispatch *d)
{
    bool ready = d->head != NULL || d->closed || d->stopped;
    if (ready == d->signalled)
        return;
    if (ready) {
        uint64_t one = 1;
        if (write(d->fd, &one, sizeof one) != (ssize_t)sizeof one)
            SP_LOG_ERR("group", "dispatch: eventfd write: %s", strerror(errno));
    } else {
        uint64_t value;
        if (read(d->fd, &value, sizeof value) != (ssize_t)sizeof value)
            SP_LOG_ERR("group", "dispatch: eventfd read: %s", strerror(errno));
    }
    d->signalled = ready;
}

/* Drops one reference to call. Lock held. */
static void state_call_put(struct state_call *call)
{
    if (--call->refs > 0)
        return;
    free(call->data);
    free(call);
}

/* Queues item (never waits, never refuses: the bound was checked before
 * the delivery step). A closed queue takes nothing more. */
static void push(struct group_dispatch *d, struct item *item)
{
    pthread_mutex_lock(&d->lock);
    if (d->closed) {
        if (item->kind == ITEM_STATE_SAVE)
            state_call_put(item->state);
        pthread_mutex_unlock(&d->lock);
        free(item);
        return;
    }
    if (d->tail != NULL)
        d->tail->next = item;
    else
        d->head = item;
    d->tail = item;
    d->items++;
    d->bytes += item->bytes;
    if (d->bytes > d->peak)
        d->peak = d->bytes;
    signal_state(d);
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

void group_dispatch_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    spindle_group_t *group = ctx;
    size_t payload = 0;
    for (size_t i = 0; i < count; i++)
        payload += ((size_t)messages[i].length + 7) & ~(size_t)7;
    size_t header = (sizeof(struct item) + 7) & ~(size_t)7;
    struct item *item = malloc(header + count * sizeof *messages + payload);
    if (item == NULL) {
        /* Nothing to fall back on: the messages are delivered already. */
        SP_LOG_ERR("group", "dispatch: no memory to queue %zu messages: they are lost", count);
        return;
    }
    memset(item, 0, sizeof *item);
    item->count = count;
    item->messages = (struct spindle_message *)(void *)((char *)item + header);
    char *data = (char *)(item->messages + count);
    for (size_t i = 0; i < count; i++) {
        item->messages[i] = messages[i];
        if (messages[i].length > 0)
            memcpy(data, messages[i].data, messages[i].length);
        item->messages[i].data = data;
        data += ((size_t)messages[i].length + 7) & ~(size_t)7;
        item->bytes += SPINDLE_DISPATCH_OVERHEAD + messages[i].length;
    }
    push(group->dispatch, item);
}

/* Copies n elements of size bytes from src to *at, returns the copy. */
static const void *copy_array(char **at, const void *src, size_t n, size_t size)
{
    if (n == 0 || src == NULL)
        return NULL;
    void *dst = *at;
    memcpy(dst, src, n * size);
    *at += (n * size + 7) & ~(size_t)7;
    return dst;
}

void group_dispatch_view(void *ctx, const struct spindle_view_info *view)
{
    spindle_group_t *group = ctx;
    size_t ids = (size_t)view->num_members + view->num_joined + view->num_left;
    size_t header = (sizeof(struct item) + 7) & ~(size_t)7;
    size_t size = header + ids * (sizeof(uint32_t) + sizeof(struct spindle_member_identity)) + 64;
    struct item *item = calloc(1, size);
    if (item == NULL) {
        SP_LOG_ERR("group", "dispatch: no memory to queue view %llu: it is not reported",
                   (unsigned long long)view->view_id);
        return;
    }
    item->kind = ITEM_VIEW;
    item->view = *view;
    item->bytes = size;
    char *at = (char *)item + header;
    const size_t id = sizeof(uint32_t), identity = sizeof(struct spindle_member_identity);
    item->view.members = copy_array(&at, view->members, view->num_members, id);
    item->view.joined = copy_array(&at, view->joined, view->num_joined, id);
    item->view.left = copy_array(&at, view->left, view->num_left, id);
    item->view.identities = copy_array(&at, view->identities, view->num_members, identity);
    item->view.joined_identities =
        copy_array(&at, view->joined_identities, view->num_joined, identity);
    item->view.left_identities = copy_array(&at, view->left_identities, view->num_left, identity);
    push(group->dispatch, item);
}

void group_dispatch_send_ready(void *ctx, uint32_t subgroup)
{
    spindle_group_t *group = ctx;
    struct item *item = calloc(1, sizeof *item);
    if (item == NULL) {
        SP_LOG_ERR("group", "dispatch: no memory to queue send_ready of subgroup %u", subgroup);
        return;
    }
    item->kind = ITEM_SEND_READY;
    item->subgroup = subgroup;
    item->bytes = sizeof *item;
    push(group->dispatch, item);
}

int group_dispatch_p2p(void *ctx, const struct spindle_p2p_message *message)
{
    spindle_group_t *group = ctx;
    struct group_dispatch *d = group->dispatch;
    size_t cost = (size_t)SPINDLE_DISPATCH_OVERHEAD + message->length;
    /* Point-to-point messages count against the same bound as the
     * multicast's: a full queue leaves them in their rings. */
    if (group_dispatch_room(group) < cost)
        return SPINDLE_EAGAIN;
    size_t header = (sizeof(struct item) + 7) & ~(size_t)7;
    struct item *item = malloc(header + message->length);
    if (item == NULL)
        return SPINDLE_EAGAIN; /* left in the ring: tried again later */
    memset(item, 0, sizeof *item);
    item->kind = ITEM_P2P;
    item->p2p = *message;
    if (message->length > 0)
        memcpy((char *)item + header, message->data, message->length);
    item->p2p.data = (char *)item + header;
    item->bytes = cost;
    push(d, item);
    return 0;
}

int group_dispatch_state_save(void *ctx, void **data, size_t *length)
{
    spindle_group_t *group = ctx;
    struct group_dispatch *d = group->dispatch;
    struct state_call *call = calloc(1, sizeof *call);
    struct item *item = calloc(1, sizeof *item);
    if (call == NULL || item == NULL) {
        free(call);
        free(item);
        return sp_error(SPINDLE_ENOMEM, "dispatch: no memory to queue state_save");
    }
    call->refs = 2;
    item->kind = ITEM_STATE_SAVE;
    item->state = call;
    item->bytes = sizeof *item;
    push(d, item);
    int timeout_ms = group->options.failure_timeout_ms;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&d->lock);
    int waited = 0;
    /* Once running, the application's state_save is waited for whole. */
    while (!call->done && (call->running || waited == 0) && !d->closed)
        waited = call->running ? pthread_cond_wait(&d->cond, &d->lock)
                               : pthread_cond_timedwait(&d->cond, &d->lock, &deadline);
    int rc = call->done ? call->rc
                        : sp_error(SPINDLE_ETIMEDOUT,
                                   "state_save: no thread dispatched it within %d ms "
                                   "(failure_timeout_ms); in dispatch mode it runs in "
                                   "spindle_dispatch, after the upcalls queued before it",
                                   timeout_ms);
    if (call->done && rc == 0) {
        *data = call->data;
        *length = call->length;
        call->data = NULL;
    }
    call->cancelled = !call->done;
    state_call_put(call);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

/* Runs a queued state_save on the dispatching thread, unless its waiter
 * gave up. */
static void run_state_save(spindle_group_t *group, struct state_call *call)
{
    struct group_dispatch *d = group->dispatch;
    pthread_mutex_lock(&d->lock);
    bool skip = call->cancelled;
    call->running = !skip;
    pthread_mutex_unlock(&d->lock);
    void *data = NULL;
    size_t length = 0;
    int rc = 0;
    if (!skip)
        rc = group->options.state_save(group->options.state_ctx, &data, &length);
    pthread_mutex_lock(&d->lock);
    call->running = false;
    call->done = !skip;
    call->rc = rc;
    call->data = data;
    call->length = length;
    pthread_cond_broadcast(&d->cond);
    state_call_put(call);
    pthread_mutex_unlock(&d->lock);
}

size_t group_dispatch_room(void *ctx)
{
    spindle_group_t *group = ctx;
    struct group_dispatch *d = group->dispatch;
    pthread_mutex_lock(&d->lock);
    size_t room = d->bytes < d->limit ? d->limit - d->bytes : 0;
    pthread_mutex_unlock(&d->lock);
    return room;
}

uint64_t group_dispatch_progress(void *ctx)
{
    const spindle_group_t *group = ctx;
    return __atomic_load_n(&group->dispatch->progress, __ATOMIC_ACQUIRE);
}

void group_dispatch_stats(struct group_dispatch *d, uint64_t *bytes, uint64_t *peak)
{
    *bytes = 0;
    *peak = 0;
    if (d == NULL)
        return;
    pthread_mutex_lock(&d->lock);
    *bytes = d->bytes;
    *peak = d->peak;
    pthread_mutex_unlock(&d->lock);
}

void group_dispatch_stopped(void *ctx)
{
    spindle_group_t *group = ctx;
    struct group_dispatch *d = group->dispatch;
    pthread_mutex_lock(&d->lock);
    d->stopped = true;
    signal_state(d);
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

void group_dispatch_close(struct group_dispatch *d)
{
    if (d == NULL)
        return;
    pthread_mutex_lock(&d->lock);
    d->closed = true;
    signal_state(d);
    pthread_cond_broadcast(&d->cond);
    pthread_mutex_unlock(&d->lock);
}

void group_dispatch_destroy(struct group_dispatch *d)
{
    if (d == NULL)
        return;
    while (d->head != NULL) {
        struct item *next = d->head->next;
        if (d->head->kind == ITEM_STATE_SAVE)
            state_call_put(d->head->state); /* its waiter is gone: the membership stopped */
        free(d->head);
        d->head = next;
    }
    close(d->fd);
    pthread_cond_destroy(&d->cond);
    pthread_mutex_destroy(&d->run_lock);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* Takes the first item; with wait, waits for one until the queue is
 * closed or the member stopped. NULL when there is none. */
static struct item *pop(spindle_group_t *group, bool wait)
{
    struct group_dispatch *d = group->dispatch;
    pthread_mutex_lock(&d->lock);
    while (wait && d->head == NULL && !d->closed && !d->stopped)
        pthread_cond_wait(&d->cond, &d->lock);
    struct item *item = d->head;
    if (item != NULL) {
        d->head = item->next;
        if (d->head == NULL)
            d->tail = NULL;
        d->items--;
    }
    pthread_mutex_unlock(&d->lock);
    return item;
}

/* Runs item's upcall, then frees it and its room. */
static void run(spindle_group_t *group, struct item *item)
{
    struct group_dispatch *d = group->dispatch;
    struct group_upcall u = {.group = group, .engine_locked = false, .lockless = false};
    group_upcall_enter(&u);
    const struct spindle_group_options *o = &group->options;
    if (item->kind == ITEM_VIEW && o->view_changed != NULL)
        o->view_changed(o->view_ctx, &item->view);
    else if (item->kind == ITEM_MESSAGES && o->deliver != NULL)
        o->deliver(o->deliver_ctx, item->messages, item->count);
    else if (item->kind == ITEM_SEND_READY && o->send_ready != NULL)
        o->send_ready(o->send_ready_ctx, item->subgroup);
    else if (item->kind == ITEM_STATE_SAVE)
        run_state_save(group, item->state);
    else if (item->kind == ITEM_P2P && o->p2p_deliver != NULL)
        o->p2p_deliver(o->p2p_ctx, &item->p2p);
    group_upcall_leave(&u);
    size_t bytes = item->bytes;
    free(item);
    pthread_mutex_lock(&d->lock);
    /* With room for two largest messages left, no delivery step can
     * have been held by this queue: no wake-up needed. */
    bool tight = d->limit - (d->bytes < d->limit ? d->bytes : d->limit) < 2 * d->largest;
    d->bytes -= bytes;
    signal_state(d);
    pthread_mutex_unlock(&d->lock);
    /* The room first, then the token, then the wake-up: a predicate
     * thread that reads the new token finds the room (smc_predicate.c). */
    __atomic_add_fetch(&d->progress, 1, __ATOMIC_RELEASE);
    if (tight)
        view_wake(&group->membership);
}

/* The error of a member whose queue is empty and that queues nothing
 * more, or 0 while it may. */
static int stopped_error(spindle_group_t *group)
{
    struct group_dispatch *d = group->dispatch;
    pthread_mutex_lock(&d->lock);
    bool closed = d->closed && d->head == NULL;
    pthread_mutex_unlock(&d->lock);
    int status = view_status(&group->membership);
    if (status < 0)
        return status;
    if (closed)
        return sp_error(SPINDLE_ESHUTDOWN,
                        "dispatch: the member shut down or left and nothing is left to dispatch");
    return 0;
}

SPINDLE_API int spindle_group_fd(spindle_group_t *group)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_fd: group is NULL");
    if (group->dispatch == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_fd: the group was not created in dispatch "
                                        "mode (options.dispatch)");
    return group->dispatch->fd;
}

SPINDLE_API int spindle_dispatch(spindle_group_t *group, unsigned flags)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_dispatch: group is NULL");
    if (group->dispatch == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_dispatch: the group was not created in dispatch "
                                        "mode (options.dispatch)");
    if (flags != SPINDLE_DISPATCH_ONE && flags != SPINDLE_DISPATCH_ALL &&
        flags != SPINDLE_DISPATCH_BLOCKING)
        return sp_error(SPINDLE_EINVAL,
                        "spindle_dispatch: flags %u is none of SPINDLE_DISPATCH_ONE (1), _ALL (2) "
                        "and _BLOCKING (3)",
                        flags);
    int refused = group_upcall_refuse(group, "spindle_dispatch");
    if (refused < 0)
        return refused;
    struct group_dispatch *d = group->dispatch;
    pthread_mutex_lock(&d->run_lock);
    pthread_mutex_lock(&d->lock);
    size_t budget = flags == SPINDLE_DISPATCH_ONE ? 1 : d->items; /* _ALL: what is queued now */
    pthread_mutex_unlock(&d->lock);
    bool blocking = flags == SPINDLE_DISPATCH_BLOCKING;
    int ran = 0;
    for (;;) {
        if (!blocking && (size_t)ran >= budget)
            break;
        struct item *item = pop(group, blocking);
        if (item == NULL)
            break;
        run(group, item);
        ran++;
    }
    pthread_mutex_unlock(&d->run_lock);
    if (ran > 0 && !blocking)
        return ran;
    int stopped = stopped_error(group);
    return stopped < 0 ? stopped : ran;
}
