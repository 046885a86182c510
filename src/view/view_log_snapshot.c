/*
 * Snapshots of logged subgroups (docs/LOGS.md "Snapshots and compaction"):
 * the application hands the state it built from a subgroup's messages
 * before a point (view id, seq); it is stored durably beside the log, the
 * newest two of each subgroup are kept, and the log's appender may then
 * drop whole segments below the older of the two. Keeping the log from the
 * older one means either snapshot, with the log after it, rebuilds the
 * state: a newest one found corrupt later falls back to the one before.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log/log_snapshot.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

struct view_snapshot_point {
    bool set;
    uint64_t view_id, seq;
};

/* A subgroup's two kept snapshots. */
struct view_snapshot_points {
    struct view_snapshot_point newest, older;
};

/* Takes the valid snapshots of one listing (sorted by subgroup, then
 * point) into the points, and their views into the appender. */
static void take_listing(struct view_membership *m, const struct log_snapshot_file *files,
                         size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const struct log_snapshot_file *file = &files[i];
        if (!file->valid) {
            SP_LOG_WARNING("log", "%s: ignoring snapshot %s: %s", m->config.log_dir, file->name,
                           file->why);
            continue;
        }
        struct view_snapshot_points *points = &m->snapshot_points[file->snap.subgroup];
        points->older = points->newest;
        points->newest = (struct view_snapshot_point){true, file->snap.view_id, file->snap.seq};
        log_appender_note_view(m->appender, &file->snap.view);
    }
}

int view_log_snapshots_open(struct view_membership *m)
{
    m->snapshot_points = calloc(SPINDLE_MAX_SUBGROUPS, sizeof *m->snapshot_points);
    if (m->snapshot_points == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for snapshot points");
    struct log_snapshot_file *files;
    size_t count;
    int rc = log_snapshot_list(m->log->dir_fd, m->log->dir, true, &files, &count);
    if (rc < 0) {
        view_log_snapshots_close(m);
        return rc;
    }
    take_listing(m, files, count);
    free(files);
    for (uint32_t g = 0; g < SPINDLE_MAX_SUBGROUPS; g++) {
        const struct view_snapshot_point *older = &m->snapshot_points[g].older;
        if (older->set)
            log_appender_cover(m->appender, g, older->view_id, older->seq);
    }
    return 0;
}

/* One of subgroup's kept points: true and *view_id, *seq when set. */
static bool kept_point(const struct view_membership *m, uint32_t subgroup, bool newest,
                       uint64_t *view_id, uint64_t *seq)
{
    if (m->snapshot_points == NULL || subgroup >= SPINDLE_MAX_SUBGROUPS)
        return false;
    const struct view_snapshot_points *points = &m->snapshot_points[subgroup];
    const struct view_snapshot_point *point = newest ? &points->newest : &points->older;
    if (point->set) {
        *view_id = point->view_id;
        *seq = point->seq;
    }
    return point->set;
}

bool view_log_older_snapshot(const struct view_membership *m, uint32_t subgroup, uint64_t *view_id,
                             uint64_t *seq)
{
    return kept_point(m, subgroup, false, view_id, seq);
}

bool view_log_newest_snapshot(const struct view_membership *m, uint32_t subgroup, uint64_t *view_id,
                              uint64_t *seq)
{
    return kept_point(m, subgroup, true, view_id, seq);
}

void view_log_snapshots_close(struct view_membership *m)
{
    free(m->snapshot_points);
    m->snapshot_points = NULL;
}

/* Where this member's delivery stands, read before snapshot_lock is
 * taken (the membership thread takes that lock while it holds the view,
 * to plan a joiner's catch-up; what was delivered only grows). */
struct delivered_now {
    bool has_view;
    uint64_t current;
    uint32_t subgroups;
    uint64_t delivered;
};

static void read_delivered(struct view_membership *m, uint32_t subgroup, struct delivered_now *now)
{
    struct smc_group *smc = view_acquire(m);
    now->has_view = smc != NULL;
    now->current = m->current != NULL ? m->current->view.id : 0;
    now->subgroups = m->current != NULL ? m->current->view.num_subgroups : 0;
    now->delivered =
        smc != NULL && subgroup < now->subgroups ? smc_group_delivered(smc, subgroup) : 0;
    view_release(m);
}

/* Checks that (view_id, seq) is a point this member delivered up to in
 * subgroup: 0, or SPINDLE_EINVAL naming why not. */
static int check_delivered(struct view_membership *m, const struct delivered_now *now,
                           uint32_t subgroup, uint64_t view_id, uint64_t seq)
{
    uint64_t current = now->current, delivered = now->delivered;
    uint32_t subgroups = now->subgroups;
    if (!now->has_view)
        return sp_error(SPINDLE_EINVAL, "snapshot: the group has no view yet");
    if (subgroup >= subgroups)
        return sp_error(SPINDLE_EINVAL, "snapshot: subgroup %u is unknown (the group has %u)",
                        subgroup, subgroups);
    if (view_id > current || (view_id == current && seq > delivered))
        return sp_error(SPINDLE_EINVAL,
                        "snapshot: subgroup %u at view %" PRIu64 ", seq %" PRIu64
                        " is past what this member delivered (view %" PRIu64 ", seq %" PRIu64 ")",
                        subgroup, view_id, seq, current, delivered);
    struct log_view next;
    if (view_id < current && log_appender_next_view(m->appender, view_id, &next) &&
        subgroup < next.subgroup_count && seq > next.delivered_through[subgroup])
        return sp_error(SPINDLE_EINVAL,
                        "snapshot: subgroup %u at view %" PRIu64 ", seq %" PRIu64
                        " is past the end of that view (its trim: %" PRIu64 ")",
                        subgroup, view_id, seq, next.delivered_through[subgroup]);
    return 0;
}

static int store(struct view_membership *m, struct log_snapshot *snap, const void *state,
                 size_t length);

/* Under snapshot_lock: the checks, the file, the points, the pruning. */
static int take_snapshot(struct view_membership *m, const struct delivered_now *now,
                         uint32_t subgroup, uint64_t view_id, uint64_t seq, const void *state,
                         size_t length)
{
    int rc = check_delivered(m, now, subgroup, view_id, seq);
    if (rc < 0)
        return rc;
    struct view_snapshot_points *points = &m->snapshot_points[subgroup];
    if (points->newest.set &&
        log_point_before(view_id, seq, points->newest.view_id, points->newest.seq))
        return sp_error(SPINDLE_EINVAL,
                        "snapshot: subgroup %u at view %" PRIu64 ", seq %" PRIu64
                        " is before its newest snapshot (view %" PRIu64 ", seq %" PRIu64 ")",
                        subgroup, view_id, seq, points->newest.view_id, points->newest.seq);
    struct log_snapshot *snap = calloc(1, sizeof *snap);
    if (snap == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a snapshot header");
    *snap = (struct log_snapshot){.subgroup = subgroup, .view_id = view_id, .seq = seq};
    if (!log_appender_find_view(m->appender, view_id, &snap->view)) {
        free(snap);
        return sp_error(SPINDLE_EINVAL,
                        "snapshot: view %" PRIu64 " is not among the views this member keeps "
                        "(the last ones it installed): take snapshots in a recent view",
                        view_id);
    }
    rc = store(m, snap, state, length);
    free(snap);
    return rc;
}

/* Under snapshot_lock: writes snap (its point and view record set) with
 * state, then takes it as the subgroup's newest, prunes and covers. */
static int store(struct view_membership *m, struct log_snapshot *snap, const void *state,
                 size_t length)
{
    uint32_t subgroup = snap->subgroup;
    uint64_t view_id = snap->view_id, seq = snap->seq;
    struct view_snapshot_points *points = &m->snapshot_points[subgroup];
    /* Every message the state holds was handed to the log before its
     * upcall (or, received at a join, lies before what the log holds):
     * all of them lie below the log's end now. */
    snap->position = log_appender_end(m->appender);
    int rc = log_snapshot_write(m->log->dir_fd, m->log->dir, snap, state, length);
    if (rc < 0)
        return rc;
    struct view_snapshot_point taken = {true, view_id, seq};
    if (!points->newest.set || points->newest.view_id != view_id || points->newest.seq != seq)
        points->older = points->newest;
    points->newest = taken;
    struct log_snapshot keep[2] = {
        {.view_id = points->newest.view_id, .seq = points->newest.seq},
        {.view_id = points->older.view_id, .seq = points->older.seq},
    };
    rc = log_snapshot_prune(m->log->dir_fd, m->log->dir, subgroup, keep, points->older.set ? 2 : 1);
    if (rc < 0)
        SP_LOG_WARNING("log", "snapshot stored, but older ones stay: %s", spindle_errmsg());
    if (points->older.set)
        log_appender_cover(m->appender, subgroup, points->older.view_id, points->older.seq);
    return 0;
}

int view_log_snapshot_adopt(struct view_membership *m, const struct log_snapshot *snap,
                            const void *state)
{
    struct log_snapshot *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a snapshot header");
    *copy = *snap;
    pthread_mutex_lock(&m->snapshot_lock);
    log_appender_note_view(m->appender, &snap->view);
    int rc = store(m, copy, state, (size_t)snap->state_length);
    pthread_mutex_unlock(&m->snapshot_lock);
    free(copy);
    return rc;
}

int view_log_snapshot(struct view_membership *m, uint32_t subgroup, uint64_t view_id, uint64_t seq,
                      const void *state, size_t length)
{
    if (state == NULL && length > 0)
        return sp_error(SPINDLE_EINVAL, "snapshot: state is NULL with length %zu", length);
    struct delivered_now now;
    read_delivered(m, subgroup, &now);
    pthread_mutex_lock(&m->snapshot_lock);
    int rc = m->appender == NULL || m->snapshot_points == NULL
                 ? sp_error(SPINDLE_EINVAL, "snapshot: this member has no log open")
                 : take_snapshot(m, &now, subgroup, view_id, seq, state, length);
    pthread_mutex_unlock(&m->snapshot_lock);
    return rc;
}
