/*
 * The one set of checks a member applies to a catch-up stream it takes
 * into its log (view/view_impl.h, "view_log_intake.c"): a logged joiner
 * taking the leader's (view_log_catchup.c), a restarting member taking
 * one subgroup from its source (view_restart_fetch.c). The stream's
 * bytes were decoded strictly by its parser (log/log_catchup.c); what is
 * checked here is what they say against the taker's log: which subgroups,
 * which points, which views, in which order.
 */
#include <inttypes.h>

#include "log/log_snapshot.h"
#include "util/error.h"
#include "view/view_impl.h"

void view_log_intake_init(struct view_log_intake *in, const char *sender,
                          struct view_join_log_ends *ends, uint32_t subgroup, uint64_t last_view)
{
    *in = (struct view_log_intake){
        .sender = sender,
        .ends = ends,
        .subgroup = subgroup,
        .last_view = last_view,
    };
    if (ends->next_view > 0) {
        in->any_view = true;
        in->known_view = ends->next_view - 1;
    }
}

/* The end of subgroup g in the taker's log when g is one taken, else NULL. */
static struct view_join_log_end *taken_end(const struct view_log_intake *in, uint32_t g)
{
    if (in->subgroup != VIEW_LOG_ANY_SUBGROUP && g != in->subgroup)
        return NULL;
    for (uint32_t i = 0; i < in->ends->count; i++)
        if (in->ends->ends[i].subgroup == g)
            return &in->ends->ends[i];
    return NULL;
}

static void know_view(struct view_log_intake *in, uint64_t view_id)
{
    if (!in->any_view || view_id > in->known_view)
        in->known_view = view_id;
    in->any_view = true;
}

int view_log_intake_check_snapshot(const struct view_log_intake *in,
                                   const struct log_snapshot *snap)
{
    const struct view_join_log_end *end = taken_end(in, snap->subgroup);
    if (end == NULL || snap->view_id > in->last_view ||
        log_point_before(snap->view_id, snap->seq, end->view_id, end->seq))
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a snapshot of subgroup %u at (%" PRIu64 ", %" PRIu64
                        "), which this member does not take or which is not after where its "
                        "log ends and up to view %" PRIu64,
                        in->sender, snap->subgroup, snap->view_id, snap->seq, in->last_view);
    return 0;
}

/* A message's check: of a subgroup taken, at or after its end, up to
 * last_view, in a view whose record came first. Not exactly at the end: a
 * subgroup of several senders numbers its null-sends too (round * senders
 * + rank, Spindle 3.3), and those are not logged. */
static int check_message(const struct view_log_intake *in, const struct log_message *msg)
{
    const struct view_join_log_end *end = taken_end(in, msg->subgroup);
    if (end == NULL)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a message of subgroup %u, which this member does not take",
                        in->sender, msg->subgroup);
    if (log_point_before(msg->view_id, msg->seq, end->view_id, end->seq) ||
        msg->view_id > in->last_view || msg->seq == UINT64_MAX)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent message (%" PRIu64 ", %" PRIu64 ") of subgroup %u, not at or "
                        "after where this log ends, (%" PRIu64 ", %" PRIu64
                        "), up to view %" PRIu64,
                        in->sender, msg->view_id, msg->seq, msg->subgroup, end->view_id, end->seq,
                        in->last_view);
    if (!in->any_view || msg->view_id > in->known_view)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a message of view %" PRIu64 " before that view's record",
                        in->sender, msg->view_id);
    return 0;
}

int view_log_intake_check_record(const struct view_log_intake *in, const struct log_record *record)
{
    if (record->type != LOG_REC_VIEW)
        return check_message(in, &record->message);
    uint64_t id = record->view.view_id;
    if (id < in->ends->next_view || id > in->last_view)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent the record of view %" PRIu64 ", not after this log's views "
                        "(next %" PRIu64 ") and up to view %" PRIu64,
                        in->sender, id, in->ends->next_view, in->last_view);
    return 0;
}

void view_log_intake_took_snapshot(struct view_log_intake *in, const struct log_snapshot *snap)
{
    struct view_join_log_end *end = taken_end(in, snap->subgroup);
    end->view_id = snap->view_id;
    end->seq = snap->seq;
    know_view(in, snap->view.view_id);
}

void view_log_intake_took_record(struct view_log_intake *in, const struct log_record *record)
{
    if (record->type == LOG_REC_VIEW) {
        in->ends->next_view = record->view.view_id + 1;
        know_view(in, record->view.view_id);
        return;
    }
    struct view_join_log_end *end = taken_end(in, record->message.subgroup);
    if (log_point_before(end->view_id, end->seq, record->message.view_id,
                         record->message.seq + 1)) {
        end->view_id = record->message.view_id;
        end->seq = record->message.seq + 1;
    }
}

void view_log_intake_start_over(struct view_log_intake *in)
{
    in->ends->next_view = 0;
    for (uint32_t i = 0; i < in->ends->count; i++)
        in->ends->ends[i].view_id = in->ends->ends[i].seq = 0;
    in->any_view = false;
    in->known_view = 0;
}
