/*
 * Logged delivery (docs/LOGS.md): a member appends every message it
 * delivers in a logged subgroup to its log, in delivery order, before the
 * application's upcall. The records are copied into the appender's bounded
 * queue, so ring slots are released as usual; the queue's room bounds what
 * is delivered but not yet durable: the delivery step stops at it
 * (smc_options.deliver_room) and the rest waits in the ring, holding the
 * senders' windows (back-pressure) until the writer thread has synced.
 * The predicate thread never waits on the disk, except at a view change,
 * whose trim must be delivered whole: there a full queue is waited out.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

bool view_logged(const struct view_config *config, uint32_t subgroup)
{
    return subgroup < SPINDLE_MAX_SUBGROUPS &&
           (config->logged[subgroup / 64] & (UINT64_C(1) << (subgroup % 64))) != 0;
}

static bool any_logged(const struct view_config *config)
{
    for (size_t i = 0; i < SPINDLE_MAX_SUBGROUPS / 64; i++)
        if (config->logged[i] != 0)
            return true;
    return false;
}

/* The log's writer made records durable: this member's persistence
 * columns may move, and a delivery held at the queue's bound may go on.
 * The writer pushes the columns itself when it can (smc_group_durable),
 * so the predicate thread is not woken only for them, and wakes the
 * engine otherwise. The log may be open before the engine (a joiner
 * restarting with its log), and outlive one (a failed join attempt): the
 * engine and the multicast are taken under wake_lock. */
static void on_durable(void *ctx)
{
    struct view_membership *m = ctx;
    pthread_mutex_lock(&m->wake_lock);
    if (m->engine != NULL && (m->durable_group == NULL || !smc_group_durable(m->durable_group)))
        sst_engine_wake(m->engine);
    pthread_mutex_unlock(&m->wake_lock);
}

void view_log_follow(struct view_membership *m, struct smc_group *group)
{
    pthread_mutex_lock(&m->wake_lock);
    m->durable_group = m->appender != NULL ? group : NULL;
    pthread_mutex_unlock(&m->wake_lock);
}

/* The log's durable position (view/view_impl.h). */
uint64_t view_log_progress(void *ctx)
{
    const struct view_epoch *epoch = ctx;
    return log_appender_durable(epoch->log);
}

int view_log_open(struct view_membership *m)
{
    if (m->appender != NULL || m->config.log_dir == NULL || !any_logged(&m->config))
        return 0;
    m->frontiers = calloc(SPINDLE_MAX_SUBGROUPS, sizeof *m->frontiers);
    if (m->frontiers == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for persistence frontiers");
    struct log_open_report report;
    int rc = log_open(m->config.log_dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &m->log, &report);
    if (rc < 0) {
        free(m->frontiers);
        m->frontiers = NULL;
        return rc;
    }
    if (report.cut)
        SP_LOG_WARNING("log",
                       "%s: cut %" PRIu64 " bytes of torn tail in %s at offset %" PRIu64 " (%s)",
                       m->config.log_dir, report.tail_bytes, report.tail_segment,
                       report.tail_offset, report.why);
    struct log_appender_options options = {
        .queue_bytes = m->log_queue_bytes,
        .segment_bytes = m->log_segment_bytes,
        .on_durable = on_durable,
        .on_durable_ctx = m,
    };
    rc = log_appender_start(m->log, &options, &m->appender);
    if (rc == 0) {
        rc = view_log_snapshots_open(m);
        if (rc < 0) {
            log_appender_stop(m->appender);
            m->appender = NULL;
        }
    }
    if (rc < 0) {
        log_close(m->log);
        m->log = NULL;
        free(m->frontiers);
        m->frontiers = NULL;
    }
    return rc;
}

void view_log_close(struct view_membership *m)
{
    /* A snapshot being taken on another thread finishes first. */
    pthread_mutex_lock(&m->snapshot_lock);
    view_log_snapshots_close(m);
    int rc = log_appender_stop(m->appender);
    if (rc < 0)
        SP_LOG_ERR("log", "%s", spindle_errmsg());
    m->appender = NULL;
    log_close(m->log);
    m->log = NULL;
    free(m->frontiers);
    m->frontiers = NULL;
    pthread_mutex_unlock(&m->snapshot_lock);
}

int view_log_submit(struct view_membership *m, const struct log_record *record, uint64_t *end)
{
    int rc = log_appender_submit(m->appender, record, 1, end);
    while (rc == SPINDLE_EAGAIN) {
        rc = log_appender_wait(m->appender, log_appender_durable(m->appender) + 1, -1);
        if (rc == 0)
            rc = log_appender_submit(m->appender, record, 1, end);
    }
    return rc;
}

int view_log_view(struct view_membership *m, struct view_epoch *epoch, struct smc_group *previous,
                  uint32_t previous_subgroups)
{
    if (m->appender == NULL)
        return 0;
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_VIEW;
    const struct view *view = &epoch->view;
    record.view.view_id = view->id;
    record.view.member_count = view->num_members;
    memcpy(record.view.members, view->member_ids, view->num_members * sizeof view->member_ids[0]);
    record.view.subgroup_count = previous != NULL ? previous_subgroups : 0;
    for (uint32_t g = 0; g < record.view.subgroup_count; g++)
        record.view.delivered_through[g] = smc_group_delivered(previous, g);
    if (previous != NULL) {
        /* The old view's last frontier once every survivor has its trim
         * durable (view_log_report_previous). */
        size_t bytes = (previous_subgroups > 0 ? previous_subgroups : 1) * sizeof(uint64_t);
        epoch->previous_trim = malloc(bytes);
        if (epoch->previous_trim == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for %u trims", previous_subgroups);
        memcpy(epoch->previous_trim, record.view.delivered_through,
               previous_subgroups * sizeof(uint64_t));
        epoch->previous_subgroups = previous_subgroups;
        epoch->previous_view_id = m->current->view.id;
    }
    uint64_t end;
    int rc = view_log_submit(m, &record, &end);
    if (rc == 0)
        rc = log_appender_wait(m->appender, end, -1);
    return rc;
}

size_t view_log_room(void *ctx, uint32_t subgroup)
{
    const struct view_epoch *epoch = ctx;
    if (epoch->log == NULL || !view_logged(epoch->config, subgroup))
        return SIZE_MAX;
    /* The queue may waste up to one record at its end (log_appender_room). */
    size_t largest = LOG_RECORD_HEADER_SIZE + LOG_MESSAGE_FIXED_SIZE +
                     (size_t)epoch->view.layouts[subgroup].max_payload;
    size_t room = log_appender_room(epoch->log);
    return room > largest ? room - largest : 0;
}

void view_log_append(const struct view_epoch *epoch, const struct spindle_message *messages,
                     size_t count)
{
    if (epoch->log == NULL || count == 0 || !view_logged(epoch->config, messages[0].subgroup))
        return;
    /* Only the fields a message record has are set: a record's union also
     * holds a view's (over 2 KiB), and clearing 64 of them on every
     * delivery cost more than encoding the messages. */
    struct log_record records[64];
    for (size_t i = 0; i < count && i < 64; i++) {
        records[i].type = LOG_REC_MESSAGE;
        records[i].position = 0;
        records[i].message = (struct log_message){
            .subgroup = messages[i].subgroup,
            .sender_id = messages[i].sender_id,
            .sender_index = messages[i].sender_index,
            .seq = messages[i].seq,
            .view_id = messages[i].view_id,
            .length = messages[i].length,
            .payload = messages[i].data,
        };
    }
    int rc;
    while ((rc = log_appender_submit(epoch->log, records, count, NULL)) == SPINDLE_EAGAIN) {
        /* Only the trim of a view change passes the room: wait for the
         * writer to make some. */
        __atomic_add_fetch(epoch->log_queue_waits, 1, __ATOMIC_RELAXED);
        rc = log_appender_wait(epoch->log, log_appender_durable(epoch->log) + 1, -1);
        if (rc < 0)
            break;
    }
    if (rc < 0) {
        SP_LOG_ERR("log", "logged delivery stops: %s", spindle_errmsg());
        smc_group_fail(epoch->smc, rc);
    }
}

uint64_t view_log_mark(void *ctx)
{
    const struct view_epoch *epoch = ctx;
    return log_appender_end(epoch->log);
}

/* Reports subgroup's frontier (view_id, seq) when it is past the last one
 * reported. Engine lock held. */
static void report_frontier(const struct view_config *config, struct view_frontier *last,
                            uint32_t subgroup, uint64_t view_id, uint64_t seq)
{
    if (view_id < last->view_id || (view_id == last->view_id && seq <= last->seq))
        return;
    *last = (struct view_frontier){view_id, seq};
    if (config->persisted != NULL)
        config->persisted(config->persisted_ctx, subgroup, view_id, seq);
}

void view_log_persisted(void *ctx, uint32_t subgroup, uint64_t frontier)
{
    const struct view_epoch *epoch = ctx;
    report_frontier(epoch->config, &epoch->frontiers[subgroup], subgroup, epoch->view.id, frontier);
}

void view_log_report_previous(struct view_membership *m)
{
    struct view_epoch *epoch = m->current;
    sst_engine_lock(m->engine);
    for (uint32_t g = 0; g < epoch->previous_subgroups && m->frontiers != NULL; g++)
        if (view_logged(&m->config, g) && epoch->previous_trim[g] > 0)
            report_frontier(&m->config, &m->frontiers[g], g, epoch->previous_view_id,
                            epoch->previous_trim[g]);
    sst_engine_unlock(m->engine);
    smc_group_release_frontier(epoch->smc);
}
