/*
 * One group member of spindle-bench: builds the group through the public
 * API, streams messages into the active subgroups, counts deliveries,
 * measures own-message latency (commit to local delivery) and optionally
 * writes the delivery trace. A joiner (--join) only receives; with
 * --leave-after it leaves the group part-way through the stream.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_timing.h"
#include "util/crc32c.h"

/* Longest trace line: six numbers, the longest 20 digits. */
#define TRACE_LINE_MAX 128

struct member_state {
    const struct bench_config *config;
    uint32_t self;
    uint64_t expected;
    uint64_t delivered;           /* atomic: written by the delivery callback */
    uint64_t done_ns;             /* atomic: when delivered reached expected */
    struct bench_latency latency; /* own commit times and latency samples */
    struct bench_lag lag;         /* --log-dir: delivery to global persistence */
    struct bench_clock clock;     /* --duration: the run's time and its measured interval */
    char who[32];                 /* "member <id>" in the progress line */
    uint32_t max_window;          /* the largest window of the active subgroups */
    uint64_t delivered_view;      /* atomic: the latest view a message was delivered in */
    FILE *trace;                  /* written with write(2) from trace_buf, never through stdio */
    char trace_buf[1u << 16];
    size_t trace_len;
    bool trace_failed;
    /* --tolerate-failures (atomics: written by the upcalls) */
    uint64_t *from_sender; /* [active * SPINDLE_MAX_MEMBERS] messages delivered */
    int duplicate;         /* a sender's app index out of order */
    uint64_t view_id;
    uint64_t view_mask;                          /* member ids of the current view */
    uint32_t view_members_min, view_members_max; /* over the views it was in */
    bool *sends;                                 /* [active] this member sends in the subgroup */
    int sender_rank;      /* rank among the senders of its first sending subgroup, or -1 */
    uint32_t num_senders; /* senders are member ids 0..num_senders-1 */
    uint64_t first_view;  /* a joiner's first view (UINT64_MAX: not reported yet) */
    /* The stream's length per sender: --messages, or the smaller count the
     * --stop-file gave (the application thread reads and writes these). */
    uint64_t stream_messages;
    uint64_t stop_checked_ns; /* when the --stop-file was last looked for */
    uint64_t sent;            /* messages this member sent, once its stream is over */
    bool stop_read;           /* its count is in stream_messages */
    bool left;                /* --leave-after: it left the group (spindle_group_leave) */
    /* A member restarted from its log (docs/LOGS.md "Total restart"): its
     * own log was replayed, and its stream goes on where that ended. */
    bool restarted;
};

/* State handed to a joiner: the number of senders, then per active
 * subgroup and sender the count of messages delivered. */
struct bench_state {
    uint32_t num_senders;
    uint32_t active_subgroups;
    uint64_t from_sender[];
};

static int save_state(void *ctx, void **data, size_t *length)
{
    struct member_state *st = ctx;
    size_t counts = (size_t)st->config->active_subgroups * SPINDLE_MAX_MEMBERS;
    struct bench_state *state = malloc(sizeof *state + counts * sizeof(uint64_t));
    if (state == NULL)
        return SPINDLE_ENOMEM;
    state->num_senders = st->num_senders;
    state->active_subgroups = st->config->active_subgroups;
    for (size_t i = 0; i < counts; i++)
        state->from_sender[i] = __atomic_load_n(&st->from_sender[i], __ATOMIC_ACQUIRE);
    *data = state;
    *length = sizeof *state + counts * sizeof(uint64_t);
    return 0;
}

static int load_state(void *ctx, const void *data, size_t length)
{
    struct member_state *st = ctx;
    size_t counts = (size_t)st->config->active_subgroups * SPINDLE_MAX_MEMBERS;
    const struct bench_state *state = data;
    if (length != sizeof *state + counts * sizeof(uint64_t) ||
        state->active_subgroups != st->config->active_subgroups ||
        state->num_senders > SPINDLE_MAX_MEMBERS) {
        fprintf(stderr, "spindle-bench: the state handed over does not match this workload "
                        "(--active-subgroups?)\n");
        return SPINDLE_EINVAL;
    }
    st->num_senders = state->num_senders;
    for (size_t i = 0; i < counts; i++)
        __atomic_store_n(&st->from_sender[i], state->from_sender[i], __ATOMIC_RELEASE);
    return 0;
}

/* A joiner restarting with its log (--log-dir, docs/LOGS.md "Restart of
 * one member"): its state is rebuilt from what its log holds and what it
 * is sent, checked exactly-once like deliveries; the senders are those
 * seen. Snapshots are not taken by the benchmark: one is refused. */
static int replay_message(void *ctx, const struct spindle_replayed *item)
{
    struct member_state *st = ctx;
    if (item->kind != SPINDLE_REPLAY_MESSAGE) {
        fprintf(stderr, "spindle-bench: a snapshot in the log, which the benchmark never takes\n");
        return SPINDLE_EINVAL;
    }
    if (item->subgroup >= st->config->active_subgroups || item->sender >= SPINDLE_MAX_MEMBERS ||
        item->length < 8)
        return 0;
    uint64_t index;
    memcpy(&index, item->data, 8);
    uint64_t *n = &st->from_sender[item->subgroup * SPINDLE_MAX_MEMBERS + item->sender];
    if (index != *n) {
        fprintf(stderr,
                "spindle-bench: replayed message %llu of member %u in subgroup %u where %llu was "
                "due\n",
                (unsigned long long)index, item->sender, item->subgroup, (unsigned long long)*n);
        return SPINDLE_EPROTO;
    }
    __atomic_store_n(n, index + 1, __ATOMIC_RELEASE);
    if (item->sender + 1 > st->num_senders)
        st->num_senders = item->sender + 1;
    if (!item->received)
        st->restarted = true;
    return 0;
}

/* Writes out the trace lines gathered so far: whole lines only, so that a
 * member killed between two writes leaves whole lines. */
static void trace_flush(struct member_state *st)
{
    size_t done = 0;
    while (done < st->trace_len) {
        ssize_t n = write(fileno(st->trace), st->trace_buf + done, st->trace_len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            st->trace_failed = true;
            break;
        }
        done += (size_t)n;
    }
    st->trace_len = 0;
}

static void trace_line(struct member_state *st, const struct spindle_message *m, uint64_t index)
{
    if (sizeof st->trace_buf - st->trace_len < TRACE_LINE_MAX)
        trace_flush(st);
    int n = snprintf(st->trace_buf + st->trace_len, TRACE_LINE_MAX, "%llu %u %u %llu %u %08x\n",
                     (unsigned long long)m->view_id, m->subgroup, m->sender_id,
                     (unsigned long long)index, m->length, sp_crc32c(0, m->data, m->length));
    if (n > 0 && n < TRACE_LINE_MAX)
        st->trace_len += (size_t)n;
}

uint32_t bench_num_senders(const struct bench_config *config, uint32_t members)
{
    switch (config->senders) {
    case SENDERS_ONE:
        return 1;
    case SENDERS_HALF:
        return members / 2 > 0 ? members / 2 : 1;
    default:
        return members;
    }
}

/* --tolerate-failures: the sender's app index travels in the payload (a
 * resend in a later view has a new sender_index); checks exactly-once. */
static uint64_t app_index(struct member_state *st, const struct spindle_message *m)
{
    if (!st->config->tolerate_failures)
        return m->sender_index;
    uint64_t index = UINT64_MAX;
    if (m->length >= 8)
        memcpy(&index, m->data, 8);
    if (m->subgroup < st->config->active_subgroups && m->sender_id < SPINDLE_MAX_MEMBERS) {
        uint64_t *n = &st->from_sender[m->subgroup * SPINDLE_MAX_MEMBERS + m->sender_id];
        if (index != __atomic_load_n(n, __ATOMIC_RELAXED))
            __atomic_store_n(&st->duplicate, 1, __ATOMIC_RELEASE);
        else
            __atomic_store_n(n, index + 1, __ATOMIC_RELEASE);
    }
    return index;
}

/* --log-dir: notes runs of delivered messages (one subgroup and view) for
 * the frontier lag. */
static void note_for_lag(struct member_state *st, const struct spindle_message *messages,
                         size_t count, uint64_t now)
{
    size_t first = 0;
    for (size_t i = 1; i <= count; i++) {
        if (i < count && messages[i].subgroup == messages[first].subgroup &&
            messages[i].view_id == messages[first].view_id)
            continue;
        bench_lag_deliver(&st->lag, messages[first].subgroup, messages[first].view_id,
                          messages[i - 1].seq + 1, (uint32_t)(i - first), now);
        first = i;
    }
}

static void on_persisted(void *ctx, uint32_t subgroup, uint64_t view_id, uint64_t frontier)
{
    struct member_state *st = ctx;
    bench_lag_persisted(&st->lag, subgroup, view_id, frontier, bench_now_ns());
}

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct member_state *st = ctx;
    uint64_t now = bench_now_ns();
    if (st->config->log_dir != NULL)
        note_for_lag(st, messages, count, now);
    for (size_t i = 0; i < count; i++) {
        const struct spindle_message *m = &messages[i];
        uint64_t index = app_index(st, m);
        if (m->sender_id == __atomic_load_n(&st->self, __ATOMIC_RELAXED) &&
            m->subgroup < st->config->active_subgroups)
            bench_latency_deliver(&st->latency, m->subgroup, index, now);
        if (m->view_id > __atomic_load_n(&st->delivered_view, __ATOMIC_RELAXED))
            __atomic_store_n(&st->delivered_view, m->view_id, __ATOMIC_RELEASE);
        if (st->trace != NULL)
            trace_line(st, m, index);
    }
    if (st->trace != NULL)
        trace_flush(st); /* one write per delivery batch */
    uint64_t total = __atomic_add_fetch(&st->delivered, count, __ATOMIC_RELEASE);
    if (total >= st->expected && __atomic_load_n(&st->done_ns, __ATOMIC_ACQUIRE) == 0)
        __atomic_store_n(&st->done_ns, now, __ATOMIC_RELEASE);
}

/* View upcall: remembers the members and prints the crash-to-view time. */
static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct member_state *st = ctx;
    uint64_t mask = 0;
    for (uint32_t i = 0; i < view->num_members; i++)
        mask |= 1ull << view->members[i];
    __atomic_store_n(&st->view_mask, mask, __ATOMIC_RELEASE);
    if (view->num_members < __atomic_load_n(&st->view_members_min, __ATOMIC_ACQUIRE))
        __atomic_store_n(&st->view_members_min, view->num_members, __ATOMIC_RELEASE);
    if (view->num_members > __atomic_load_n(&st->view_members_max, __ATOMIC_ACQUIRE))
        __atomic_store_n(&st->view_members_max, view->num_members, __ATOMIC_RELEASE);
    __atomic_store_n(&st->view_id, view->view_id, __ATOMIC_RELEASE);
    uint64_t unset = UINT64_MAX;
    __atomic_compare_exchange_n(&st->first_view, &unset, view->view_id, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < view->num_joined; i++)
        printf("view change: view %llu: member %u joined (%s, incarnation %llu)\n",
               (unsigned long long)view->view_id, view->joined[i], view->joined_identities[i].name,
               (unsigned long long)view->joined_identities[i].incarnation);
    for (uint32_t i = 0; i < view->num_left; i++)
        printf("view change: view %llu: member %u left (%s, incarnation %llu)\n",
               (unsigned long long)view->view_id, view->left[i], view->left_identities[i].name,
               (unsigned long long)view->left_identities[i].incarnation);
    if (view->num_left > 0 && view->detected_ns > 0)
        printf("view change: view %llu installed %.1f ms after failure detected\n",
               (unsigned long long)view->view_id,
               (double)(view->installed_ns - view->detected_ns) / 1e6);
    fflush(stdout);
}

/* --realtime: spindle_group_create under SCHED_FIFO, so that the threads
 * it starts (the predicate thread above all) inherit the policy; the
 * calling (application) thread goes back to its own policy after. A
 * real-time predicate thread is not left waiting behind another thread on
 * a busy CPU while another CPU idles (docs/PERFORMANCE.md, "The slowest
 * one percent at light load on shm"). */
static int realtime_create(const struct bench_config *config,
                           const struct spindle_group_options *options,
                           const struct spindle_subgroup_config *subgroups, spindle_group_t **out)
{
    if (config->realtime_priority == 0)
        return spindle_group_create(options, subgroups, config->subgroups, out);
    int old_policy;
    struct sched_param old_param, fifo = {.sched_priority = config->realtime_priority};
    int rc = pthread_getschedparam(pthread_self(), &old_policy, &old_param);
    if (rc == 0)
        rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo);
    if (rc != 0) {
        fprintf(stderr, "spindle-bench: --realtime %d: cannot take SCHED_FIFO: %s\n",
                config->realtime_priority, strerror(rc));
        return SPINDLE_EPERM;
    }
    int created = spindle_group_create(options, subgroups, config->subgroups, out);
    rc = pthread_setschedparam(pthread_self(), old_policy, &old_param);
    if (rc != 0)
        fprintf(stderr, "spindle-bench: --realtime: cannot restore the policy: %s\n", strerror(rc));
    return created;
}

/* Deterministic payload of (member, subgroup, index), so traces can be
 * compared across members by checksum. */
static void fill_payload(uint8_t *data, uint32_t size, uint32_t self, uint32_t subgroup,
                         uint64_t index)
{
    uint64_t word =
        (index * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)self << 56) ^ ((uint64_t)subgroup << 40);
    uint32_t i = 0;
    for (; i + 8 <= size; i += 8) {
        memcpy(data + i, &word, 8);
        word += 0x2545F4914F6CDD1Dull;
    }
    for (; i < size; i++)
        data[i] = (uint8_t)(word >> (8 * (i & 7)));
}

static void fail(struct bench_result *result, const char *what, int rc)
{
    result->ok = 0;
    char who[32] = "joiner"; /* no member id before it is in */
    if (result->member >= 0)
        snprintf(who, sizeof who, "member %d", result->member);
    snprintf(result->error, sizeof result->error, "%s: %s: %s (%s)", who, what,
             spindle_strerror(rc), spindle_errmsg());
}

static int create_group(const struct bench_config *config, uint32_t self, uint32_t members,
                        struct member_state *st, spindle_group_t **out)
{
    uint32_t member_list[SPINDLE_MAX_MEMBERS];
    for (uint32_t i = 0; i < members; i++)
        member_list[i] = i;
    struct spindle_subgroup_config *subgroups = calloc(config->subgroups, sizeof *subgroups);
    if (subgroups == NULL)
        return SPINDLE_ENOMEM;
    for (uint32_t g = 0; g < config->subgroups; g++)
        bench_subgroup(config, g, members, member_list, &subgroups[g]);
    struct spindle_group_options options;
    spindle_group_options_init(&options);
    options.transport = config->transport;
    options.provider = config->provider;
    options.device = config->device;
    options.group_name = config->group_name[0] ? config->group_name : NULL;
    options.self = self;
    options.num_members = members;
    options.bootstrap = config->members != NULL ? config->members : config->bootstrap_dir;
    /* Missing members are reported within --timeout (at most a minute). */
    options.bootstrap_timeout_ms = config->timeout_s < 60 ? (int)config->timeout_s * 1000 : 60000;
    if (config->failure_timeout_ms > 0)
        options.failure_timeout_ms = config->failure_timeout_ms;
    options.slow_member_ms = config->slow_member_ms;
    options.tie_breaker = config->tie_breaker;
    if (config->num_poll_cpus > 0) {
        options.poll_dedicated = true;
        options.poll_cpu = config->poll_cpus[self % config->num_poll_cpus];
    }
    char name[SPINDLE_MEMBER_NAME_MAX];
    if (config->name != NULL) {
        if (config->local > 0)
            snprintf(name, sizeof name, "%s-%u", config->name, self);
        else
            snprintf(name, sizeof name, "%s", config->name);
        options.member_name = name;
    }
    options.incarnation = config->incarnation;
    options.key_file = config->key_file;
    options.accept_key_file = config->accept_key_file;
    /* --log-dir: every subgroup logged; --local members each in a
     * directory of their own under it (created here, mode 0700). */
    char log_dir[4096];
    uint32_t *logged = calloc(config->subgroups, sizeof *logged);
    if (logged == NULL) {
        free(subgroups);
        return SPINDLE_ENOMEM;
    }
    if (config->log_dir != NULL) {
        snprintf(log_dir, sizeof log_dir, "%s", config->log_dir);
        if (config->local > 0) {
            if (mkdir(config->log_dir, 0700) != 0 && errno != EEXIST) {
                fprintf(stderr, "spindle-bench: --log-dir %s: %s\n", config->log_dir,
                        strerror(errno));
                free(logged);
                free(subgroups);
                return SPINDLE_EIO;
            }
            snprintf(log_dir, sizeof log_dir, "%s/member-%u", config->log_dir, self);
        }
        for (uint32_t g = 0; g < config->subgroups; g++)
            logged[g] = g;
        options.log_dir = log_dir;
        options.logged_subgroups = logged;
        options.num_logged_subgroups = config->subgroups;
        options.persisted = on_persisted;
        options.persisted_ctx = st;
    }
    options.batching = config->batching;
    options.null_sends = config->null_sends;
    options.own_inline = config->own_inline;
    options.early_unlock = config->early_unlock;
    options.deliver = on_deliver;
    options.deliver_ctx = st;
    options.dispatch = config->dispatch;
    options.tolerate_failures = config->tolerate_failures;
    options.view_changed = on_view;
    options.view_ctx = st;
    if (config->tolerate_failures) {
        options.state_save = save_state;
        options.state_load = load_state;
        options.state_ctx = st;
        options.replay = replay_message;
        options.replay_ctx = st;
    }
    if (config->join != NULL) {
        options.join = config->join;
        options.bootstrap = config->listen;
        options.group_name = NULL; /* the group tells */
    }
    int rc = realtime_create(config, &options, subgroups, out);
    free(logged);
    free(subgroups);
    return rc;
}

/* --dispatch: runs the member's upcalls until it stops. */
static void *dispatch_main(void *group)
{
    int rc = spindle_dispatch(group, SPINDLE_DISPATCH_BLOCKING);
    if (rc != SPINDLE_ESHUTDOWN)
        fprintf(stderr, "spindle-bench: dispatch ended: %s\n", spindle_errmsg());
    return NULL;
}

/* Fills st->sends and st->sender_rank; returns the number of messages this
 * member delivers (every sender's messages in the active subgroups it is a
 * member of). */
static uint64_t plan_subgroups(const struct bench_config *config, uint32_t members,
                               struct member_state *st)
{
    uint32_t all[SPINDLE_MAX_MEMBERS];
    for (uint32_t i = 0; i < members; i++)
        all[i] = i;
    uint64_t expected = 0;
    st->sender_rank = -1;
    for (uint32_t g = 0; g < config->active_subgroups; g++) {
        struct spindle_subgroup_config sub;
        bench_subgroup(config, g, members, all, &sub);
        int rank = bench_sender_rank(&sub, st->self);
        st->sends[g] = rank >= 0;
        if (st->sender_rank < 0)
            st->sender_rank = rank;
        if (sub.window_size > st->max_window)
            st->max_window = sub.window_size;
        if (bench_is_member(&sub, st->self))
            expected += config->messages * sub.num_senders;
    }
    return expected;
}

/* The members of the current view. */
static uint32_t view_size(struct member_state *st)
{
    return (uint32_t)__builtin_popcountll(__atomic_load_n(&st->view_mask, __ATOMIC_ACQUIRE));
}

/* --duration: moves the run clock on (progress line from member 0 of
 * --local, from every standalone process). True once the time is over. */
static bool run_over(const struct bench_config *config, struct member_state *st)
{
    bool progress = config->local == 0 || st->self == 0;
    return bench_clock_tick(&st->clock, __atomic_load_n(&st->delivered, __ATOMIC_ACQUIRE),
                            view_size(st), progress);
}

/* Sleeps until message i of a --rate run is due. */
static void pace(const struct bench_config *config, uint64_t start, uint64_t i)
{
    uint64_t due = start + i * 1000000000ull / config->rate, now = bench_now_ns();
    if (due > now) {
        struct timespec pause = {(time_t)((due - now) / 1000000000ull),
                                 (long)((due - now) % 1000000000ull)};
        nanosleep(&pause, NULL);
    }
}

/* --stop-file: reads the file; true when it holds a line ("hold" or a
 * count; a file without its newline is still being written). */
static bool read_stop_file(const char *path, char *text, size_t size)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return false;
    size_t length = fread(text, 1, size - 1, file);
    fclose(file);
    text[length] = '\0';
    return length > 0 && text[length - 1] == '\n';
}

/* --stop-file, "hold": a sender reports how many messages it has sent in
 * FILE.<id> (written whole, then renamed) and sends no more until the file
 * holds the count (or its --timeout is over: then --messages stays). */
static void hold_stream(const struct bench_config *config, struct member_state *st, uint64_t sent)
{
    uint32_t self = __atomic_load_n(&st->self, __ATOMIC_RELAXED);
    char path[4096], temp[4100], text[32];
    snprintf(path, sizeof path, "%s.%u", config->stop_file, self);
    snprintf(temp, sizeof temp, "%s.tmp", path);
    FILE *file = fopen(temp, "w");
    if (file == NULL || fprintf(file, "%llu\n", (unsigned long long)sent) < 0 ||
        fclose(file) != 0 || rename(temp, path) != 0) {
        fprintf(stderr, "spindle-bench: member %u: cannot write %s\n", self, path);
        return;
    }
    uint64_t deadline = bench_now_ns() + (uint64_t)config->timeout_s * 1000000000ull;
    while (bench_now_ns() < deadline) {
        if (read_stop_file(config->stop_file, text, sizeof text) && strcmp(text, "hold\n") != 0)
            return;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

/* --stop-file: the harness ends the stream once the part of the run that
 * needs it (joins, kills) is over, at a count every process of the group
 * agrees on, whatever the load did to the senders' pace: it writes "hold",
 * each sender reports what it has sent and waits (hold_stream), then the
 * harness writes a count no sender has passed. Looked for at most every
 * 10 ms. Returns the stream's messages per sender: --messages until the
 * count is read, then the smaller of the two; sent: what this member has
 * sent so far. */
static uint64_t stream_messages(const struct bench_config *config, struct member_state *st,
                                uint64_t sent)
{
    if (config->stop_file == NULL || st->stop_read)
        return st->stream_messages;
    uint64_t now = bench_now_ns();
    if (st->stop_checked_ns != 0 && now - st->stop_checked_ns < 10000000ull)
        return st->stream_messages;
    st->stop_checked_ns = now;
    char text[32];
    if (!read_stop_file(config->stop_file, text, sizeof text))
        return st->stream_messages;
    if (strcmp(text, "hold\n") == 0) {
        if (st->sender_rank < 0)
            return st->stream_messages; /* nothing to report: waits for the count */
        hold_stream(config, st, sent);
        if (!read_stop_file(config->stop_file, text, sizeof text) || strcmp(text, "hold\n") == 0)
            return st->stream_messages;
    }
    char *end;
    unsigned long long count = strtoull(text, &end, 10);
    if (end == text || *end != '\n')
        return st->stream_messages;
    st->stop_read = true;
    if (count < st->stream_messages)
        st->stream_messages = count;
    return st->stream_messages;
}

/* Streams this member's messages round-robin over the active subgroups it
 * sends in: --messages of them, or until the --duration is over. */
/* Where this member's stream in subgroup g starts: 0, or after a restart
 * the messages of its own the recovered log held. */
static uint64_t resumed(const struct member_state *st, uint32_t g)
{
    if (!st->restarted)
        return 0;
    return __atomic_load_n(&st->from_sender[g * SPINDLE_MAX_MEMBERS + st->self], __ATOMIC_ACQUIRE);
}

/* A restarted member starts its stream with the whole group back: the
 * others are restarting too, and the first to run would otherwise finish
 * before they are in (bounded by --timeout). */
static int await_full_view(const struct bench_config *config, spindle_group_t *group,
                           struct member_state *st, uint32_t members)
{
    uint64_t deadline = bench_now_ns() + (uint64_t)config->timeout_s * 1000000000ull;
    while ((uint32_t)__builtin_popcountll(__atomic_load_n(&st->view_mask, __ATOMIC_ACQUIRE)) <
           members) {
        if (bench_now_ns() > deadline)
            return SPINDLE_ETIMEDOUT;
        int status = spindle_group_status(group);
        if (status < 0)
            return status;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int send_all(const struct bench_config *config, spindle_group_t *group,
                    struct member_state *st)
{
    bool delayed = st->sender_rank >= 0 && (uint32_t)st->sender_rank < config->delayed_senders &&
                   config->delay_us > 0;
    bool timed = config->duration_ns > 0;
    uint64_t start = bench_now_ns();
    /* After a restart each subgroup's stream goes on after what the
     * recovered log holds of this member's messages. */
    uint64_t first = UINT64_MAX;
    for (uint32_t g = 0; g < config->active_subgroups; g++)
        if (st->sends[g] && resumed(st, g) < first)
            first = resumed(st, g);
    uint64_t i = first == UINT64_MAX ? 0 : first;
    for (; timed ? !run_over(config, st) : i < stream_messages(config, st, i); i++) {
        if (config->rate > 0)
            pace(config, start, i);
        for (uint32_t g = 0; g < config->active_subgroups; g++) {
            if (!st->sends[g] || i < resumed(st, g))
                continue;
            void *slot;
            int rc = spindle_reserve(group, g, config->msg_size, 0, &slot);
            if (rc < 0)
                return rc;
            fill_payload(slot, config->msg_size, st->self, g, i);
            if (config->tolerate_failures)
                memcpy(slot, &i, 8);
            bench_latency_commit(&st->latency, g, i, bench_now_ns());
            rc = spindle_commit(group, g);
            if (rc < 0)
                return rc;
            if (delayed)
                bench_spin_ns((uint64_t)config->delay_us * 1000u);
        }
    }
    st->sent = i;
    if (!timed && i > st->stream_messages) {
        /* Messages already sent cannot be taken back: the count must not
         * be below what a sender reported. */
        fprintf(stderr,
                "spindle-bench: member %u: --stop-file %s says %llu messages, but it had sent "
                "%llu already\n",
                __atomic_load_n(&st->self, __ATOMIC_RELAXED), config->stop_file,
                (unsigned long long)st->stream_messages, (unsigned long long)i);
        return SPINDLE_EINVAL;
    }
    return 0;
}

/* --tolerate-failures: done once every sender of the current view delivered
 * all its messages in every active subgroup. */
static bool survivors_done(const struct bench_config *config, struct member_state *st)
{
    uint64_t messages = stream_messages(config, st, st->sent);
    uint32_t num_senders = st->num_senders;
    uint64_t mask = __atomic_load_n(&st->view_mask, __ATOMIC_ACQUIRE);
    for (uint32_t g = 0; g < config->active_subgroups; g++)
        for (uint32_t s = 0; s < num_senders; s++)
            if (((mask >> s) & 1) && __atomic_load_n(&st->from_sender[g * SPINDLE_MAX_MEMBERS + s],
                                                     __ATOMIC_ACQUIRE) < messages)
                return false;
    return true;
}

/* --leave-after: the joiner has delivered enough to leave. */
static bool leave_due(const struct bench_config *config, struct member_state *st)
{
    return config->leave_after > 0 &&
           __atomic_load_n(&st->delivered, __ATOMIC_ACQUIRE) >= config->leave_after;
}

static bool all_delivered(const struct bench_config *config, struct member_state *st)
{
    if (leave_due(config, st))
        return true;
    if (config->tolerate_failures)
        return survivors_done(config, st) || __atomic_load_n(&st->duplicate, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&st->delivered, __ATOMIC_ACQUIRE) >= st->expected;
}

static int wait_delivered(const struct bench_config *config, spindle_group_t *group,
                          struct member_state *st)
{
    uint64_t deadline = bench_now_ns() + (uint64_t)config->timeout_s * 1000000000ull;
    while (config->duration_ns > 0 ? !run_over(config, st) : !all_delivered(config, st)) {
        if (bench_now_ns() > deadline)
            return SPINDLE_ETIMEDOUT;
        int status = spindle_group_status(group); /* stopped: cut off, ... */
        if (status < 0)
            return status;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* --app-cpus: pins the calling (application) thread of member self. */
static int pin_app_thread(const struct bench_config *config, uint32_t self)
{
    if (config->num_app_cpus == 0)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(config->app_cpus[self % config->num_app_cpus], &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc == 0)
        return 0;
    fprintf(stderr, "spindle-bench: member %u: --app-cpus: cannot pin to CPU %u: %s\n", self,
            config->app_cpus[self % config->num_app_cpus], strerror(rc));
    return SPINDLE_EINVAL;
}

static void collect(const struct bench_config *config, struct member_state *st,
                    spindle_group_t *group, struct bench_result *result)
{
    struct spindle_stats stats;
    spindle_group_stats(group, &stats);
    result->delivered_total = __atomic_load_n(&st->delivered, __ATOMIC_ACQUIRE);
    /* --log-dir: the writer syncs the last batch just after its upcall;
     * wait (at most 10 s) until the log holds the first view and every
     * delivered message. */
    uint64_t deadline = bench_now_ns() + 10000000000ull;
    while (config->log_dir != NULL && stats.log_records_durable < result->delivered_total + 1 &&
           bench_now_ns() < deadline) {
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
        spindle_group_stats(group, &stats);
    }
    result->log_records = stats.log_records_durable;
    result->log_bytes = stats.log_bytes_durable;
    result->log_syncs = stats.log_syncs;
    result->log_catchup_records = stats.log_catchup_records;
    result->log_catchup_bytes = stats.log_catchup_bytes;
    result->messages_sent = stats.messages_sent;
    result->writes_posted = stats.writes_posted;
    result->doorbells = stats.doorbells;
    result->nulls_sent = stats.nulls_sent;
    result->post_ns = stats.post_ns;
    result->pinned_bytes = stats.pinned_bytes;
    memcpy(result->send_hist, stats.send_batches, sizeof result->send_hist);
    memcpy(result->receive_hist, stats.receive_batches, sizeof result->receive_hist);
    memcpy(result->delivery_hist, stats.delivery_batches, sizeof result->delivery_hist);
    result->send_batches = stats.send_batch_count;
    result->send_msgs = stats.send_batch_messages;
    result->receive_batches = stats.receive_batch_count;
    result->receive_msgs = stats.receive_batch_messages;
    result->delivery_batches = stats.delivery_batch_count;
    result->delivery_msgs = stats.delivery_batch_messages;
    result->has_latency = bench_latency_percentiles(&st->latency, &result->p50_us, &result->p99_us);
    result->has_lag = config->log_dir != NULL &&
                      bench_lag_percentiles(&st->lag, &result->lag_p50_us, &result->lag_p99_us);
}

/* DIR/member-<id>.<suffix> of an initial member; a joiner's names carry
 * its incarnation, the view it joined in (DIR/member-<id>.<view>.<suffix>),
 * since a departed member's id may be given to a later joiner. A joiner
 * learns its id only when it is in, and may deliver at once: its trace
 * starts as DIR/joining-<pid>.trace, which joined_files() renames. */
static void member_path_in(const char *dir, const struct bench_config *config,
                           const struct member_state *st, const char *suffix, char *path,
                           size_t size)
{
    uint32_t self = __atomic_load_n(&st->self, __ATOMIC_RELAXED);
    if (config->join == NULL)
        snprintf(path, size, "%s/member-%u.%s", dir, self, suffix);
    else if (self == UINT32_MAX)
        snprintf(path, size, "%s/joining-%d.%s", dir, (int)getpid(), suffix);
    else
        snprintf(path, size, "%s/member-%u.%llu.%s", dir, self,
                 (unsigned long long)__atomic_load_n(&st->first_view, __ATOMIC_ACQUIRE), suffix);
}

static void member_path(const struct bench_config *config, const struct member_state *st,
                        const char *suffix, char *path, size_t size)
{
    member_path_in(config->trace_dir, config, st, suffix, path, size);
}

/* --latency-out DIR: DIR/member-<id>.latency, this member's latency samples
 * in nanoseconds, one a line, in increasing order (bench_latency_percentiles
 * sorted them). */
static int write_latency(const struct bench_config *config, const struct member_state *st)
{
    char path[4096];
    member_path_in(config->latency_out, config, st, "latency", path, sizeof path);
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        fprintf(stderr, "spindle-bench: --latency-out: cannot create %s: %s\n", path,
                strerror(errno));
        return SPINDLE_EIO;
    }
    bool ok = true;
    for (uint64_t i = 0; i < st->latency.count && ok; i++)
        ok = fprintf(file, "%u\n", st->latency.samples[i]) > 0;
    if (fclose(file) != 0 || !ok) {
        fprintf(stderr, "spindle-bench: --latency-out: cannot write %s: %s\n", path,
                strerror(errno));
        return SPINDLE_EIO;
    }
    return 0;
}

/* A joiner that is in: renames its trace (from the name it had before it
 * knew its id) and writes its pid file (a harness may kill it, or watch
 * it, by its id and incarnation). */
static int joined_files(const struct bench_config *config, struct member_state *st,
                        const char *joining_trace)
{
    if (config->trace_dir == NULL)
        return 0;
    char path[4096];
    member_path(config, st, "trace", path, sizeof path);
    if (rename(joining_trace, path) != 0)
        return SPINDLE_EIO;
    member_path(config, st, "pid", path, sizeof path);
    FILE *file = fopen(path, "w");
    if (file == NULL)
        return SPINDLE_EIO;
    int printed = fprintf(file, "%d\n", (int)getpid());
    return fclose(file) == 0 && printed > 0 ? 0 : SPINDLE_EIO;
}

static int open_trace(const struct bench_config *config, struct member_state *st)
{
    if (config->trace_dir == NULL)
        return 0;
    char path[4096];
    member_path(config, st, "trace", path, sizeof path);
    st->trace = fopen(path, "w");
    return st->trace != NULL ? 0 : SPINDLE_EIO;
}

/* DIR/member-<id>[.<joined view>].end: "view <final view id> members
 * <id,id,...>", then " joined <view id>" for a joiner and " left" for a
 * member that left (its final view is the last one it was in). */
static int write_end(const struct bench_config *config, struct member_state *st)
{
    if (config->trace_dir == NULL)
        return 0;
    /* A message of a new view may be delivered before that view's upcall
     * has run; the final view named must be the one it came in (at most
     * 10 s, as the upcall follows the install). */
    uint64_t give_up = bench_now_ns() + 10000000000ull;
    while (__atomic_load_n(&st->view_id, __ATOMIC_ACQUIRE) <
               __atomic_load_n(&st->delivered_view, __ATOMIC_ACQUIRE) &&
           bench_now_ns() < give_up) {
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    char path[4096];
    member_path(config, st, "end", path, sizeof path);
    FILE *file = fopen(path, "w");
    if (file == NULL)
        return SPINDLE_EIO;
    uint64_t mask = __atomic_load_n(&st->view_mask, __ATOMIC_ACQUIRE);
    fprintf(file, "view %llu members ",
            (unsigned long long)__atomic_load_n(&st->view_id, __ATOMIC_ACQUIRE));
    const char *sep = "";
    for (uint32_t id = 0; id < 64; id++)
        if ((mask >> id) & 1) {
            fprintf(file, "%s%u", sep, id);
            sep = ",";
        }
    if (config->join != NULL)
        fprintf(file, " joined %llu",
                (unsigned long long)__atomic_load_n(&st->first_view, __ATOMIC_ACQUIRE));
    fprintf(file, "%s\n", st->left ? " left" : "");
    return fclose(file) == 0 ? 0 : SPINDLE_EIO;
}

/* Starts the --duration clock; its measured interval also bounds the
 * latency samples. */
static void start_clock(const struct bench_config *config, struct member_state *st)
{
    if (config->duration_ns == 0)
        return;
    snprintf(st->who, sizeof st->who, "member %u", __atomic_load_n(&st->self, __ATOMIC_RELAXED));
    bench_clock_start(&st->clock, config->warmup_ns, config->duration_ns, config->msg_size,
                      st->who);
    bench_clock_bound(&st->clock, &st->latency, &st->lag);
}

/* --log-dir: waits (at most 10 s) until the global persistence frontier
 * passed everything this member delivered, so the last messages' lag is
 * sampled too; before shutdown, while every member still pushes its
 * frontier. Not part of the measured time. */
static void wait_persisted(const struct bench_config *config, struct member_state *st)
{
    uint64_t deadline = bench_now_ns() + 10000000000ull;
    while (config->log_dir != NULL && bench_lag_pending(&st->lag) > 0 &&
           bench_now_ns() < deadline) {
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
}

/* What this member did: the deliveries and time of the measured interval
 * (--duration), of the whole stream (--messages; a joiner: from its join
 * to its end), and the views it was in. */
static void measured(const struct bench_config *config, struct member_state *st, uint64_t start,
                     uint64_t end, struct bench_result *result)
{
    result->view_members_min = __atomic_load_n(&st->view_members_min, __ATOMIC_ACQUIRE);
    result->view_members_max = __atomic_load_n(&st->view_members_max, __ATOMIC_ACQUIRE);
    result->first_view = __atomic_load_n(&st->first_view, __ATOMIC_ACQUIRE);
    result->last_view = __atomic_load_n(&st->view_id, __ATOMIC_ACQUIRE);
    result->senders = st->num_senders;
    if (config->duration_ns > 0) {
        result->delivered = st->clock.measured_to - st->clock.measured_from;
        result->seconds = (double)(st->clock.measured_to_ns - st->clock.measured_from_ns) / 1e9;
        return;
    }
    result->delivered = __atomic_load_n(&st->delivered, __ATOMIC_ACQUIRE);
    uint64_t done = __atomic_load_n(&st->done_ns, __ATOMIC_ACQUIRE);
    if (config->join != NULL || done <= start)
        done = end; /* a joiner expects nothing: it ends when the stream does */
    result->seconds = (double)(done - start) / 1e9;
}

void bench_run_member(const struct bench_config *config, uint32_t self, uint32_t members,
                      struct bench_result *result)
{
    memset(result, 0, sizeof *result);
    result->member = (int)self;
    struct member_state st = {.config = config, .self = self, .first_view = UINT64_MAX};
    bool joiner = config->join != NULL;
    uint32_t num_senders = joiner ? 0 : bench_num_senders(config, members);
    st.num_senders = num_senders; /* a joiner's comes with the state */
    st.sends = calloc(config->active_subgroups, sizeof *st.sends);
    if (st.sends == NULL) {
        fail(result, "allocating the subgroup plan", SPINDLE_ENOMEM);
        return;
    }
    st.sender_rank = -1;
    st.stream_messages = config->messages;
    if (!joiner) /* a joiner receives only (the default layout) */
        st.expected = plan_subgroups(config, members, &st);
    result->expected = st.expected;
    st.view_mask = members >= 64 ? UINT64_MAX : (1ull << members) - 1;
    st.view_members_min = joiner ? UINT32_MAX : members;
    st.view_members_max = joiner ? 0 : members;
    if (joiner)
        st.self = self = UINT32_MAX;
    st.from_sender =
        calloc((size_t)config->active_subgroups * SPINDLE_MAX_MEMBERS + 1, sizeof *st.from_sender);
    int rc = bench_latency_init(&st.latency, config->active_subgroups,
                                config->duration_ns > 0 ? 0 : config->messages, st.max_window);
    if (rc == 0)
        rc = bench_lag_init(&st.lag, config->log_dir != NULL ? config->active_subgroups : 0);
    if (rc < 0 || st.from_sender == NULL) {
        fail(result, "allocating latency arrays", SPINDLE_ENOMEM);
        goto out;
    }
    if (open_trace(config, &st) < 0) {
        snprintf(result->error, sizeof result->error, "member %u: cannot open trace in %s", self,
                 config->trace_dir);
        goto out;
    }
    char joining_trace[4096] = "";
    if (joiner && config->trace_dir != NULL)
        member_path(config, &st, "trace", joining_trace, sizeof joining_trace);
    spindle_group_t *group = NULL;
    uint64_t asked = bench_now_ns();
    rc = create_group(config, self, members, &st, &group);
    if (rc < 0) {
        fail(result, "spindle_group_create", rc);
        goto out;
    }
    if (joiner) {
        /* Deliveries may already run: they read self. */
        self = (uint32_t)spindle_group_self(group);
        __atomic_store_n(&st.self, self, __ATOMIC_RELAXED);
        result->member = (int)self;
        uint64_t joined_view = __atomic_load_n(&st.first_view, __ATOMIC_ACQUIRE);
        printf("joined as member %u in view %llu, %.1f ms after asking\n", self,
               (unsigned long long)joined_view, (double)(bench_now_ns() - asked) / 1e6);
        fflush(stdout);
        /* The view upcall of its first view runs inside spindle_group_create:
         * without it the files could not name the incarnation. */
        if (joined_view == UINT64_MAX)
            fail(result, "no view reported by the time spindle_group_create returned",
                 SPINDLE_EPROTO);
        else if (joined_files(config, &st, joining_trace) < 0)
            fail(result, "renaming the trace or writing the pid file", SPINDLE_EIO);
    }
    if (st.restarted && !joiner) {
        printf("member %u restarted from its log in view %llu, %.1f ms after starting\n", self,
               (unsigned long long)__atomic_load_n(&st.first_view, __ATOMIC_ACQUIRE),
               (double)(bench_now_ns() - asked) / 1e6);
        fflush(stdout);
    }
    /* --dispatch: a thread of the bench's runs every upcall, until the
     * member shuts down or leaves. */
    pthread_t dispatcher;
    bool dispatching =
        config->dispatch && pthread_create(&dispatcher, NULL, dispatch_main, group) == 0;
    if (config->dispatch && !dispatching)
        fail(result, "starting the dispatching thread", SPINDLE_ENOMEM);
    /* A joiner comes in after the start: the others are past the barrier. */
    rc = st.restarted && !joiner ? await_full_view(config, group, &st, members) : 0;
    if (rc < 0)
        fprintf(stderr, "spindle-bench: member %u: the restarted group did not become whole\n",
                self);
    /* After the group's own threads are started: they keep the default
     * placement. */
    if (rc == 0 && !joiner)
        rc = pin_app_thread(config, self); /* its reason is on stderr */
    if (rc == 0)
        rc = joiner ? 0 : spindle_barrier(group, 60000);
    uint64_t start = bench_now_ns();
    start_clock(config, &st);
    if (rc == 0 && st.sender_rank >= 0)
        rc = send_all(config, group, &st);
    if (rc == 0)
        rc = wait_delivered(config, group, &st);
    uint64_t end = bench_now_ns();
    if (rc == 0)
        wait_persisted(config, &st);
    if (rc == 0 && __atomic_load_n(&st.duplicate, __ATOMIC_ACQUIRE))
        rc = SPINDLE_EPROTO;
    if (rc < 0) {
        fail(result,
             rc == SPINDLE_ETIMEDOUT ? "waiting for deliveries"
             : rc == SPINDLE_EPROTO  ? "a message was delivered twice or out of order"
                                     : "sending",
             rc);
        snprintf(result->error + strlen(result->error),
                 sizeof result->error - strlen(result->error), " delivered %llu of %llu",
                 (unsigned long long)__atomic_load_n(&st.delivered, __ATOMIC_ACQUIRE),
                 (unsigned long long)st.expected);
    } else {
        result->ok = 1;
        measured(config, &st, start, end, result);
    }
    if (result->ok && leave_due(config, &st)) {
        /* Leaving flushes this member's messages (a joiner has none) and
         * stops it: nothing is delivered to it afterwards. */
        rc = spindle_group_leave(group, 60000);
        if (rc < 0)
            fail(result, "spindle_group_leave", rc);
        else
            st.left = true;
    }
    if (result->ok && config->tolerate_failures && write_end(config, &st) < 0)
        fail(result, "writing the .end file", SPINDLE_EIO);
    /* A member that left has no shutdown barrier to meet. */
    int shut = st.left ? 0 : spindle_group_shutdown(group, 60000);
    if (dispatching)
        pthread_join(dispatcher, NULL); /* it returns once the queue is empty */
    if (shut < 0 && config->tolerate_failures) {
        /* Every message is in; a peer lost during the final barrier does
         * not undo that. */
        fprintf(stderr, "spindle-bench: member %u: shutdown: %s\n", self, spindle_errmsg());
        shut = 0;
    }
    collect(config, &st, group, result);
    if (result->ok && config->latency_out != NULL && write_latency(config, &st) < 0)
        fail(result, "writing the latency samples", SPINDLE_EIO);
    if (result->ok && shut < 0)
        fail(result, "spindle_group_shutdown", shut);
    spindle_group_destroy(group);
    if (result->ok && st.trace_failed)
        fail(result, "writing the trace", SPINDLE_EIO);
out:
    if (st.trace != NULL)
        fclose(st.trace);
    bench_latency_release(&st.latency);
    bench_lag_release(&st.lag);
    free(st.from_sender);
    free(st.sends);
}
