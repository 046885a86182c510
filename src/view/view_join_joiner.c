/*
 * Joining a running group: the joiner's side (protocol: view_join_leader.c).
 * The joiner asks any member, follows redirections to the leader, takes on
 * the id and view the offer gives it, opens its engine, table and control
 * channel, sends the leader its descriptor, receives its view and the
 * application state, and meets the members at the start of its first
 * view. Any failure on the way undoes the attempt; the joiner asks again
 * until its bootstrap timeout.
 *
 * Modelled in models/join.pml (process joiner: one step per function of
 * join_attempt, undo for join_undo).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* The join request this process sends. */
static void build_request(const struct view_membership *m, struct view_join_request *req,
                          const struct ctl_address *self,
                          const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups)
{
    memset(req, 0, sizeof *req);
    req->address = *self;
    req->identity = m->config.identity;
    req->flags = (m->config.tie_breaker ? VIEW_JOIN_TIE_BREAKER : 0) |
                 (m->log_ends != NULL ? VIEW_JOIN_CATCHUP : 0);
    /* Following a total restart: the id its log holds, or none. */
    if (m->restart != NULL) {
        req->flags |= VIEW_JOIN_RESTART;
        req->restart_id = m->restart->self;
    }
    req->num_subgroups = num_subgroups;
    for (uint32_t g = 0; g < num_subgroups; g++)
        req->subgroups[g] = (struct view_join_subgroup){
            subgroups[g].window_size, subgroups[g].max_payload, (uint32_t)subgroups[g].mode};
}

/* Asks contact once: 0 with an admission in offer, 1 with a redirection
 * (contact updated), or the refusal's error. */
static int ask_once(struct view_membership *m, const uint8_t *request, size_t length,
                    struct ctl_address *contact, uint64_t deadline, struct view_join_offer *offer)
{
    uint64_t now = sp_now_ns();
    int ms = now >= deadline ? 1 : (int)((deadline - now) / 1000000u) + 1;
    void *reply = NULL;
    size_t reply_length = 0;
    struct ctl_versions versions = view_ctl_versions();
    const char *name = m->group_name[0] != '\0' ? m->group_name : NULL;
    int rc = ctl_join_ask(name, &versions, m->config.keys, contact->host, contact->port, request,
                          length, &reply, &reply_length, ms);
    if (rc < 0)
        return sp_error(SPINDLE_EAGAIN, "%s", spindle_errmsg());
    rc = view_wire_decode_join_offer(reply, reply_length, offer);
    free(reply);
    if (rc < 0)
        return sp_error(SPINDLE_EPROTO, "%s:%u answered the join request with garbage: %s",
                        contact->host, contact->port, spindle_errmsg());
    if (offer->kind == VIEW_OFFER_REDIRECT) {
        *contact = offer->redirect;
        return 1;
    }
    if (offer->kind == VIEW_OFFER_REFUSE)
        return sp_error(offer->error, "%s:%u refused the join: %s", contact->host, contact->port,
                        offer->why);
    return 0;
}

static int ask_admission(struct view_membership *m, const struct spindle_subgroup_config *subgroups,
                         uint32_t num_subgroups, const struct ctl_address *self,
                         struct ctl_address *contact, uint64_t deadline,
                         struct view_join_offer *offer)
{
    struct view_join_request *req = malloc(sizeof *req);
    uint8_t *request = malloc(CTL_JOIN_REQUEST_MAX);
    if (req == NULL || request == NULL) {
        free(req);
        free(request);
        return sp_error(SPINDLE_ENOMEM, "no memory for a join request");
    }
    build_request(m, req, self, subgroups, num_subgroups);
    size_t length = view_wire_encode_join_request(req, request, CTL_JOIN_REQUEST_MAX);
    int rc = 1;
    for (int hops = 0; hops < 4 && rc == 1; hops++)
        rc = ask_once(m, request, length, contact, deadline, offer);
    if (rc == 1)
        rc = sp_error(SPINDLE_EAGAIN, "join requests were redirected too often (the leader moved)");
    if (rc == 0 && offer->num_subgroups != num_subgroups)
        rc = sp_error(SPINDLE_EPROTO, "%s:%u offered %u subgroups, this process has %u",
                      contact->host, contact->port, offer->num_subgroups, num_subgroups);
    free(req);
    free(request);
    return rc;
}

/* The joiner's subgroups must match the group's in everything but members. */
static int check_offer(const struct view_join_offer *offer,
                       const struct spindle_subgroup_config *subgroups)
{
    for (uint32_t g = 0; g < offer->num_subgroups; g++) {
        const struct smc_layout *l = &offer->layouts[g];
        if (l->window_size != subgroups[g].window_size ||
            l->max_payload != subgroups[g].max_payload || l->mode != subgroups[g].mode)
            return sp_error(SPINDLE_EINVAL,
                            "subgroup %u: window %u, max_payload %u, mode %d given, but the group "
                            "has window %u, max_payload %u, mode %d",
                            g, subgroups[g].window_size, subgroups[g].max_payload,
                            (int)subgroups[g].mode, l->window_size, l->max_payload, (int)l->mode);
    }
    return 0;
}

/* Collects the skips the leader's view announced (jv->num_skips > 0). */
static int await_skips(struct view_membership *m, uint32_t leader, const struct view_join_view *jv,
                       struct view_join_skips *skips, int timeout)
{
    size_t size = VIEW_WIRE_JOIN_SKIPS_SIZE(jv->num_skips);
    uint8_t *bytes = malloc(size);
    if (bytes == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u skip entries", jv->num_skips);
    int rc = ctl_collect_one(m->ctl, view_join_tag(jv->view_id, JOIN_SKIPS), leader, bytes, size,
                             timeout);
    if (rc < 0)
        rc = sp_error(SPINDLE_EAGAIN, "the skips did not arrive: %s", spindle_errmsg());
    else if (view_wire_decode_join_skips(bytes, size, skips) < 0)
        rc = sp_error(SPINDLE_EPROTO, "the leader sent malformed skips: %s", spindle_errmsg());
    else if (skips->view_id != jv->view_id || skips->num_skips != jv->num_skips)
        rc = sp_error(SPINDLE_EPROTO, "the leader sent %u skips of view %llu, not %u of %llu",
                      skips->num_skips, (unsigned long long)skips->view_id, jv->num_skips,
                      (unsigned long long)jv->view_id);
    free(bytes);
    return rc;
}

/* Waits for the leader's JOIN_VIEW (and the state and skips), or for the
 * leader to be gone. *state is malloc'ed (NULL when there is none). */
static int await_view(struct view_membership *m, uint32_t leader, uint64_t view,
                      struct view_join_view *jv, void **state, struct view_join_skips *skips)
{
    int timeout =
        m->config.bootstrap_timeout_ms + EXCHANGE_TIMEOUTS * 2 * m->config.failure_timeout_ms;
    uint8_t *bytes = malloc(VIEW_WIRE_JOIN_VIEW_SIZE);
    if (bytes == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's view");
    int rc = ctl_collect_one(m->ctl, view_join_tag(view, JOIN_VIEW), leader, bytes,
                             VIEW_WIRE_JOIN_VIEW_SIZE, timeout);
    if (rc < 0)
        rc = sp_error(SPINDLE_EAGAIN, "the leader did not complete the join: %s", spindle_errmsg());
    else if (view_wire_decode_join_view(bytes, VIEW_WIRE_JOIN_VIEW_SIZE, jv) < 0)
        rc = sp_error(SPINDLE_EPROTO, "the leader sent a malformed view: %s", spindle_errmsg());
    else if (jv->view_id != view)
        rc = sp_error(SPINDLE_EPROTO, "the leader sent view %llu, not %llu",
                      (unsigned long long)jv->view_id, (unsigned long long)view);
    else if (jv->error < 0)
        rc = sp_error(jv->error, "the join was dropped: %s", jv->why);
    else if (jv->num_rows != m->current->view.num_members)
        rc = sp_error(SPINDLE_EPROTO, "the leader sent %u descriptors for a view of %u",
                      jv->num_rows, m->current->view.num_members);
    free(bytes);
    skips->num_skips = 0;
    if (rc == 0 && jv->num_skips > 0)
        rc = await_skips(m, leader, jv, skips, timeout);
    if (rc < 0)
        return rc;
    if (m->log_ends != NULL && jv->state_length != VIEW_STATE_STREAMED)
        return sp_error(SPINDLE_EPROTO,
                        "the joiner restarts with its log, but the leader announced a state of "
                        "%llu bytes rather than a catch-up stream",
                        (unsigned long long)jv->state_length);
    if (jv->state_length == 0) {
        /* No state: a reader hears that it is complete and empty. */
        if (m->config.state_read != NULL) {
            rc = m->config.state_read(m->config.state_ctx, 0, NULL, 0, true);
            if (rc < 0)
                rc = sp_error(rc, "state_read refused the empty state (%s)", spindle_strerror(rc));
        }
        return rc;
    }
    size_t length = 0;
    rc = view_join_receive_state(m, leader, jv, state, &length, timeout);
    jv->state_length = length; /* what state_load gets */
    return rc;
}

/* Undoes a failed attempt so that the next one starts clean. */
static void join_undo(struct view_membership *m)
{
    if (m->engine_started) {
        sst_engine_stop(m->engine);
        m->engine_started = false;
    }
    view_log_follow(m, NULL); /* the log stays open across attempts */
    view_epoch_free(m->current);
    m->current = NULL;
    /* The log's writer may be waking it (view_log.c). */
    pthread_mutex_lock(&m->wake_lock);
    struct sst_engine *engine = m->engine;
    __atomic_store_n(&m->engine, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&m->wake_lock);
    if (engine != NULL)
        sst_engine_destroy(engine);
    ctl_close(m->ctl);
    m->ctl = NULL;
}

/* Takes on the identity and the view the offer gives this process. */
static int adopt_offer(struct view_membership *m, const struct view_join_offer *offer,
                       const struct ctl_address *self)
{
    const struct spindle_member_identity *mine = &offer->identities[offer->my_row];
    if (strcmp(mine->name, m->config.identity.name) != 0 ||
        mine->incarnation != m->config.identity.incarnation)
        return sp_error(SPINDLE_EPROTO,
                        "the offer names the joiner '%s' (incarnation %llu), not '%s' (%llu)",
                        mine->name, (unsigned long long)mine->incarnation, m->config.identity.name,
                        (unsigned long long)m->config.identity.incarnation);
    if (m->restart != NULL && offer->id != m->restart->self)
        return sp_error(SPINDLE_EPROTO,
                        "the leader offered member id %u, but this member restarts from a log "
                        "(%s) that holds member id %u",
                        offer->id, m->config.log_dir, m->restart->self);
    snprintf(m->group_name, sizeof m->group_name, "%s", offer->group_name);
    m->config.self = offer->id;
    m->config.num_initial = offer->num_initial;
    memset(m->addresses, 0, sizeof m->addresses);
    for (uint32_t r = 0; r < offer->num_rows; r++)
        m->addresses[offer->member_ids[r]] = offer->addresses[r];
    m->addresses[offer->id] = *self;
    /* The transport listens where the control channel does. */
    m->config.transport.host = m->addresses[offer->id].host;
    m->admission = offer->admission;
    struct view view;
    int rc = view_init_first(&view, offer->num_rows, offer->my_row, offer->layouts,
                             offer->num_subgroups);
    if (rc < 0)
        return rc;
    view.id = offer->view_id;
    memcpy(view.member_ids, offer->member_ids, sizeof view.member_ids);
    memcpy(view.identities, offer->identities, sizeof view.identities);
    return view_open_first(m, &view);
}

/* Opens this joiner's control channel to every member of its view. */
static int open_channel(struct view_membership *m)
{
    const struct view *view = &m->current->view;
    struct ctl_member members[SPINDLE_MAX_MEMBERS];
    memset(members, 0, sizeof members);
    for (uint32_t r = 0; r < view->num_members; r++) {
        uint32_t id = view->member_ids[r];
        members[id] = (struct ctl_member){
            .host = m->addresses[id].host, .id = id, .port = m->addresses[id].port};
    }
    struct ctl_versions versions = view_ctl_versions();
    /* A member that does not answer within two failure timeouts is taken
     * to have failed or hung (the others will remove it): rather than
     * wait out the whole bootstrap timeout on it, ask again. */
    int timeout_ms = m->config.bootstrap_timeout_ms;
    if (timeout_ms > 2 * m->config.failure_timeout_ms)
        timeout_ms = 2 * m->config.failure_timeout_ms;
    int rc = ctl_open_tcp_joiner(m->group_name, members, m->config.num_initial, m->config.self,
                                 m->admission, &versions, m->config.keys, timeout_ms, &m->ctl);
    /* A member that cannot be reached may have failed: ask again. */
    if (rc == SPINDLE_EUNREACH || rc == SPINDLE_ETIMEDOUT)
        rc = sp_error(SPINDLE_EAGAIN, "%s", spindle_errmsg());
    return rc;
}

/* Sends the leader this joiner's table descriptor. */
static int send_desc(struct view_membership *m, uint32_t leader)
{
    struct view_join_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.view_id = m->current->view.id;
    desc.id = m->config.self;
    desc.admission = m->admission;
    int rc = smc_group_export(m->current->smc, &desc.desc);
    uint8_t bytes[VIEW_WIRE_JOIN_DESC_SIZE];
    view_wire_encode_join_desc(&desc, bytes, sizeof bytes);
    if (rc == 0)
        rc = ctl_publish(m->ctl, view_join_tag(desc.view_id, JOIN_DESC), bytes, sizeof bytes,
                         1ull << leader);
    return rc;
}

/* Loads the state, connects and starts the table, meets the members that
 * did not fail meanwhile. Modelled in models/join.pml (steps START, IN;
 * docs/MODELS.md, "Found"). */
/* Reports the joiner's first view to its application. */
static void report_joined(struct view_membership *m)
{
    struct view_transition how;
    memset(&how, 0, sizeof how);
    how.joiner = m->config.self;
    view_report(m, &how, 0);
}

static int start_view(struct view_membership *m, const struct view_join_view *jv, void *state,
                      const struct view_join_skips *skips)
{
    const struct view *view = &m->current->view;
    int rc = 0;
    /* The resends of what the state holds are taken, not delivered. */
    for (uint32_t i = 0; i < skips->num_skips && rc == 0; i++) {
        const struct view_join_skip *skip = &skips->skips[i];
        if (smc_group_skip(m->current->smc, skip->subgroup, skip->sender, skip->count) < 0)
            rc = sp_error(SPINDLE_EPROTO, "the leader's skip of subgroup %u sender %u: %s",
                          skip->subgroup, skip->sender, spindle_errmsg());
    }
    /* The view is durable in the log before anything is delivered in it,
     * after what a restart's catch-up put there (of earlier views). */
    if (rc == 0)
        rc = view_log_view(m, m->current, NULL, 0);
    if (rc == 0 && m->log_ends != NULL)
        m->log_ends->next_view = view->id + 1;
    if (rc == 0 && m->log_ends == NULL && m->config.state_load != NULL) {
        rc = m->config.state_load(m->config.state_ctx, state, (size_t)jv->state_length);
        if (rc < 0)
            rc = sp_error(rc, "state_load refused the state of view %llu (%s)",
                          (unsigned long long)view->id, spindle_strerror(rc));
    }
    /* A member that fails now (its table cannot be connected, or the
     * engine reports it) is a failure in this view like any other: the
     * joiner meets the others without it and its membership thread, once
     * started, takes part in the change that removes it. Waiting for it
     * would stop the joiner and leave the others without their majority
     * (found by models/join.pml). */
    uint64_t failed = 0;
    if (rc == 0)
        rc = view_epoch_connect(m, m->current, jv->descs, &failed);
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if ((failed >> rank) & 1)
            view_suspect(m, rank);
    if (rc == 0 && m->config.report_at_install)
        report_joined(m); /* queued before anything is delivered in it */
    if (rc == 0)
        rc = smc_group_start(m->current->smc);
    if (rc == 0)
        view_log_follow(m, m->current->smc);
    if (rc == 0)
        rc = sst_engine_start(m->engine);
    if (rc == 0)
        m->engine_started = true;
    /* The members resend and send only once the joiner is there. */
    uint64_t members = view_member_mask(view) & ~(1ull << m->config.self);
    uint32_t tag = view_change_tag(view->id, STEP_READY);
    if (rc == 0)
        rc = view_publish_ready(m, view->id, tag, members);
    if (rc == 0)
        rc = view_gather_survivors(m, members, view->id, tag);
    return rc;
}

static int join_attempt(struct view_membership *m, const struct spindle_subgroup_config *subgroups,
                        uint32_t num_subgroups, const struct ctl_address *self,
                        const struct ctl_address *contact, uint64_t deadline)
{
    struct view_join_offer *offer = calloc(1, sizeof *offer);
    struct smc_layout *layouts = calloc(VIEW_JOIN_MAX_SUBGROUPS, sizeof *layouts);
    if (offer == NULL || layouts == NULL) {
        free(offer);
        free(layouts);
        return sp_error(SPINDLE_ENOMEM, "no memory for a join offer");
    }
    offer->layouts = layouts;
    struct ctl_address where = *contact;
    int rc = ask_admission(m, subgroups, num_subgroups, self, &where, deadline, offer);
    uint64_t view = offer->view_id;
    uint32_t leader = offer->member_ids[0];
    if (rc == 0)
        rc = check_offer(offer, subgroups);
    if (rc == 0)
        rc = adopt_offer(m, offer, self);
    free(layouts);
    free(offer);
    if (rc == 0)
        rc = open_channel(m);
    if (rc == 0)
        rc = send_desc(m, leader);
    if (rc == 0 && m->log_ends != NULL)
        rc = view_log_send_ends(m, leader, view);
    struct view_join_view *jv = calloc(1, sizeof *jv);
    struct view_join_skips *skips = calloc(1, sizeof *skips);
    void *state = NULL;
    if (rc == 0 && (jv == NULL || skips == NULL))
        rc = sp_error(SPINDLE_ENOMEM, "no memory for the joiner's view");
    if (rc == 0)
        rc = await_view(m, leader, view, jv, &state, skips);
    if (rc == 0)
        rc = start_view(m, jv, state, skips);
    free(state);
    free(skips);
    free(jv);
    if (rc < 0)
        return rc;
    __atomic_store_n(&m->view_id, view, __ATOMIC_RELEASE);
    __atomic_store_n(&m->num_members, m->current->view.num_members, __ATOMIC_RELEASE);
    m->detected_ns = 0;
    if (!m->config.report_at_install)
        report_joined(m);
    return 0;
}

int view_join(struct view_membership *m, const struct ctl_address *self,
              const struct ctl_address *contact, const struct spindle_subgroup_config *subgroups,
              uint32_t num_subgroups)
{
    if (!m->config.tolerate_failures)
        return sp_error(SPINDLE_EINVAL, "joining a group (options.join) needs tolerate_failures");
    if (num_subgroups == 0 || num_subgroups > VIEW_JOIN_MAX_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL, "a joiner brings 1..%u subgroups, not %u",
                        VIEW_JOIN_MAX_SUBGROUPS, num_subgroups);
    for (uint32_t g = 0; g < num_subgroups; g++)
        if (subgroups[g].window_size == 0 || subgroups[g].max_payload == 0)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: window_size and max_payload must be > 0",
                            g);
    m->joinable = true;
    int opened = view_log_restart_open(m);
    if (opened < 0)
        return opened;
    uint64_t deadline = sp_now_ns() + (uint64_t)m->config.bootstrap_timeout_ms * 1000000ull;
    /* Why the last attempt that ended before the deadline failed: the
     * attempt the deadline cuts short only says that time ran out, while
     * the reason (a contact answering garbage, a refusal) is this one. */
    char earlier[256] = "";
    for (;;) {
        int rc = join_attempt(m, subgroups, num_subgroups, self, contact, deadline);
        if (rc == 0)
            return view_thread_start(m);
        if (rc != SPINDLE_EAGAIN)
            return rc;
        if (sp_now_ns() >= deadline) {
            const char *last = spindle_errmsg();
            if (earlier[0] == '\0' || strcmp(earlier, last) == 0)
                return sp_error(SPINDLE_ETIMEDOUT, "could not join within %d ms: %s",
                                m->config.bootstrap_timeout_ms, last);
            return sp_error(SPINDLE_ETIMEDOUT, "could not join within %d ms: %s (before that: %s)",
                            m->config.bootstrap_timeout_ms, last, earlier);
        }
        snprintf(earlier, sizeof earlier, "%s", spindle_errmsg());
        sp_log(SP_LOG_INFO, "join", "join attempt failed (%s); asking again", spindle_errmsg());
        join_undo(m);
        /* Back off before asking again: the leader is busy or moved. */
        struct timespec pause = {0, 50 * 1000000L};
        nanosleep(&pause, NULL);
    }
}
