/*
 * The report of the administration endpoint's "stats" (group/admin.h): the
 * member, its status, the current view, the subgroups, the counters of
 * spindle_stats, the log's frontier and the transport, as JSON or as text.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "group/admin.h"
#include "group/group_impl.h"
#include "util/error.h"

static const char *link_name(enum sst_link link)
{
    switch (link) {
    case SST_LINK_SELF:
        return "self";
    case SST_LINK_CONNECTED:
        return "connected";
    case SST_LINK_FAILED:
        return "failed";
    default:
        return "unconnected";
    }
}

static bool logged(const struct view_snapshot *view, uint32_t subgroup)
{
    return (view->logged[subgroup / 64] >> (subgroup % 64) & 1) != 0;
}

/* What the report is made of, copied before it is written. */
struct report {
    spindle_group_t *group;
    struct view_snapshot view;
    struct spindle_stats stats;
    int status;
    char status_msg[512];
    uint32_t connected, failed;
};

static void counters_json(struct sp_json *json, const struct spindle_stats *s)
{
    sp_json_object(json, "counters");
    sp_json_u64(json, "messages_sent", s->messages_sent);
    sp_json_u64(json, "messages_delivered", s->messages_delivered);
    sp_json_u64(json, "nulls_sent", s->nulls_sent);
    sp_json_u64(json, "nulls_received", s->nulls_received);
    sp_json_u64(json, "writes_posted", s->writes_posted);
    sp_json_u64(json, "doorbells", s->doorbells);
    sp_json_u64(json, "pushes", s->pushes);
    sp_json_u64(json, "post_ns", s->post_ns);
    sp_json_u64(json, "predicate_passes", s->predicate_passes);
    sp_json_u64(json, "sleeps", s->sleeps);
    sp_json_u64(json, "wakeups_sent", s->wakeups_sent);
    sp_json_u64(json, "send_batch_count", s->send_batch_count);
    sp_json_u64(json, "send_batch_messages", s->send_batch_messages);
    sp_json_u64(json, "receive_batch_count", s->receive_batch_count);
    sp_json_u64(json, "receive_batch_messages", s->receive_batch_messages);
    sp_json_u64(json, "delivery_batch_count", s->delivery_batch_count);
    sp_json_u64(json, "delivery_batch_messages", s->delivery_batch_messages);
    sp_json_u64(json, "pinned_bytes", s->pinned_bytes);
    sp_json_u64(json, "window_full", s->window_full);
    sp_json_u64(json, "window_full_ns", s->window_full_ns);
    sp_json_i64(json, "window_holder", s->window_holder);
    sp_json_u64(json, "log_deliveries_held", s->log_deliveries_held);
    sp_json_u64(json, "log_queue_waits", s->log_queue_waits);
    const uint64_t *histograms[3] = {s->send_batches, s->receive_batches, s->delivery_batches};
    const char *names[3] = {"send_batches", "receive_batches", "delivery_batches"};
    for (int h = 0; h < 3; h++) {
        sp_json_array(json, names[h]);
        for (int b = 0; b < SPINDLE_HIST_BUCKETS; b++)
            sp_json_u64(json, NULL, histograms[h][b]);
        sp_json_end_array(json);
    }
    sp_json_end_object(json);
}

static void ids_json(struct sp_json *json, const char *key, const struct view_snapshot *view,
                     const uint32_t *ranks, uint32_t count)
{
    sp_json_array(json, key);
    for (uint32_t i = 0; i < count; i++)
        sp_json_u64(json, NULL, ranks[i] < view->num_members ? view->members[ranks[i]].id : 0);
    sp_json_end_array(json);
}

static void view_json(struct sp_json *json, const struct view_snapshot *view)
{
    sp_json_object(json, "view");
    sp_json_u64(json, "id", view->view_id);
    sp_json_u64(json, "leader", view->num_members > 0 ? view->members[0].id : 0);
    sp_json_bool(json, "changing", view->changing);
    sp_json_array(json, "members");
    for (uint32_t rank = 0; rank < view->num_members; rank++) {
        const struct view_snapshot_member *member = &view->members[rank];
        sp_json_object(json, NULL);
        sp_json_u64(json, "id", member->id);
        sp_json_u64(json, "rank", rank);
        sp_json_string(json, "name", member->identity.name);
        sp_json_u64(json, "incarnation", member->identity.incarnation);
        sp_json_string(json, "link", link_name(member->link));
        sp_json_bool(json, "suspected", member->suspected);
        sp_json_end_object(json);
    }
    sp_json_end_array(json);
    sp_json_end_object(json);
    sp_json_array(json, "subgroups");
    for (uint32_t g = 0; g < view->num_subgroups; g++) {
        const struct smc_layout *layout = &view->layouts[g];
        sp_json_object(json, NULL);
        sp_json_u64(json, "index", g);
        sp_json_string(json, "mode", layout->mode == SPINDLE_MODE_ATOMIC ? "atomic" : "unordered");
        sp_json_u64(json, "window_size", layout->window_size);
        sp_json_u64(json, "max_payload", layout->max_payload);
        ids_json(json, "members", view, layout->members, layout->num_members);
        ids_json(json, "senders", view, layout->senders, layout->num_senders);
        sp_json_u64(json, "delivered_num", view->delivered[g]);
        sp_json_bool(json, "logged", logged(view, g));
        sp_json_end_object(json);
    }
    sp_json_end_array(json);
}

static void write_json(struct sp_json *json, const struct report *r)
{
    const spindle_group_t *group = r->group;
    const struct spindle_member_identity *self = &r->view.members[r->view.my_rank].identity;
    sp_json_object(json, NULL);
    sp_json_bool(json, "ok", true);
    sp_json_string(json, "group", group->membership.group_name);
    sp_json_object(json, "member");
    sp_json_u64(json, "id", group->options.self);
    sp_json_string(json, "name", self->name);
    sp_json_u64(json, "incarnation", self->incarnation);
    sp_json_i64(json, "pid", (int64_t)getpid());
    sp_json_end_object(json);
    sp_json_object(json, "status");
    sp_json_i64(json, "code", r->status);
    sp_json_string(json, "error", spindle_strerror(r->status));
    sp_json_string(json, "message", r->status_msg);
    sp_json_end_object(json);
    view_json(json, &r->view);
    counters_json(json, &r->stats);
    if (group->membership.appender != NULL) {
        sp_json_object(json, "log");
        sp_json_u64(json, "records_durable", r->stats.log_records_durable);
        sp_json_u64(json, "bytes_durable", r->stats.log_bytes_durable);
        sp_json_u64(json, "syncs", r->stats.log_syncs);
        sp_json_end_object(json);
    }
    sp_json_object(json, "transport");
    sp_json_string(json, "name", r->view.backend != NULL ? r->view.backend : "");
    sp_json_u64(json, "peers_connected", r->connected);
    sp_json_u64(json, "peers_failed", r->failed);
    sp_json_end_object(json);
    sp_json_end_object(json);
    sp_json_printf(json, "\n");
}

static void write_ids(struct sp_json *out, const struct view_snapshot *view, const uint32_t *ranks,
                      uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        sp_json_printf(out, "%s%u", i > 0 ? "," : "",
                       ranks[i] < view->num_members ? view->members[ranks[i]].id : 0);
    if (count == 0)
        sp_json_printf(out, "-");
}

static void write_text(struct sp_json *out, const struct report *r)
{
    const struct view_snapshot *view = &r->view;
    const spindle_group_t *group = r->group;
    sp_json_printf(out, "Group %s, member %u '%s' (pid %ld)\n", group->membership.group_name,
                   group->options.self, view->members[view->my_rank].identity.name, (long)getpid());
    if (r->status == 0)
        sp_json_printf(out, "Status: running\n");
    else
        sp_json_printf(out, "Status: stopped (%s): %s\n", spindle_strerror(r->status),
                       r->status_msg);
    sp_json_printf(out, "View %llu%s, leader %u, %u members:\n", (unsigned long long)view->view_id,
                   view->changing ? " (changing)" : "",
                   view->num_members > 0 ? view->members[0].id : 0, view->num_members);
    sp_json_printf(out, "  %4s %4s  %-32s %s\n", "rank", "id", "name", "link");
    for (uint32_t rank = 0; rank < view->num_members; rank++) {
        const struct view_snapshot_member *m = &view->members[rank];
        sp_json_printf(out, "  %4u %4u  %-32s %s%s\n", rank, m->id, m->identity.name,
                       link_name(m->link), m->suspected ? ", suspected" : "");
    }
    sp_json_printf(out, "Subgroups:\n");
    for (uint32_t g = 0; g < view->num_subgroups; g++) {
        const struct smc_layout *layout = &view->layouts[g];
        sp_json_printf(out, "  %u: %s, window %u, max_payload %u, members ", g,
                       layout->mode == SPINDLE_MODE_ATOMIC ? "atomic" : "unordered",
                       layout->window_size, layout->max_payload);
        write_ids(out, view, layout->members, layout->num_members);
        sp_json_printf(out, ", senders ");
        write_ids(out, view, layout->senders, layout->num_senders);
        sp_json_printf(out, ", delivered_num %llu%s\n", (unsigned long long)view->delivered[g],
                       logged(view, g) ? ", logged" : "");
    }
    const struct spindle_stats *s = &r->stats;
    sp_json_printf(
        out,
        "Messages: %llu sent, %llu delivered; nulls %llu sent, %llu received\n"
        "Batches: %llu sends (%llu messages), %llu receives (%llu), %llu deliveries "
        "(%llu)\n"
        "Posting: %llu pushes, %llu writes, %llu doorbells, %llu wakeups sent, %llu us\n"
        "Predicate thread: %llu passes, %llu sleeps\n"
        "Window full: %llu times, %llu us waited, last holder %d\n",
        (unsigned long long)s->messages_sent, (unsigned long long)s->messages_delivered,
        (unsigned long long)s->nulls_sent, (unsigned long long)s->nulls_received,
        (unsigned long long)s->send_batch_count, (unsigned long long)s->send_batch_messages,
        (unsigned long long)s->receive_batch_count, (unsigned long long)s->receive_batch_messages,
        (unsigned long long)s->delivery_batch_count, (unsigned long long)s->delivery_batch_messages,
        (unsigned long long)s->pushes, (unsigned long long)s->writes_posted,
        (unsigned long long)s->doorbells, (unsigned long long)s->wakeups_sent,
        (unsigned long long)(s->post_ns / 1000), (unsigned long long)s->predicate_passes,
        (unsigned long long)s->sleeps, (unsigned long long)s->window_full,
        (unsigned long long)(s->window_full_ns / 1000), (int)s->window_holder);
    if (group->membership.appender != NULL)
        sp_json_printf(out, "Log: %llu records (%llu bytes) durable, %llu syncs\n",
                       (unsigned long long)s->log_records_durable,
                       (unsigned long long)s->log_bytes_durable, (unsigned long long)s->log_syncs);
    sp_json_printf(out, "Transport: %s, %u peers connected, %u failed\n",
                   view->backend != NULL ? view->backend : "", r->connected, r->failed);
}

int admin_report(spindle_group_t *group, bool text, struct sp_json *out)
{
    struct report r;
    memset(&r, 0, sizeof r);
    r.group = group;
    int rc = view_snapshot(&group->membership, &r.view);
    if (rc == 0)
        rc = spindle_group_stats(group, &r.stats);
    if (rc == 0) {
        r.status = view_status(&group->membership);
        snprintf(r.status_msg, sizeof r.status_msg, "%s", r.status == 0 ? "" : spindle_errmsg());
        for (uint32_t rank = 0; rank < r.view.num_members; rank++) {
            r.connected += r.view.members[rank].link == SST_LINK_CONNECTED;
            r.failed += r.view.members[rank].link == SST_LINK_FAILED;
        }
        if (text)
            write_text(out, &r);
        else
            write_json(out, &r);
        if (out->failed)
            rc = sp_error(SPINDLE_EMSGSIZE, "the report does not fit %zu bytes (or memory ran out)",
                          out->limit);
    }
    view_snapshot_free(&r.view);
    return rc;
}
