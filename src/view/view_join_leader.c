/*
 * Joining a running group (tolerate_failures, TCP bootstrap): the members'
 * side. The joiner's side is in view_join_joiner.c.
 *
 * Protocol, for a joiner J entering view v+1 of a group in view v:
 *  1. J sends a join request (its control address, its subgroups' shapes)
 *     to any member. A member that is not the leader (rank 0 of its view)
 *     answers with the leader's address; J asks there.
 *  2. The leader, on its membership thread while no view change runs,
 *     gives J the lowest member id that no member of v holds (in a group
 *     restarted from its logs, the id J's log holds: view_restart_id), an admission
 *     number and an offer: the group name, v+1, the members of v+1 (those
 *     of v, then J), their control addresses and the subgroup layouts of
 *     v+1. Admissions grow over the group's life (next_admission), so when
 *     an id passes from a member that is gone to J, J's connections replace
 *     the earlier holder's at every member (control/ctl_tcp_join.c), and
 *     nothing a stale holder still sends is taken for J's.
 *  3. J opens its engine and its table of v+1, connects its control channel
 *     to every member (as a new slot) and sends the leader its table
 *     descriptor (JOIN_DESC).
 *  4. The leader announces J (id, address, descriptor) to every member
 *     (JOIN_ANNOUNCE) and all of them run a view change that adds J as the
 *     last rank: the usual wedge, exchange, commit and trim among the
 *     members of v (J takes no part: it received nothing in v).
 *  5. After delivering the trim, the leader saves the application state
 *     (state_save) and sends J the descriptors of every rank of v+1 and the
 *     state (JOIN_VIEW, JOIN_STATE). J loads the state (state_load),
 *     connects its table, starts it and meets the others at the start of
 *     v+1; only then do senders resend and send, so J's first delivery is
 *     the first message of v+1 and its state is the state as of v+1.
 *
 * A failure during the join drops the joiner from that change (its table
 * was made for the failure-free ranks); the leader tells it so and J starts
 * over, as it does while another join is pending, until its bootstrap
 * timeout. If the leader fails during the join, J sees its control
 * connection break and starts over with another member.
 *
 * Every message goes through the wire codec (view/view_wire.h); whatever a
 * joiner sends is decoded strictly before it is looked at.
 *
 * Modelled in models/join.pml (process group: admit, await_desc, the
 * announcement, the change with or without the joiner, meet; process
 * joiner: ask, open_channel, send_desc, await_view, start_view; docs/MODELS.md
 * maps each to the code): change these rules there too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "log/log_append.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

static view_offer_hook_fn offer_hook;

/* Used by tests only (tests/view/test_view_join.c). */
// cppcheck-suppress unusedFunction
void view_test_offer(view_offer_hook_fn fn)
{
    offer_hook = fn;
}

/* Encodes an offer and answers the pending request with it. */
static int answer(struct view_membership *m, const struct view_join_offer *offer)
{
    struct view_join_offer *lie = NULL;
    if (offer_hook != NULL && offer->kind == VIEW_OFFER_ADMIT) {
        lie = malloc(sizeof *lie);
        if (lie == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for a join offer");
        *lie = *offer;
        offer_hook(lie);
        offer = lie;
    }
    size_t size = view_wire_encode_join_offer(offer, NULL, 0);
    uint8_t *bytes = malloc(size);
    if (bytes == NULL) {
        free(lie);
        return sp_error(SPINDLE_ENOMEM, "no memory for a join offer of %zu bytes", size);
    }
    view_wire_encode_join_offer(offer, bytes, size);
    free(lie);
    int rc = ctl_join_answer(m->ctl, bytes, size);
    free(bytes);
    return rc;
}

static void refuse(struct view_membership *m, int error, const char *why)
{
    struct view_join_offer offer;
    memset(&offer, 0, sizeof offer);
    offer.kind = VIEW_OFFER_REFUSE;
    offer.error = error;
    snprintf(offer.why, sizeof offer.why, "%s", why);
    sp_log(error == SPINDLE_EAGAIN ? SP_LOG_INFO : SP_LOG_WARN, "join",
           "member %u refused a join request: %s", m->config.self, why);
    (void)answer(m, &offer);
}

/* Builds and sends the leader's offer for joiner id. */
static int offer_admission(struct view_membership *m, uint32_t id, uint64_t admission,
                           const struct view_join_request *req)
{
    const struct view *current = &m->current->view;
    struct view next;
    struct view_transition how;
    int rc = view_next(current, 0, id, &next, &how);
    if (rc == 0)
        next.identities[next.num_members - 1] = req->identity;
    if (rc == 0)
        rc = view_next_layouts(current, &how, m->config.layout, m->config.layout_ctx, &next);
    if (rc < 0) {
        refuse(m, rc, spindle_errmsg());
        view_clear(&next);
        return rc;
    }
    struct view_join_offer *offer = calloc(1, sizeof *offer);
    if (offer == NULL) {
        view_clear(&next);
        return sp_error(SPINDLE_ENOMEM, "no memory for a join offer");
    }
    offer->kind = VIEW_OFFER_ADMIT;
    snprintf(offer->group_name, sizeof offer->group_name, "%s", m->group_name);
    offer->id = id;
    offer->admission = admission;
    offer->num_initial = m->config.num_initial;
    offer->num_rows = next.num_members;
    offer->my_row = next.num_members - 1;
    offer->num_subgroups = next.num_subgroups;
    offer->view_id = next.id;
    for (uint32_t rank = 0; rank < current->num_members; rank++) {
        offer->member_ids[rank] = current->member_ids[rank];
        offer->addresses[rank] = m->addresses[current->member_ids[rank]];
    }
    memcpy(offer->identities, next.identities, sizeof offer->identities);
    offer->member_ids[offer->my_row] = id;
    offer->addresses[offer->my_row] = req->address;
    offer->layouts = next.layouts;
    rc = answer(m, offer);
    free(offer);
    view_clear(&next);
    return rc;
}

/* Waits for the joiner's table descriptor (it first connects to every
 * member), giving up when a failure needs a view change. */
static int await_desc(struct view_membership *m, uint32_t id, uint64_t view, uint64_t admission,
                      struct view_join_desc *desc)
{
    /* Connecting to every member takes the joiner a few polls of theirs;
     * a joiner silent for longer than this is taken to be gone. */
    int wait_ms = 2 * m->config.failure_timeout_ms;
    uint64_t deadline = sp_now_ns() + (uint64_t)wait_ms * 1000000ull;
    uint8_t bytes[VIEW_WIRE_JOIN_DESC_SIZE];
    for (;;) {
        int rc =
            ctl_collect_one(m->ctl, view_join_tag(view, JOIN_DESC), id, bytes, sizeof bytes, 20);
        if (rc == 0) {
            if (view_wire_decode_join_desc(bytes, sizeof bytes, desc) < 0)
                return sp_error(SPINDLE_EPROTO, "joiner %u sent a malformed descriptor: %s", id,
                                spindle_errmsg());
            if (desc->view_id != view || desc->id != id)
                return sp_error(SPINDLE_EPROTO, "joiner %u sent a descriptor for view %llu as %u",
                                id, (unsigned long long)desc->view_id, desc->id);
            /* An earlier holder of the id (a joiner dropped before, then
             * resumed) is not this joiner: wait for this one to replace it. */
            if (desc->admission == admission)
                return 0;
            sp_log(SP_LOG_WARN, "join",
                   "ignoring a descriptor of admission %llu for joiner %u (admission %llu)",
                   (unsigned long long)desc->admission, id, (unsigned long long)admission);
            rc = SPINDLE_ETIMEDOUT;
        }
        if (rc != SPINDLE_ETIMEDOUT)
            return rc;
        if (!view_quiet(m))
            return sp_error(SPINDLE_EAGAIN, "the group began a view change or is shutting down");
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT, "joiner %u did not connect within %d ms", id,
                            wait_ms);
    }
}

static void set_joiner(struct view_membership *m, uint32_t id, uint64_t view,
                       const struct ctl_address *address,
                       const struct spindle_member_identity *identity,
                       const struct sst_member_desc *desc, bool catchup)
{
    ctl_add_member(m->ctl, id, address->host, address->port);
    pthread_mutex_lock(&m->lock);
    m->addresses[id] = *address;
    m->joiner.active = true;
    m->joiner.id = id;
    m->joiner.view_id = view;
    m->joiner.address = *address;
    m->joiner.identity = *identity;
    m->joiner.desc = *desc;
    m->joiner.catchup = catchup;
    pthread_mutex_unlock(&m->lock);
}

/* Tells joiner id that its join into view failed (leader only). */
static void send_drop(struct view_membership *m, uint32_t id, uint64_t view, int error,
                      const char *why)
{
    struct view_join_view *drop = calloc(1, sizeof *drop);
    if (drop == NULL)
        return;
    drop->view_id = view;
    drop->error = error;
    snprintf(drop->why, sizeof drop->why, "%s", why);
    uint8_t *bytes = malloc(VIEW_WIRE_JOIN_VIEW_SIZE);
    if (bytes != NULL) {
        view_wire_encode_join_view(drop, bytes, VIEW_WIRE_JOIN_VIEW_SIZE);
        (void)ctl_publish(m->ctl, view_join_tag(view, JOIN_VIEW), bytes, VIEW_WIRE_JOIN_VIEW_SIZE,
                          1ull << id);
    }
    free(bytes);
    free(drop);
}

/* Bits of an admission number that count the attempts into one view. */
#define ADMISSION_ATTEMPT_BITS 16

/*
 * The admission number of a join into view: view << 16 plus the attempts
 * this leader made into it before, so admissions only grow over the
 * group's life (a new leader admits into a later view than its
 * predecessor could). 0, or SPINDLE_EAGAIN when 2^16 attempts into one
 * view were dropped.
 */
static int next_admission(struct view_membership *m, uint64_t view, uint64_t *out)
{
    uint64_t first = view << ADMISSION_ATTEMPT_BITS;
    pthread_mutex_lock(&m->lock);
    uint64_t admission = m->last_admission >= first ? m->last_admission + 1 : first;
    bool spent = (admission >> ADMISSION_ATTEMPT_BITS) != view;
    if (!spent)
        m->last_admission = admission;
    pthread_mutex_unlock(&m->lock);
    if (spent)
        return sp_error(SPINDLE_EAGAIN, "too many joins into view %llu were dropped",
                        (unsigned long long)view);
    *out = admission;
    return 0;
}

/* The leader admits the joiner behind a valid request. Modelled in
 * models/join.pml (the joiner's ask step, the group's await_desc steps). */
static bool admit(struct view_membership *m, const struct view_join_request *req)
{
    uint64_t view = m->current->view.id + 1;
    if (m->current->view.num_members >= SST_MAX_ROWS) {
        char why[VIEW_WHY_MAX];
        snprintf(why, sizeof why, "the view is full (%u members)", m->current->view.num_members);
        refuse(m, SPINDLE_EINVAL, why);
        return false;
    }
    uint32_t id = 0;
    int picked = view_restart_id(m->restart, &m->current->view, req, &id);
    if (picked < 0) {
        char why[VIEW_WHY_MAX];
        snprintf(why, sizeof why, "%s", spindle_errmsg());
        sp_log(SP_LOG_WARN, "join", "refusing %s at %s:%u: %s", req->identity.name,
               req->address.host, req->address.port, why);
        refuse(m, picked, why);
        return false;
    }
    uint64_t admission = 0;
    if (next_admission(m, view, &admission) < 0) {
        refuse(m, SPINDLE_EAGAIN, spindle_errmsg());
        return false;
    }
    if (offer_admission(m, id, admission, req) < 0)
        return false;
    ctl_expect_member(m->ctl, id, admission);
    struct view_join_desc desc;
    int rc = await_desc(m, id, view, admission, &desc);
    if (rc < 0) {
        sp_log(SP_LOG_WARN, "join", "joiner %u at %s:%u was not admitted: %s", id,
               req->address.host, req->address.port, spindle_errmsg());
        char why[VIEW_WHY_MAX];
        snprintf(why, sizeof why, "the leader gave up: %s", spindle_errmsg());
        send_drop(m, id, view, SPINDLE_EAGAIN, why);
        return false;
    }
    struct view_join_announce announce = {view, id, req->address, req->identity, desc.desc};
    uint8_t bytes[VIEW_WIRE_JOIN_ANNOUNCE_SIZE];
    view_wire_encode_join_announce(&announce, bytes, sizeof bytes);
    rc = ctl_publish(m->ctl, view_join_tag(view, JOIN_ANNOUNCE), bytes, sizeof bytes,
                     view_member_mask(&m->current->view));
    if (rc < 0)
        return false;
    sp_log(SP_LOG_INFO, "join",
           "admitting member %u (%s, incarnation %llu, at %s:%u) into view %llu", id,
           req->identity.name, (unsigned long long)req->identity.incarnation, req->address.host,
           req->address.port, (unsigned long long)view);
    set_joiner(m, id, view, &req->address, &req->identity, &desc.desc,
               (req->flags & VIEW_JOIN_CATCHUP) != 0);
    return true;
}

/* Refuses a request whose subgroups differ from the group's; true when
 * they match. */
static bool shapes_match(struct view_membership *m, const struct view_join_request *req)
{
    const struct view *current = &m->current->view;
    char why[VIEW_WHY_MAX];
    bool tie_breaker = (req->flags & VIEW_JOIN_TIE_BREAKER) != 0;
    if (tie_breaker != m->config.tie_breaker) {
        snprintf(why, sizeof why, "the joiner has tie_breaker %s, the group %s",
                 tie_breaker ? "on" : "off", m->config.tie_breaker ? "on" : "off");
        refuse(m, SPINDLE_EINVAL, why);
        return false;
    }
    if ((req->flags & VIEW_JOIN_CATCHUP) != 0 && m->appender == NULL) {
        refuse(m, SPINDLE_EINVAL,
               "the joiner restarts with a log, but this member logs nothing: every member of a "
               "logged subgroup must log it");
        return false;
    }
    if (req->num_subgroups != current->num_subgroups) {
        snprintf(why, sizeof why, "the joiner has %u subgroups, the group %u", req->num_subgroups,
                 current->num_subgroups);
        refuse(m, SPINDLE_EINVAL, why);
        return false;
    }
    for (uint32_t g = 0; g < current->num_subgroups; g++) {
        const struct view_join_subgroup *j = &req->subgroups[g];
        const struct smc_layout *l = &current->layouts[g];
        if (j->window_size != l->window_size || j->max_payload != l->max_payload ||
            j->mode != (uint32_t)l->mode) {
            snprintf(why, sizeof why,
                     "subgroup %u: window %u, max_payload %u, mode %u given, but the group has "
                     "window %u, max_payload %u, mode %d",
                     g, j->window_size, j->max_payload, j->mode, l->window_size, l->max_payload,
                     (int)l->mode);
            refuse(m, SPINDLE_EINVAL, why);
            return false;
        }
    }
    return true;
}

/*
 * Refuses a joiner whose name a member of the view holds; true when the
 * name is free. A larger incarnation is the same member started again:
 * the one in the view is an earlier incarnation that is dead or about to
 * be, so it is suspected (the view change removes it, and tells it so if
 * it is alive) and the joiner, refused for now, is admitted when it asks
 * again after the change.
 */
static bool name_free(struct view_membership *m, const struct view_join_request *req)
{
    const struct view *current = &m->current->view;
    int rank = view_rank_of_name(current, req->identity.name);
    if (rank < 0)
        return true;
    const struct spindle_member_identity *held = &current->identities[rank];
    char why[VIEW_WHY_MAX];
    if (req->identity.incarnation <= held->incarnation) {
        snprintf(why, sizeof why,
                 "member %u has the name '%s' with incarnation %llu, and the joiner's %llu is not "
                 "larger",
                 current->member_ids[rank], held->name, (unsigned long long)held->incarnation,
                 (unsigned long long)req->identity.incarnation);
        refuse(m, SPINDLE_EINVAL, why);
        return false;
    }
    snprintf(why, sizeof why,
             "member %u ('%s', incarnation %llu) is an earlier incarnation of the joiner "
             "(%llu): it is being removed",
             current->member_ids[rank], held->name, (unsigned long long)held->incarnation,
             (unsigned long long)req->identity.incarnation);
    view_suspect(m, (uint32_t)rank);
    refuse(m, SPINDLE_EAGAIN, why);
    return false;
}

/* Checks a join request; answers refusals and redirections itself. */
static bool take_request(struct view_membership *m, const uint8_t *bytes, size_t length)
{
    struct view_join_request *req = malloc(sizeof *req);
    if (req == NULL) {
        refuse(m, SPINDLE_ENOMEM, "the member is out of memory");
        return false;
    }
    bool joined = false;
    if (view_wire_type(bytes, length) == VIEW_WIRE_RESTART) {
        view_restart_answer(m, bytes, length); /* a member restarting from its log */
    } else if (view_wire_type(bytes, length) == VIEW_WIRE_RESTART_FETCH) {
        /* A restarting member asks this one, a subgroup's source, for what
         * its log lacks of it; no segment goes while the log is read. */
        if (m->appender != NULL)
            log_appender_hold_compaction(m->appender, true);
        view_restart_fetch_answer(m, m->ctl, m->log != NULL ? m->log->dir : NULL, m->config.self,
                                  bytes, length);
        if (m->appender != NULL)
            log_appender_hold_compaction(m->appender, false);
    } else if (view_wire_decode_join_request(bytes, length, req) < 0) {
        char why[VIEW_WHY_MAX];
        snprintf(why, sizeof why, "not a join request of this version: %s", spindle_errmsg());
        refuse(m, SPINDLE_EPROTO, why);
    } else if (!shapes_match(m, req)) {
        /* refused */
    } else if (m->current->view.my_rank != 0) {
        struct view_join_offer offer;
        memset(&offer, 0, sizeof offer);
        offer.kind = VIEW_OFFER_REDIRECT;
        offer.redirect = m->addresses[m->current->view.member_ids[0]];
        (void)answer(m, &offer);
    } else if (!view_quiet(m)) {
        pthread_mutex_lock(&m->lock);
        bool closing = m->closing;
        pthread_mutex_unlock(&m->lock);
        refuse(m, SPINDLE_EAGAIN,
               closing ? "the leader is shutting down" : "a view change is under way");
    } else if (name_free(m, req)) {
        joined = admit(m, req);
    }
    free(req);
    return joined;
}

/* The leader's announcement of a joiner for the next view (non-leaders). */
static bool take_announcement(struct view_membership *m)
{
    uint64_t view = m->current->view.id + 1;
    uint32_t leader = m->current->view.member_ids[0];
    uint8_t bytes[VIEW_WIRE_JOIN_ANNOUNCE_SIZE];
    if (ctl_collect_one(m->ctl, view_join_tag(view, JOIN_ANNOUNCE), leader, bytes, sizeof bytes,
                        0) != 0)
        return false;
    struct view_join_announce a;
    if (view_wire_decode_join_announce(bytes, sizeof bytes, &a) < 0 || a.view_id != view ||
        a.id >= SPINDLE_MAX_MEMBERS || view_rank_of(&m->current->view, a.id) >= 0 ||
        view_rank_of_name(&m->current->view, a.identity.name) >= 0) {
        sp_log(SP_LOG_WARN, "join", "ignoring a malformed join announcement from member %u",
               leader);
        return false;
    }
    sp_log(SP_LOG_INFO, "join", "member %u (%s, incarnation %llu, at %s:%u) joins in view %llu",
           a.id, a.identity.name, (unsigned long long)a.identity.incarnation, a.address.host,
           a.address.port, (unsigned long long)view);
    set_joiner(m, a.id, view, &a.address, &a.identity, &a.desc, false);
    return true;
}

bool view_join_poll(struct view_membership *m)
{
    uint8_t request[CTL_JOIN_REQUEST_MAX];
    size_t length = 0;
    if (ctl_join_poll(m->ctl, 5, request, sizeof request, &length) == 1)
        return take_request(m, request, length);
    if (m->current->view.my_rank == 0)
        return false;
    return take_announcement(m);
}

void view_join_abort(struct view_membership *m, int error, const char *why)
{
    pthread_mutex_lock(&m->lock);
    bool active = m->joiner.active;
    uint32_t id = m->joiner.id;
    uint64_t view = m->joiner.view_id;
    m->joiner.active = false;
    pthread_mutex_unlock(&m->lock);
    if (!active)
        return;
    sp_log(SP_LOG_INFO, "join", "joiner %u dropped from view %llu: %s", id,
           (unsigned long long)view, why);
    if (m->current->view.my_rank == 0)
        send_drop(m, id, view, error, why);
}

/* Runs state_save; *state and *length (0 and NULL when there is none or
 * it failed, with jv's error and reason set). */
static void save_state(struct view_membership *m, struct view_join_view *jv, void **state,
                       size_t *length)
{
    *state = NULL;
    *length = 0;
    if (m->config.state_save == NULL)
        return;
    int rc = m->config.state_save(m->config.state_save_ctx, state, length);
    if (rc < 0 || (*state == NULL && *length > 0)) {
        /* The joiner cannot start without its state: it stops, and the
         * others remove it when it never starts. */
        jv->error = rc < 0 ? rc : SPINDLE_EINVAL;
        snprintf(jv->why, sizeof jv->why, "state_save at member %u failed (%s%s)", m->config.self,
                 spindle_strerror(jv->error), rc >= 0 ? ": no bytes for a length" : "");
        sp_log(SP_LOG_ERROR, "join", "%s", jv->why);
        free(*state);
        *state = NULL;
        *length = 0;
    }
}

static bool holds_row(const struct smc_layout *layout, uint32_t row)
{
    for (uint32_t i = 0; i < layout->num_members; i++)
        if (layout->members[i] == row)
            return true;
    return false;
}

/* The leader's own skips (carry_unordered_edge in view_install.c) in every
 * unordered subgroup both it and the joiner are members of: the state it
 * saves holds those messages, so the joiner must not deliver their resends
 * either. Elsewhere the state covers none of the subgroup's old messages
 * and the joiner delivers every resend. */
static int collect_skips(const struct view_epoch *next, uint32_t joiner_row,
                         struct view_join_skips *out)
{
    const struct view *view = &next->view;
    out->view_id = view->id;
    out->num_skips = 0;
    for (uint32_t g = 0; g < view->num_subgroups; g++) {
        const struct smc_layout *layout = &view->layouts[g];
        if (layout->mode != SPINDLE_MODE_UNORDERED || !holds_row(layout, view->my_rank) ||
            !holds_row(layout, joiner_row))
            continue;
        for (uint32_t t = 0; t < layout->num_senders; t++) {
            uint64_t count = 0;
            int rc = smc_group_skipping(next->smc, g, t, &count);
            if (rc < 0)
                return rc;
            if (count == 0)
                continue;
            if (count > VIEW_JOIN_SKIP_MAX || out->num_skips == VIEW_JOIN_MAX_SKIPS)
                return sp_error(SPINDLE_EPROTO, "subgroup %u sender %u: skip %llu cannot be sent",
                                g, t, (unsigned long long)count);
            out->skips[out->num_skips++] = (struct view_join_skip){g, t, count};
        }
    }
    return 0;
}

/* Publishes the skips, then the view: the joiner reads the view last
 * published and collects the skips by the size it names; the state
 * follows at the start of the view (view_join_send_state). */
static int publish_join(struct view_membership *m, uint32_t id, struct view_join_view *jv,
                        const struct view_join_skips *skips)
{
    uint64_t view = jv->view_id;
    int rc = 0;
    if (jv->num_skips > 0) {
        size_t size = VIEW_WIRE_JOIN_SKIPS_SIZE(jv->num_skips);
        uint8_t *bytes = malloc(size);
        if (bytes == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's skips");
        view_wire_encode_join_skips(skips, bytes, size);
        rc = ctl_publish(m->ctl, view_join_tag(view, JOIN_SKIPS), bytes, size, 1ull << id);
        free(bytes);
    }
    uint8_t *bytes = malloc(VIEW_WIRE_JOIN_VIEW_SIZE);
    if (bytes == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's view");
    view_wire_encode_join_view(jv, bytes, VIEW_WIRE_JOIN_VIEW_SIZE);
    if (rc == 0)
        rc = ctl_publish(m->ctl, view_join_tag(view, JOIN_VIEW), bytes, VIEW_WIRE_JOIN_VIEW_SIZE,
                         1ull << id);
    free(bytes);
    return rc;
}

int view_join_send_view(struct view_membership *m, const struct view_epoch *next,
                        const struct sst_member_desc *descs)
{
    uint32_t id = m->joiner.id;
    const struct view *view = &next->view;
    struct view_join_view *jv = calloc(1, sizeof *jv);
    struct view_join_skips *skips = calloc(1, sizeof *skips);
    if (jv == NULL || skips == NULL) {
        free(jv);
        free(skips);
        return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's view");
    }
    jv->view_id = view->id;
    jv->num_rows = view->num_members;
    memcpy(jv->descs, descs, (size_t)view->num_members * sizeof *descs);
    uint32_t joiner_row = view->num_members;
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if (view->member_ids[rank] == id)
            joiner_row = rank;
    int rc = joiner_row < view->num_members
                 ? collect_skips(next, joiner_row, skips)
                 : sp_error(SPINDLE_EINVAL, "joiner %u is not in view %llu", id,
                            (unsigned long long)view->id);
    void *state = NULL;
    size_t length = 0;
    /* A joiner restarting with its log is sent the records it lacks
     * instead (view_log_catchup.c). */
    if (rc == 0 && !m->joiner.catchup)
        save_state(m, jv, &state, &length);
    bool streamed = (m->config.state_write != NULL || m->joiner.catchup) && jv->error == 0;
    jv->state_length = streamed ? VIEW_STATE_STREAMED : length;
    jv->num_skips = jv->error < 0 ? 0 : skips->num_skips;
    if (rc == 0)
        rc = publish_join(m, id, jv, skips);
    /* Kept for the start of the view; a state from an earlier change that
     * never started goes. */
    free(m->joiner.state);
    m->joiner.has_state = rc == 0 && jv->state_length != 0;
    m->joiner.state_view = jv->view_id;
    m->joiner.state = m->joiner.has_state ? state : NULL;
    m->joiner.state_length = m->joiner.has_state ? length : 0;
    if (!m->joiner.has_state)
        free(state);
    free(skips);
    free(jv);
    return rc;
}
