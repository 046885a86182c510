/*
 * Participants: one libspindle group per process's membership, one
 * subgroup per topic (subgroup index = topic number), placed by the
 * layout rule of dds_layout.c; the delivery, view and replay upcalls
 * that feed histories and readers (a volatile topic's history for a
 * joiner: dds_history.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dds_client_server.h"
#include "dds_impl.h"

void dds_deliver_one(spindle_dds_participant_t *p, struct dds_topic *topic, const uint8_t *payload,
                     size_t size, bool from_history)
{
    struct dds_client_server *clients = __atomic_load_n(&p->clients, __ATOMIC_ACQUIRE);
    struct spindle_dds_sample_info info;
    if (dds_sample_header_decode(payload, size, &info) != 0 || info.topic != topic->config->id) {
        topic->bad_samples++; /* a peer's bad bytes are skipped, never trusted */
        return;
    }
    info.from_history = from_history;
    if (topic->keeps_history)
        (void)dds_fifo_push(&topic->history, payload, SPINDLE_DDS_SAMPLE_HEADER + info.length,
                            from_history);
    if (topic->reader != NULL)
        dds_reader_deliver(topic->reader, &info, payload);
    if (clients != NULL)
        dds_client_server_relay(clients, &info, payload);
}

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    spindle_dds_participant_t *p = ctx;
    struct dds_topic *locked = NULL;
    for (size_t i = 0; i < count; i++) {
        const struct spindle_message *m = &messages[i];
        if (m->subgroup >= p->config->num_topics)
            continue;
        struct dds_topic *topic = &p->topics[m->subgroup];
        if (topic != locked) { /* one lock per run of one topic's samples */
            if (locked != NULL)
                pthread_mutex_unlock(&locked->lock);
            pthread_mutex_lock(&topic->lock);
            locked = topic;
        }
        if (dds_history_on_deliver(topic, m)) /* false: kept while the topic loads */
            dds_deliver_one(p, topic, m->data, m->length, false);
    }
    if (locked != NULL)
        pthread_mutex_unlock(&locked->lock);
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    spindle_dds_participant_t *p = ctx;
    __atomic_store_n(&p->view_size, view->num_members, __ATOMIC_RELEASE);
    dds_history_on_view(p, view);
}

static void on_p2p(void *ctx, const struct spindle_p2p_message *message)
{
    dds_history_on_query(ctx, message);
}

static int on_layout(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                     struct spindle_subgroup_layout *subgroups)
{
    const spindle_dds_participant_t *p = ctx;
    const char *names[SPINDLE_MAX_MEMBERS];
    if (num_subgroups != p->config->num_topics || view->num_members > SPINDLE_MAX_MEMBERS)
        return SPINDLE_EINVAL;
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        names[rank] = view->identities[rank].name;
    return dds_layout_topics(p->config, names, view->num_members, subgroups);
}

/* A restart with its log (docs/LOGS.md): logged samples refill the
 * history their readers will get. */
static int on_replay(void *ctx, const struct spindle_replayed *item)
{
    spindle_dds_participant_t *p = ctx;
    if (item->kind != SPINDLE_REPLAY_MESSAGE || item->subgroup >= p->config->num_topics)
        return 0;
    struct dds_topic *topic = &p->topics[item->subgroup];
    pthread_mutex_lock(&topic->lock);
    dds_deliver_one(p, topic, item->data, item->length, true);
    pthread_mutex_unlock(&topic->lock);
    return 0;
}

struct create_plan {
    struct spindle_subgroup_config subgroups[SPINDLE_DDS_MAX_TOPICS];
    struct spindle_subgroup_layout layouts[SPINDLE_DDS_MAX_TOPICS];
    uint32_t logged[SPINDLE_DDS_MAX_TOPICS];
    uint32_t num_logged;
    char bootstrap[SPINDLE_DDS_MAX_PARTICIPANTS * (SPINDLE_DDS_NAME_MAX + 8)];
    char own_address[SPINDLE_DDS_NAME_MAX + 8];
    uint32_t founder_index, num_founders;
};

static int plan_group(const struct spindle_dds_config *c,
                      const struct spindle_dds_participant_config *self, struct create_plan *plan)
{
    const char *names[SPINDLE_MAX_MEMBERS];
    size_t at = 0;
    plan->num_founders = 0;
    for (uint32_t i = 0; i < c->num_participants; i++) {
        const struct spindle_dds_participant_config *q = &c->participants[i];
        if (!q->founder)
            continue;
        if (q == self)
            plan->founder_index = plan->num_founders;
        names[plan->num_founders++] = q->name;
        at += (size_t)snprintf(plan->bootstrap + at, sizeof plan->bootstrap - at, "%s%s:%u",
                               at > 0 ? "," : "", q->host, q->port);
    }
    snprintf(plan->own_address, sizeof plan->own_address, "%s:%u", self->host, self->port);
    int rc = dds_layout_topics(c, names, plan->num_founders, plan->layouts);
    if (rc < 0)
        return rc;
    plan->num_logged = 0;
    for (uint32_t t = 0; t < c->num_topics; t++) {
        const struct spindle_dds_topic_config *topic = &c->topics[t];
        plan->subgroups[t] = (struct spindle_subgroup_config){
            .members = plan->layouts[t].members,
            .num_members = plan->layouts[t].num_members,
            .senders = plan->layouts[t].senders,
            .num_senders = plan->layouts[t].num_senders,
            .window_size = topic->window,
            .max_payload = topic->max_sample_size + SPINDLE_DDS_SAMPLE_HEADER,
            .mode =
                topic->qos == SPINDLE_DDS_UNORDERED ? SPINDLE_MODE_UNORDERED : SPINDLE_MODE_ATOMIC,
        };
        if (topic->qos == SPINDLE_DDS_LOGGED)
            plan->logged[plan->num_logged++] = t;
    }
    return 0;
}

static int init_topics(spindle_dds_participant_t *p)
{
    const struct spindle_dds_config *c = p->config;
    for (uint32_t t = 0; t < c->num_topics; t++) {
        struct dds_topic *topic = &p->topics[t];
        topic->config = &c->topics[t];
        pthread_mutex_init(&topic->lock, NULL);
        topic->keeps_history =
            topic->config->qos == SPINDLE_DDS_VOLATILE || topic->config->qos == SPINDLE_DDS_LOGGED;
        int rc =
            dds_fifo_init(&topic->history, topic->keeps_history ? topic->config->history_depth : 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static void free_topics(spindle_dds_participant_t *p)
{
    for (uint32_t t = 0; t < p->config->num_topics; t++) {
        if (p->topics[t].config == NULL)
            continue;
        dds_history_free(&p->topics[t]);
        dds_fifo_free(&p->topics[t].history);
        pthread_mutex_destroy(&p->topics[t].lock);
    }
}

/* The fetcher's lock and condition (it waits on CLOCK_MONOTONIC). */
static void init_fetcher(spindle_dds_participant_t *p)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&p->fetch_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&p->fetch_lock, NULL);
}

static void free_fetcher(spindle_dds_participant_t *p)
{
    pthread_cond_destroy(&p->fetch_cond);
    pthread_mutex_destroy(&p->fetch_lock);
}

static void fill_options(spindle_dds_participant_t *p, const struct create_plan *plan,
                         const struct spindle_dds_participant_options *o,
                         struct spindle_group_options *g)
{
    const struct spindle_dds_config *c = p->config;
    spindle_group_options_init(g);
    g->group_name = c->group_name;
    g->member_name = p->self->name;
    g->failure_timeout_ms = c->failure_timeout_ms;
    g->bootstrap_timeout_ms = o->bootstrap_timeout_ms > 0 ? o->bootstrap_timeout_ms : 30000;
    g->tolerate_failures = true;
    g->tie_breaker = true;
    g->batching = !o->baseline;
    g->null_sends = !o->baseline;
    g->early_unlock = !o->baseline;
    g->deliver = on_deliver;
    g->deliver_ctx = p;
    g->view_changed = on_view;
    g->view_ctx = p;
    g->layout = on_layout;
    g->layout_ctx = p;
    /* No state transfer: a volatile topic's history comes from its own
     * members (dds_history.c), a logged topic's from the log. */
    g->p2p_deliver = on_p2p;
    g->p2p_ctx = p;
    g->replay = on_replay;
    g->replay_ctx = p;
    g->admin_dir = "off";
    if (c->key_file[0] != '\0')
        g->key_file = c->key_file;
    if (plan->num_logged > 0) {
        if (o->log_dir != NULL)
            snprintf(p->log_dir, sizeof p->log_dir, "%s", o->log_dir);
        else { /* the root may be new; libspindle creates the member's own */
            if (mkdir(c->log_dir, 0700) != 0 && errno != EEXIST)
                dds_error_record("log_dir %s: %s", c->log_dir, strerror(errno));
            snprintf(p->log_dir, sizeof p->log_dir, "%s/%s", c->log_dir, p->self->name);
        }
        g->log_dir = p->log_dir;
        g->logged_subgroups = plan->logged;
        g->num_logged_subgroups = plan->num_logged;
    }
}

/* A joiner asks each running member it may know of in turn. */
static int join_group(spindle_dds_participant_t *p, struct create_plan *plan,
                      const struct spindle_dds_participant_options *o,
                      struct spindle_group_options *g)
{
    char address[SPINDLE_DDS_NAME_MAX + 8];
    g->bootstrap = plan->own_address;
    g->bootstrap_kind = SPINDLE_BOOTSTRAP_TCP;
    if (o->join != NULL) {
        g->join = o->join;
        return spindle_group_create(g, plan->subgroups, p->config->num_topics, &p->group);
    }
    int rc = SPINDLE_EINVAL;
    bool tried = false;
    for (uint32_t i = 0; i < p->config->num_participants; i++) {
        const struct spindle_dds_participant_config *q = &p->config->participants[i];
        if (q == p->self)
            continue;
        snprintf(address, sizeof address, "%s:%u", q->host, q->port);
        g->join = address;
        tried = true;
        rc = spindle_group_create(g, plan->subgroups, p->config->num_topics, &p->group);
        if (rc == 0)
            return 0;
        rc = dds_error(rc, "joining through %s (participant %s): %s", address, q->name,
                       spindle_errmsg());
    }
    if (!tried)
        dds_error_record("participant %s: no other participant to join through", p->self->name);
    return rc;
}

/* Joins (or founds) the group: the participant's membership begins. */
static int enable(spindle_dds_participant_t *p)
{
    const struct spindle_dds_config *config = p->config;
    struct create_plan *plan = calloc(1, sizeof *plan);
    if (plan == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for participant %s", p->self->name);
    int rc = plan_group(config, p->self, plan);
    if (rc == 0) {
        struct spindle_group_options g;
        fill_options(p, plan, &p->options, &g);
        if (p->self->founder) {
            g.self = plan->founder_index;
            g.num_members = plan->num_founders;
            g.bootstrap = plan->bootstrap;
            g.bootstrap_kind = SPINDLE_BOOTSTRAP_TCP;
            __atomic_store_n(&p->view_size, plan->num_founders, __ATOMIC_RELEASE);
            rc = spindle_group_create(&g, plan->subgroups, config->num_topics, &p->group);
            if (rc < 0)
                rc = dds_error(rc, "participant %s: %s", p->self->name, spindle_errmsg());
        } else {
            dds_history_mark_joiner(p); /* before its first delivery */
            rc = join_group(p, plan, &p->options, &g);
        }
    }
    free(plan);
    if (rc < 0)
        return rc;
    rc = dds_history_start(p);
    if (rc == 0 && p->self->client_port != 0) {
        struct dds_client_server *clients = NULL;
        rc = dds_client_server_start(p, &clients);
        __atomic_store_n(&p->clients, clients, __ATOMIC_RELEASE);
    }
    if (rc < 0) { /* a participant without its fetcher or listener is not what was configured */
        dds_history_stop(p);
        (void)spindle_group_leave(p->group, 10000);
        spindle_group_destroy(p->group);
        p->group = NULL;
        __atomic_store_n(&p->group_live, NULL, __ATOMIC_RELEASE);
    }
    return rc;
}

/* No relay runs once every topic's lock has been taken after the
 * listener was unhooked (relays run under the topic's lock). */
static void stop_clients(spindle_dds_participant_t *p)
{
    struct dds_client_server *clients = __atomic_exchange_n(&p->clients, NULL, __ATOMIC_ACQ_REL);
    if (clients == NULL)
        return;
    for (uint32_t t = 0; t < p->config->num_topics; t++) {
        pthread_mutex_lock(&p->topics[t].lock);
        pthread_mutex_unlock(&p->topics[t].lock);
    }
    dds_client_server_stop(clients);
}

int spindle_dds_participant_create(const struct spindle_dds_config *config, const char *name,
                                   const struct spindle_dds_participant_options *options,
                                   spindle_dds_participant_t **out)
{
    const struct spindle_dds_participant_options none = {0};
    const struct spindle_dds_participant_config *self =
        spindle_dds_config_participant(config, name);
    if (config == NULL || out == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL configuration or out");
    if (self == NULL)
        return dds_error(SPINDLE_EINVAL, "participant \"%s\" is not in the configuration",
                         name != NULL ? name : "(null)");
    spindle_dds_participant_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for participant %s", name);
    p->config = config;
    p->self = self;
    p->options = options != NULL ? *options : none;
    init_fetcher(p);
    int rc = init_topics(p);
    if (rc == 0 && !p->options.disabled)
        rc = enable(p);
    if (rc < 0) {
        free_topics(p);
        free_fetcher(p);
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int spindle_dds_participant_enable(spindle_dds_participant_t *participant)
{
    if (participant == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL participant");
    if (participant->group != NULL)
        return dds_error(SPINDLE_EINVAL, "participant %s is enabled already",
                         participant->self->name);
    return enable(participant);
}

/* The group of an enabled participant, or NULL with the error recorded. */
spindle_group_t *dds_participant_group(spindle_dds_participant_t *participant)
{
    if (participant->group == NULL)
        dds_error_record("participant %s is not enabled yet (spindle_dds_participant_enable)",
                         participant->self->name);
    return participant->group;
}

int spindle_dds_participant_shutdown(spindle_dds_participant_t *participant, int timeout_ms)
{
    if (participant == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL participant");
    if (dds_participant_group(participant) == NULL)
        return SPINDLE_EINVAL;
    int rc = spindle_group_shutdown(participant->group, timeout_ms);
    return rc < 0 ? dds_error(rc, "shutdown: %s", spindle_errmsg()) : 0;
}

void spindle_dds_participant_destroy(spindle_dds_participant_t *participant)
{
    if (participant == NULL)
        return;
    stop_clients(participant);
    dds_history_stop(participant); /* it asks through the group */
    if (participant->group != NULL && spindle_group_status(participant->group) == 0)
        (void)spindle_group_leave(participant->group, 10000); /* others go on */
    spindle_group_destroy(participant->group);
    for (uint32_t t = 0; t < participant->config->num_topics; t++) {
        spindle_dds_reader_destroy(participant->topics[t].reader);
        spindle_dds_writer_destroy(participant->topics[t].writer);
    }
    free_topics(participant);
    free_fetcher(participant);
    free(participant);
}

uint32_t spindle_dds_participant_id(const spindle_dds_participant_t *participant)
{
    return participant->self->id;
}

spindle_group_t *spindle_dds_participant_group(spindle_dds_participant_t *participant)
{
    return participant->group;
}

uint32_t spindle_dds_participant_view_size(spindle_dds_participant_t *participant)
{
    return __atomic_load_n(&participant->view_size, __ATOMIC_ACQUIRE);
}

int spindle_dds_participant_client_stats(spindle_dds_participant_t *participant,
                                         struct spindle_dds_client_stats *stats)
{
    if (participant == NULL || stats == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL participant or stats");
    struct dds_client_server *clients = __atomic_load_n(&participant->clients, __ATOMIC_ACQUIRE);
    if (clients == NULL)
        return dds_error(SPINDLE_EINVAL, "participant %s has no client listener (client_port)",
                         participant->self->name);
    dds_client_server_stats(clients, stats);
    return 0;
}
