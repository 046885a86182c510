/*
 * An epoch: one installed view and the multicast that runs in it. The
 * multicast knows only SST rows; the epoch is its delivery context and
 * turns rows into member ids and stamps the view id on the way up.
 */
#include <stdlib.h>
#include <string.h>

#include "smc/smc_p2p_wire.h"
#include "util/error.h"
#include "view/view_impl.h"

/* Delivery upcall of every epoch's smc_group (predicate thread). */
static void view_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    const struct view_epoch *epoch = ctx;
    const struct view_config *config = epoch->config;
    if (config->deliver == NULL && epoch->log == NULL)
        return;
    struct spindle_message chunk[64];
    while (count > 0) {
        size_t n = count < 64 ? count : 64;
        for (size_t i = 0; i < n; i++) {
            chunk[i] = messages[i];
            chunk[i].sender_id = epoch->view.member_ids[messages[i].sender_id];
            chunk[i].view_id = epoch->view.id;
        }
        view_log_append(epoch, chunk, n);
        if (config->deliver != NULL)
            config->deliver(config->deliver_ctx, chunk, n);
        messages += n;
        count -= n;
    }
}

/* smc_options.send_ready of every epoch (predicate thread). */
static void view_send_ready(void *ctx, uint32_t subgroup)
{
    const struct view_epoch *epoch = ctx;
    epoch->config->send_ready(epoch->config->send_ready_ctx, subgroup);
}

/* smc_options.p2p_deliver of every epoch (predicate thread): rows become
 * member ids, and the view id is stamped. */
static int view_p2p_deliver(void *ctx, uint32_t row, const struct smc_p2p_slot *header,
                            const void *data)
{
    const struct view_epoch *epoch = ctx;
    const struct view_config *config = epoch->config;
    if (config->p2p_deliver == NULL || row >= epoch->view.num_members)
        return 0;
    struct spindle_p2p_message message = {
        .sender_id = epoch->view.member_ids[row],
        .view_id = epoch->view.id,
        .query_id = header->kind == SMC_P2P_QUERY ? header->query_id : 0,
        .data = data,
        .length = header->length,
    };
    return config->p2p_deliver(config->p2p_ctx, &message);
}

/* smc_options.deliver_room of an epoch: the smaller of the log's room and
 * the application's queue's (both SIZE_MAX when absent). */
static size_t view_deliver_room(void *ctx, uint32_t subgroup)
{
    const struct view_epoch *epoch = ctx;
    const struct view_config *config = epoch->config;
    size_t room = view_log_room(ctx, subgroup);
    if (config->queue_room != NULL) {
        size_t queue = config->queue_room(config->queue_ctx);
        if (queue < room)
            room = queue;
    }
    return room;
}

/* smc_options.deliver_progress: both tokens only grow, so their sum
 * changes whenever either does. */
static uint64_t view_deliver_progress(void *ctx)
{
    const struct view_epoch *epoch = ctx;
    const struct view_config *config = epoch->config;
    uint64_t token = epoch->log != NULL ? view_log_progress(ctx) : 0;
    if (config->queue_progress != NULL)
        token += config->queue_progress(config->queue_ctx);
    return token;
}

int view_epoch_create(struct view_membership *m, struct view *view, struct view_epoch **out)
{
    struct view_epoch *epoch = calloc(1, sizeof *epoch);
    if (epoch == NULL) {
        view_clear(view);
        return sp_error(SPINDLE_ENOMEM, "no memory for view %llu", (unsigned long long)view->id);
    }
    epoch->view = *view;
    memset(view, 0, sizeof *view);
    epoch->config = &m->config;
    int rc = view_log_open(m);
    if (rc < 0) {
        view_epoch_free(epoch);
        return rc;
    }
    epoch->log = m->appender;
    epoch->log_queue_waits = &m->log_queue_waits;
    /* Without failure tolerance ids never change and views never do: the
     * application's upcall is called directly, without the mapping, unless
     * the delivery is logged. */
    bool bounded = epoch->log != NULL || m->config.queue_room != NULL;
    bool direct = !m->config.tolerate_failures && !bounded && m->config.send_ready == NULL &&
                  m->config.p2p_deliver == NULL;
    /* One overhead for both bounds: the larger, so that neither is passed. */
    uint32_t overhead = LOG_RECORD_HEADER_SIZE + LOG_MESSAGE_FIXED_SIZE;
    if (m->config.queue_room != NULL && m->config.queue_overhead > overhead)
        overhead = m->config.queue_overhead;
    struct smc_options options = {
        .batching = m->config.batching,
        .null_sends = m->config.null_sends,
        .own_inline = m->config.own_inline,
        .slow_member_ms = m->config.slow_member_ms,
        .deliver = direct ? m->config.deliver : view_deliver,
        .deliver_ctx = direct ? m->config.deliver_ctx : (void *)epoch,
        .first_position = m->config.smc_first_position,
        .deliver_room = bounded ? view_deliver_room : NULL,
        .deliver_progress = bounded ? view_deliver_progress : NULL,
        .deliver_overhead = overhead,
        .send_ready = m->config.send_ready != NULL ? view_send_ready : NULL,
        .p2p_window = m->config.p2p_window,
        .p2p_deliver = direct ? NULL : view_p2p_deliver,
    };
    epoch->frontiers = m->frontiers;
    if (epoch->log != NULL) {
        /* Persistence frontiers of the logged subgroups (view_log.c). */
        memcpy(options.persist, m->config.logged, sizeof options.persist);
        options.persist_mark = view_log_mark;
        options.persist_durable = view_log_progress;
        options.persisted = view_log_persisted;
    }
    const struct view *v = &epoch->view;
    rc = smc_group_create(m->engine, v->layouts, v->num_subgroups, v->num_members, v->my_rank,
                          &options, &epoch->smc);
    /* Before the table is exported: no member can write before its grant. */
    if (rc == 0)
        rc = smc_group_grant_writes(epoch->smc, v->member_ids);
    if (rc < 0) {
        view_epoch_free(epoch);
        return rc;
    }
    *out = epoch;
    return 0;
}

void view_epoch_free(struct view_epoch *epoch)
{
    if (epoch == NULL)
        return;
    if (epoch->smc != NULL) {
        smc_group_stop(epoch->smc);
        smc_group_destroy(epoch->smc);
    }
    view_clear(&epoch->view);
    free(epoch->previous_trim);
    free(epoch);
}

int view_epoch_connect(struct view_membership *m, struct view_epoch *epoch,
                       const struct sst_member_desc *descs, uint64_t *failed)
{
    /* In a view change (failed set) the engine lock is held across a
     * connect to a new member (a joiner), which stops this member's
     * heartbeat meanwhile: a connect that could outlast half the failure
     * timeout would make the others suspect this member. A joiner that
     * does not answer that fast is taken as failed instead. */
    int timeout_ms = m->config.bootstrap_timeout_ms;
    if (failed != NULL && timeout_ms > m->config.failure_timeout_ms / 2)
        timeout_ms = m->config.failure_timeout_ms / 2 > 0 ? m->config.failure_timeout_ms / 2 : 1;
    return smc_group_connect(epoch->smc, descs, timeout_ms, failed);
}

int view_open_engine(struct view_membership *m)
{
    struct tp_config config = m->config.transport;
    config.group_name = m->group_name;
    config.self_id = m->config.self;
    config.failure_timeout_ms = m->config.failure_timeout_ms;
    /* The fabric backend authenticates its connection set-up with the
     * group key too (docs/SECURITY.md). */
    if (m->config.keys != NULL && m->config.keys->count > 0) {
        _Static_assert(TP_KEY_BYTES == CTL_KEY_BYTES, "the transport takes group keys whole");
        config.keys = m->config.keys->key;
        config.key_count = m->config.keys->count;
    }
    struct sst_engine *engine = NULL;
    int rc = sst_engine_create(&config, &m->config.engine, &engine);
    if (rc < 0)
        return rc;
    sst_engine_on_failure(engine, view_on_failure, m);
    /* The log's writer may already be running (view_log.c, wake_engine). */
    pthread_mutex_lock(&m->wake_lock);
    __atomic_store_n(&m->engine, engine, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&m->wake_lock);
    return 0;
}
