/*
 * spindle-bench report: aggregates member results (counts summed over
 * members, rates per receiving member, latency = median of the senders'
 * p50 and maximum of their p99) and prints a summary and one JSON line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static double mean(uint64_t total, uint64_t count)
{
    return count > 0 ? (double)total / (double)count : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_hist(const char *name, const uint64_t *hist)
{
    int last = -1;
    for (int b = 0; b < SPINDLE_HIST_BUCKETS; b++)
        if (hist[b] != 0)
            last = b;
    printf(",\"%s\":[", name);
    for (int b = 0; b <= last; b++)
        printf("%s%llu", b ? "," : "", (unsigned long long)hist[b]);
    printf("]");
}

struct totals {
    uint64_t delivered, delivered_total, writes, doorbells, nulls, post_ns, sent;
    uint64_t pinned_max; /* most bytes one member's transport kept pinned */
    uint64_t send_hist[SPINDLE_HIST_BUCKETS], receive_hist[SPINDLE_HIST_BUCKETS],
        delivery_hist[SPINDLE_HIST_BUCKETS];
    uint64_t send_b, send_m, recv_b, recv_m, deliv_b, deliv_m;
    double seconds, rate_sum, p50, p99;
    uint64_t log_records, log_bytes, log_syncs;
    uint64_t log_catchup_records, log_catchup_bytes;
    double log_rate_sum, log_bytes_rate_sum; /* per member, per second */
    double lag_p50, lag_p99;                 /* median member's p50, worst member's p99 */
};

static void sum_results(const struct bench_result *results, uint32_t count, struct totals *t)
{
    memset(t, 0, sizeof *t);
    double p50s[SPINDLE_MAX_MEMBERS], lag_p50s[SPINDLE_MAX_MEMBERS];
    uint32_t lat = 0, lags = 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct bench_result *r = &results[i];
        t->delivered += r->delivered;
        t->delivered_total += r->delivered_total;
        t->sent += r->messages_sent;
        t->writes += r->writes_posted;
        t->doorbells += r->doorbells;
        t->nulls += r->nulls_sent;
        t->post_ns += r->post_ns;
        if (r->pinned_bytes > t->pinned_max)
            t->pinned_max = r->pinned_bytes;
        for (int b = 0; b < SPINDLE_HIST_BUCKETS; b++) {
            t->send_hist[b] += r->send_hist[b];
            t->receive_hist[b] += r->receive_hist[b];
            t->delivery_hist[b] += r->delivery_hist[b];
        }
        t->send_b += r->send_batches;
        t->send_m += r->send_msgs;
        t->recv_b += r->receive_batches;
        t->recv_m += r->receive_msgs;
        t->deliv_b += r->delivery_batches;
        t->deliv_m += r->delivery_msgs;
        if (r->seconds > t->seconds)
            t->seconds = r->seconds;
        if (r->seconds > 0)
            t->rate_sum += (double)r->delivered / r->seconds;
        t->log_records += r->log_records;
        t->log_bytes += r->log_bytes;
        t->log_syncs += r->log_syncs;
        t->log_catchup_records += r->log_catchup_records;
        t->log_catchup_bytes += r->log_catchup_bytes;
        if (r->seconds > 0) {
            t->log_rate_sum += (double)r->log_records / r->seconds;
            t->log_bytes_rate_sum += (double)r->log_bytes / r->seconds;
        }
        if (r->has_latency) {
            p50s[lat++] = r->p50_us;
            if (r->p99_us > t->p99)
                t->p99 = r->p99_us;
        }
        if (r->has_lag) {
            lag_p50s[lags++] = r->lag_p50_us;
            if (r->lag_p99_us > t->lag_p99)
                t->lag_p99 = r->lag_p99_us;
        }
    }
    if (lags > 0) {
        qsort(lag_p50s, lags, sizeof lag_p50s[0], cmp_double);
        t->lag_p50 = lag_p50s[lags / 2];
    }
    if (lat > 0) {
        qsort(p50s, lat, sizeof p50s[0], cmp_double);
        t->p50 = p50s[lat / 2];
    }
}

void bench_report(const struct bench_config *config, uint32_t members,
                  const struct bench_result *results, uint32_t count)
{
    struct totals t;
    sum_results(results, count, &t);
    double msgs_per_s = t.rate_sum / count; /* per receiving member */
    double mb_per_s = msgs_per_s * config->msg_size / 1e6;
    uint32_t senders = bench_num_senders(config, members);
    if (config->join != NULL) {
        /* A joiner reports the views it was in. */
        members = results[0].view_members_max;
        senders = results[0].senders;
    }
    const char *mode = config->mode == SPINDLE_MODE_ATOMIC ? "atomic" : "unordered";
    if (config->file != NULL && !config->mode_given)
        mode = "per-subgroup";        /* --config subgroups with different modes */
    char window[16] = "per-subgroup"; /* 0: each --config subgroup's own (JSON: 0) */
    if (config->window > 0)
        snprintf(window, sizeof window, "%u", config->window);
    printf("%u members, %u senders, %u B messages, window %s, %u/%u subgroups active, %s, %s\n",
           members, senders, config->msg_size, window, config->active_subgroups, config->subgroups,
           mode, config->transport);
    printf("  optimizations: batching %s, null-sends %s, early unlock %s; delay %u us on %u "
           "sender(s)\n",
           config->batching ? "on" : "off", config->null_sends ? "on" : "off",
           config->early_unlock ? "on" : "off", config->delay_us, config->delayed_senders);
    if (config->join != NULL)
        printf("  joiner: member %d in views %llu..%llu of %u to %u members; its figures run "
               "from its join to its end\n",
               results[0].member, (unsigned long long)results[0].first_view,
               (unsigned long long)results[0].last_view, results[0].view_members_min,
               results[0].view_members_max);
    if (config->duration_ns > 0)
        printf("  timed run: %.3f s measured after a %.3f s warm-up; %llu messages delivered in "
               "all\n",
               (double)config->duration_ns / 1e9, (double)config->warmup_ns / 1e9,
               (unsigned long long)t.delivered_total);
    printf("  delivered %llu messages (all members) in %.3f s: %.0f msgs/s, %.2f MB/s per member\n",
           (unsigned long long)t.delivered, t.seconds, msgs_per_s, mb_per_s);
    printf("  latency p50 %.1f us, p99 %.1f us; writes posted %llu (%.3f per delivered message), "
           "nulls %llu\n",
           t.p50, t.p99, (unsigned long long)t.writes, mean(t.writes, t.delivered_total),
           (unsigned long long)t.nulls);
    printf("  mean batch: send %.2f, receive %.2f, delivery %.2f; pinned %llu bytes at most per "
           "member\n",
           mean(t.send_m, t.send_b), mean(t.recv_m, t.recv_b), mean(t.deliv_m, t.deliv_b),
           (unsigned long long)t.pinned_max);
    if (config->log_dir != NULL)
        printf("  log: %llu records, %llu bytes durable (all members): %.0f records/s, %.2f MB/s "
               "per member; %.4f fdatasync per record\n",
               (unsigned long long)t.log_records, (unsigned long long)t.log_bytes,
               t.log_rate_sum / count, t.log_bytes_rate_sum / count / 1e6,
               mean(t.log_syncs, t.log_records));
    if (config->log_dir != NULL)
        printf("  persistence frontier lag (delivery here to durable at every member): p50 %.1f "
               "us, p99 %.1f us; %.4f fdatasync per delivered message\n",
               t.lag_p50, t.lag_p99, mean(t.log_syncs, t.delivered_total));
    if (t.log_catchup_records > 0)
        printf("  joined with its log: caught up %llu records, %llu bytes from the leader's log\n",
               (unsigned long long)t.log_catchup_records, (unsigned long long)t.log_catchup_bytes);
    printf("{\"members\":%u,\"senders\":%u,\"msg_size\":%u,\"window\":%u,\"subgroups\":%u,"
           "\"active_subgroups\":%u,\"mode\":\"%s\",\"transport\":\"%s\",\"batching\":%s,"
           "\"null_sends\":%s,\"early_unlock\":%s,\"delay_us\":%u,\"delayed_senders\":%u,"
           "\"messages_per_sender\":%llu,\"duration_s\":%.3f,\"warmup_s\":%.3f,"
           "\"messages_delivered\":%llu,\"messages_delivered_total\":%llu,\"seconds\":%.6f,"
           "\"msgs_per_s\":%.1f,\"mb_per_s\":%.3f,\"writes_posted\":%llu,\"doorbells\":%llu,"
           "\"writes_per_message\":%.4f,\"nulls_sent\":%llu,\"post_ms\":%.3f,"
           "\"p50_latency_us\":%.2f,\"p99_latency_us\":%.2f,\"send_batch_mean\":%.3f,"
           "\"receive_batch_mean\":%.3f,\"delivery_batch_mean\":%.3f",
           members, senders, config->msg_size, config->window, config->subgroups,
           config->active_subgroups, mode, config->transport, config->batching ? "true" : "false",
           config->null_sends ? "true" : "false", config->early_unlock ? "true" : "false",
           config->delay_us, config->delayed_senders,
           (unsigned long long)(config->duration_ns > 0 ? 0 : config->messages),
           (double)config->duration_ns / 1e9, (double)config->warmup_ns / 1e9,
           (unsigned long long)t.delivered, (unsigned long long)t.delivered_total, t.seconds,
           msgs_per_s, mb_per_s, (unsigned long long)t.writes, (unsigned long long)t.doorbells,
           mean(t.writes, t.delivered_total), (unsigned long long)t.nulls, (double)t.post_ns / 1e6,
           t.p50, t.p99, mean(t.send_m, t.send_b), mean(t.recv_m, t.recv_b),
           mean(t.deliv_m, t.deliv_b));
    if (config->log_dir != NULL) {
        printf(",\"log_records\":%llu,\"log_bytes\":%llu,\"log_syncs\":%llu,"
               "\"log_records_per_s\":%.1f,\"log_mb_per_s\":%.3f,\"fdatasync_per_record\":%.5f",
               (unsigned long long)t.log_records, (unsigned long long)t.log_bytes,
               (unsigned long long)t.log_syncs, t.log_rate_sum / count,
               t.log_bytes_rate_sum / count / 1e6, mean(t.log_syncs, t.log_records));
        printf(",\"fdatasync_per_message\":%.5f,\"frontier_lag_p50_us\":%.2f,"
               "\"frontier_lag_p99_us\":%.2f",
               mean(t.log_syncs, t.delivered_total), t.lag_p50, t.lag_p99);
        printf(",\"log_catchup_records\":%llu,\"log_catchup_bytes\":%llu",
               (unsigned long long)t.log_catchup_records, (unsigned long long)t.log_catchup_bytes);
    }
    print_hist("send_hist", t.send_hist);
    print_hist("receive_hist", t.receive_hist);
    print_hist("delivery_hist", t.delivery_hist);
    printf(",\"pinned_bytes_max\":%llu}\n", (unsigned long long)t.pinned_max);
}
