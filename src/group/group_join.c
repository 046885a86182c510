/*
 * Joining a running group (tolerate_failures, TCP bootstrap).
 *
 * Protocol, for a joiner J entering view v+1 of a group in view v:
 *  1. J sends a join request (its control address, its subgroup count) to
 *     any member (ctl_join_ask). A member that is not the leader (row 0
 *     of its view) answers with the leader's address; J asks there.
 *  2. The leader, on its membership thread while no view change runs,
 *     gives J the next unused member id and an offer: the group name, v+1,
 *     the members of v+1 (those of v, then J), their control addresses and
 *     the subgroup layouts of v+1.
 *  3. J opens its engine and its table of v+1, connects its control channel
 *     to every member (as a new slot) and sends the leader its table
 *     descriptor (JOIN_DESC).
 *  4. The leader announces J (id, address, descriptor) to every member
 *     (JOIN_ANNOUNCE) and all of them run a view change that adds J as the
 *     last row: the usual wedge, exchange, commit and trim among the
 *     members of v (J takes no part: it received nothing in v).
 *  5. After delivering the trim, the leader saves the application state
 *     (state_save) and sends J the descriptors of every row of v+1 and the
 *     state (JOIN_VIEW, JOIN_STATE). J loads the state (state_load),
 *     connects its table, starts it and meets the others at the start of
 *     v+1; only then do senders resend and send, so J's first delivery is
 *     the first message of v+1 and its state is the state as of v+1.
 *
 * A failure during the join drops the joiner from that change (its table
 * was made for the failure-free rows); the leader tells it so and J starts
 * over, as it does while another join is pending, until its bootstrap
 * timeout. If the leader fails during the join, J sees its control
 * connection break and starts over with another member.
 *
 * All structures cross the wire in host order: every process of a group
 * runs the same build (as for the rest of the control channel).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/ctl.h"
#include "group/group_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

#define JOIN_MAGIC 0x4e4a5053u /* "SPJN" */

/* Subgroups a joiner may bring (its request must fit one small frame). */
#define JOIN_MAX_SUBGROUPS 256

/* What a joiner's subgroup must share with the group's. */
struct join_subgroup {
    uint32_t window_size, max_payload, mode;
};

struct join_request {
    uint32_t magic;
    uint32_t num_subgroups;
    struct group_endpoint address; /* where the joiner listens */
    struct join_subgroup subgroups[JOIN_MAX_SUBGROUPS];
};

enum { OFFER_ADMIT = 0, OFFER_REDIRECT = 1, OFFER_REFUSE = 2 };

/* The answer to a join request; layouts[] has num_subgroups entries. */
struct join_offer {
    uint32_t magic;
    uint32_t kind;
    int32_t error; /* OFFER_REFUSE: SPINDLE_E* code; SPINDLE_EAGAIN: ask again */
    char why[160];
    struct group_endpoint redirect; /* OFFER_REDIRECT: the leader */
    char group_name[64];
    uint32_t id, num_initial, num_rows, my_row, num_subgroups;
    uint64_t view_id;
    uint32_t member_ids[SST_MAX_ROWS];
    struct group_endpoint addresses[SST_MAX_ROWS]; /* by row */
    struct smc_layout layouts[];
};

struct join_desc {
    uint64_t view_id;
    uint32_t id;
    struct sst_member_desc desc;
};

struct join_announce {
    uint64_t view_id;
    uint32_t id;
    struct group_endpoint address;
    struct sst_member_desc desc;
};

struct join_view {
    uint64_t view_id;
    int32_t error; /* 0, or why the join was dropped (SPINDLE_EAGAIN: try again) */
    char why[160];
    uint64_t state_length;
    struct sst_member_desc descs[SST_MAX_ROWS];
};

static size_t offer_size(uint32_t num_subgroups)
{
    return sizeof(struct join_offer) + (size_t)num_subgroups * sizeof(struct smc_layout);
}

/* ---- leader and members: requests and announcements ------------------ */

static void refuse(struct spindle_group *group, int error, const char *why)
{
    struct join_offer offer;
    memset(&offer, 0, sizeof offer);
    offer.magic = JOIN_MAGIC;
    offer.kind = OFFER_REFUSE;
    offer.error = error;
    snprintf(offer.why, sizeof offer.why, "%s", why);
    sp_log(error == SPINDLE_EAGAIN ? SP_LOG_INFO : SP_LOG_WARN, "join",
           "member %u refused a join request: %s", group->options.self, why);
    ctl_join_answer(group->ctl, &offer, sizeof offer);
}

/* True while the current view has no change pending (membership thread). */
static bool quiet(struct spindle_group *group)
{
    pthread_mutex_lock(&group->lock);
    bool quiet = group->suspected == 0 && !group->closing && !group->stop && group->terminal == 0;
    pthread_mutex_unlock(&group->lock);
    return quiet;
}

/* Builds and sends the leader's offer for joiner id; *out keeps it. */
static int offer_admission(struct spindle_group *group, uint32_t id, const struct join_request *req)
{
    size_t size = offer_size(group->num_subgroups);
    struct join_offer *offer = calloc(1, size);
    if (offer == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a join offer");
    offer->magic = JOIN_MAGIC;
    offer->kind = OFFER_ADMIT;
    snprintf(offer->group_name, sizeof offer->group_name, "%s", group->group_name);
    offer->id = id;
    offer->num_initial = group->options.num_members;
    offer->num_rows = group->num_rows + 1;
    offer->my_row = group->num_rows;
    offer->num_subgroups = group->num_subgroups;
    offer->view_id = group->view_id + 1;
    int new_row[SST_MAX_ROWS];
    for (uint32_t r = 0; r < group->num_rows; r++) {
        new_row[r] = (int)r;
        offer->member_ids[r] = group->view_ctx->member_ids[r];
        offer->addresses[r] = group->boot.hosts[offer->member_ids[r]];
    }
    offer->member_ids[group->num_rows] = id;
    offer->addresses[group->num_rows] = req->address;
    struct spindle_view_info view = {
        .view_id = offer->view_id,
        .num_members = offer->num_rows,
        .members = offer->member_ids,
        .my_rank = group->my_row,
        .num_joined = 1,
        .joined = &offer->id,
    };
    int rc = group_next_layouts(group, group->layouts, new_row, group->num_rows,
                                (int)group->num_rows, &view, offer->layouts);
    if (rc == 0)
        rc = ctl_join_answer(group->ctl, offer, size);
    else
        refuse(group, rc, spindle_errmsg());
    free(offer);
    return rc;
}

/* Waits for the joiner's table descriptor (it first connects to every
 * member), giving up when a failure needs a view change. */
static int await_desc(struct spindle_group *group, uint32_t id, uint64_t view,
                      struct join_desc *desc)
{
    /* Connecting to every member takes the joiner a few polls of theirs;
     * a joiner silent for longer than this is taken to be gone. */
    int wait_ms = 2 * group->options.failure_timeout_ms;
    uint64_t deadline = sp_now_ns() + (uint64_t)wait_ms * 1000000ull;
    for (;;) {
        int rc = ctl_collect_one(group->ctl, group_join_tag(view, JOIN_DESC), id, desc,
                                 sizeof *desc, 20);
        if (rc == 0) {
            if (desc->view_id != view || desc->id != id)
                return sp_error(SPINDLE_EPROTO, "joiner %u sent a descriptor for view %llu as %u",
                                id, (unsigned long long)desc->view_id, desc->id);
            return 0;
        }
        if (rc != SPINDLE_ETIMEDOUT)
            return rc;
        if (!quiet(group))
            return sp_error(SPINDLE_EAGAIN, "the group began a view change or is shutting down");
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT, "joiner %u did not connect within %d ms", id,
                            wait_ms);
    }
}

static void set_joiner(struct spindle_group *group, uint32_t id, uint64_t view,
                       const struct group_endpoint *address, const struct sst_member_desc *desc)
{
    ctl_add_member(group->ctl, id, address->host, address->port);
    pthread_mutex_lock(&group->lock);
    group->boot.hosts[id] = *address;
    group->joiner.active = true;
    group->joiner.id = id;
    group->joiner.view_id = view;
    group->joiner.address = *address;
    group->joiner.desc = *desc;
    if (id >= group->next_id)
        group->next_id = id + 1;
    pthread_mutex_unlock(&group->lock);
}

/* The leader admits the joiner behind a valid request. */
static bool admit(struct spindle_group *group, const struct join_request *req)
{
    uint32_t id = group->next_id;
    uint64_t view = group->view_id + 1;
    if (id >= SPINDLE_MAX_MEMBERS) {
        refuse(group, SPINDLE_EINVAL, "all member ids of this group are used (ids are not reused)");
        return false;
    }
    if (group->num_rows >= SST_MAX_ROWS) {
        refuse(group, SPINDLE_EINVAL, "the view is full");
        return false;
    }
    if (offer_admission(group, id, req) < 0)
        return false;
    /* The id is spent even if the joiner never comes back: it may have
     * connected to some members already, which never reuse a slot. */
    pthread_mutex_lock(&group->lock);
    group->next_id = id + 1;
    pthread_mutex_unlock(&group->lock);
    struct join_desc desc;
    int rc = await_desc(group, id, view, &desc);
    if (rc < 0) {
        sp_log(SP_LOG_WARN, "join", "joiner %u at %s:%u was not admitted: %s", id,
               req->address.host, req->address.port, spindle_errmsg());
        struct join_view drop;
        memset(&drop, 0, sizeof drop);
        drop.view_id = view;
        drop.error = SPINDLE_EAGAIN;
        snprintf(drop.why, sizeof drop.why, "the leader gave up: %s", spindle_errmsg());
        ctl_publish(group->ctl, group_join_tag(view, JOIN_VIEW), &drop, sizeof drop, 1ull << id);
        return false;
    }
    struct join_announce announce;
    memset(&announce, 0, sizeof announce);
    announce.view_id = view;
    announce.id = id;
    announce.address = req->address;
    announce.desc = desc.desc;
    uint64_t members = 0;
    for (uint32_t r = 0; r < group->num_rows; r++)
        members |= 1ull << group->view_ctx->member_ids[r];
    rc = ctl_publish(group->ctl, group_join_tag(view, JOIN_ANNOUNCE), &announce, sizeof announce,
                     members);
    if (rc < 0)
        return false;
    sp_log(SP_LOG_INFO, "join", "admitting member %u (%s:%u) into view %llu", id, req->address.host,
           req->address.port, (unsigned long long)view);
    set_joiner(group, id, view, &req->address, &desc.desc);
    return true;
}

/* Checks a join request; answers refusals and redirections itself. */
static bool take_request(struct spindle_group *group, const struct join_request *req, size_t length)
{
    if (length != sizeof *req || req->magic != JOIN_MAGIC) {
        refuse(group, SPINDLE_EPROTO, "not a join request of this version");
        return false;
    }
    if (memchr(req->address.host, '\0', sizeof req->address.host) == NULL ||
        req->address.host[0] == '\0' || req->address.port == 0) {
        refuse(group, SPINDLE_EINVAL, "the joiner's address is not host:port");
        return false;
    }
    if (req->num_subgroups != group->num_subgroups) {
        char why[160];
        snprintf(why, sizeof why, "the joiner has %u subgroups, the group %u", req->num_subgroups,
                 group->num_subgroups);
        refuse(group, SPINDLE_EINVAL, why);
        return false;
    }
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        const struct join_subgroup *j = &req->subgroups[g];
        const struct smc_layout *l = &group->layouts[g];
        if (j->window_size != l->window_size || j->max_payload != l->max_payload ||
            j->mode != (uint32_t)l->mode) {
            char why[160];
            snprintf(why, sizeof why,
                     "subgroup %u: window %u, max_payload %u, mode %u given, but the group has "
                     "window %u, max_payload %u, mode %d",
                     g, j->window_size, j->max_payload, j->mode, l->window_size, l->max_payload,
                     (int)l->mode);
            refuse(group, SPINDLE_EINVAL, why);
            return false;
        }
    }
    if (group->my_row != 0) {
        struct join_offer offer;
        memset(&offer, 0, sizeof offer);
        offer.magic = JOIN_MAGIC;
        offer.kind = OFFER_REDIRECT;
        offer.redirect = group->boot.hosts[group->view_ctx->member_ids[0]];
        ctl_join_answer(group->ctl, &offer, sizeof offer);
        return false;
    }
    if (!quiet(group)) {
        pthread_mutex_lock(&group->lock);
        bool closing = group->closing;
        pthread_mutex_unlock(&group->lock);
        refuse(group, SPINDLE_EAGAIN,
               closing ? "the leader is shutting down" : "a view change is under way");
        return false;
    }
    return admit(group, req);
}

bool group_join_poll(struct spindle_group *group)
{
    struct join_request req;
    size_t length = 0;
    if (ctl_join_poll(group->ctl, 5, &req, sizeof req, &length) == 1)
        return take_request(group, &req, length);
    if (group->my_row == 0)
        return false;
    /* The leader's announcement of a joiner for the next view. */
    uint64_t view = group->view_id + 1;
    uint32_t leader = group->view_ctx->member_ids[0];
    struct join_announce announce;
    if (ctl_collect_one(group->ctl, group_join_tag(view, JOIN_ANNOUNCE), leader, &announce,
                        sizeof announce, 0) != 0)
        return false;
    const struct join_announce *a = &announce;
    if (a->view_id != view || a->id >= SPINDLE_MAX_MEMBERS || a->id < group->options.num_members ||
        memchr(a->address.host, '\0', sizeof a->address.host) == NULL) {
        sp_log(SP_LOG_WARN, "join", "ignoring a malformed join announcement from member %u",
               leader);
        return false;
    }
    sp_log(SP_LOG_INFO, "join", "member %u (%s:%u) joins in view %llu", a->id, a->address.host,
           a->address.port, (unsigned long long)view);
    set_joiner(group, a->id, view, &a->address, &a->desc);
    return true;
}

void group_join_abort(struct spindle_group *group, int error, const char *why)
{
    pthread_mutex_lock(&group->lock);
    bool active = group->joiner.active;
    uint32_t id = group->joiner.id;
    uint64_t view = group->joiner.view_id;
    group->joiner.active = false;
    pthread_mutex_unlock(&group->lock);
    if (!active)
        return;
    sp_log(SP_LOG_INFO, "join", "joiner %u dropped from view %llu: %s", id,
           (unsigned long long)view, why);
    if (group->my_row != 0)
        return;
    struct join_view drop;
    memset(&drop, 0, sizeof drop);
    drop.view_id = view;
    drop.error = error;
    snprintf(drop.why, sizeof drop.why, "%s", why);
    ctl_publish(group->ctl, group_join_tag(view, JOIN_VIEW), &drop, sizeof drop, 1ull << id);
}

int group_join_send_view(struct spindle_group *group, uint64_t view,
                         const struct sst_member_desc *descs)
{
    uint32_t id = group->joiner.id;
    struct join_view *jv = calloc(1, sizeof *jv);
    if (jv == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's view");
    jv->view_id = view;
    memcpy(jv->descs, descs, (size_t)(group->num_rows + 1) * sizeof *descs);
    void *state = NULL;
    size_t length = 0;
    if (group->options.state_save != NULL) {
        int rc = group->options.state_save(group->options.state_ctx, &state, &length);
        if (rc < 0 || (state == NULL && length > 0)) {
            /* The joiner cannot start without its state: it stops, and the
             * others remove it when it never starts. */
            jv->error = rc < 0 ? rc : SPINDLE_EINVAL;
            snprintf(jv->why, sizeof jv->why, "state_save at member %u failed (%s)",
                     group->options.self, spindle_strerror(jv->error));
            sp_log(SP_LOG_ERROR, "join", "%s", jv->why);
            free(state);
            state = NULL;
            length = 0;
        }
    }
    jv->state_length = length;
    int rc = 0;
    if (length > 0)
        rc = ctl_publish(group->ctl, group_join_tag(view, JOIN_STATE), state, length, 1ull << id);
    /* The view goes last: the joiner reads the state once it has it. */
    if (rc == 0)
        rc = ctl_publish(group->ctl, group_join_tag(view, JOIN_VIEW), jv, sizeof *jv, 1ull << id);
    free(state);
    free(jv);
    return rc;
}

/* ---- the joiner ------------------------------------------------------- */

static int ask_admission(struct spindle_group *group,
                         const struct spindle_subgroup_config *subgroups,
                         const struct group_endpoint *self, struct group_endpoint *contact,
                         uint64_t deadline, struct join_offer **out)
{
    struct join_request req;
    memset(&req, 0, sizeof req);
    req.magic = JOIN_MAGIC;
    req.num_subgroups = group->num_subgroups;
    req.address = *self;
    for (uint32_t g = 0; g < group->num_subgroups; g++)
        req.subgroups[g] = (struct join_subgroup){
            subgroups[g].window_size, subgroups[g].max_payload, (uint32_t)subgroups[g].mode};
    for (int hops = 0; hops < 4; hops++) {
        uint64_t now = sp_now_ns();
        int ms = now >= deadline ? 1 : (int)((deadline - now) / 1000000u) + 1;
        void *reply = NULL;
        size_t length = 0;
        int rc = ctl_join_ask(group->options.group_name, contact->host, contact->port, &req,
                              sizeof req, &reply, &length, ms);
        if (rc < 0)
            return sp_error(SPINDLE_EAGAIN, "%s", spindle_errmsg());
        struct join_offer *offer = reply;
        if (length < sizeof *offer || offer->magic != JOIN_MAGIC) {
            free(reply);
            return sp_error(SPINDLE_EPROTO, "%s:%u answered the join request with garbage",
                            contact->host, contact->port);
        }
        if (offer->kind == OFFER_REDIRECT) {
            *contact = offer->redirect;
            contact->host[sizeof contact->host - 1] = '\0';
            free(reply);
            continue;
        }
        if (offer->kind == OFFER_REFUSE) {
            int error = offer->error < 0 ? offer->error : SPINDLE_EPROTO;
            offer->why[sizeof offer->why - 1] = '\0';
            rc = sp_error(error, "%s:%u refused the join: %s", contact->host, contact->port,
                          offer->why);
            free(reply);
            return rc;
        }
        if (offer->num_subgroups != group->num_subgroups ||
            length != offer_size(offer->num_subgroups) || offer->num_rows > SST_MAX_ROWS ||
            offer->my_row != offer->num_rows - 1 || offer->num_initial == 0 ||
            offer->id < offer->num_initial || offer->id >= SPINDLE_MAX_MEMBERS) {
            free(reply);
            return sp_error(SPINDLE_EPROTO, "%s:%u sent a malformed join offer", contact->host,
                            contact->port);
        }
        *out = offer;
        return 0;
    }
    return sp_error(SPINDLE_EAGAIN, "join requests were redirected too often (the leader moved)");
}

/* The joiner's subgroups must match the group's in everything but members. */
static int check_offer(const struct join_offer *offer,
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
        int rc = smc_layout_validate(l, g, offer->num_rows);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Waits for the leader's JOIN_VIEW (and the state), or for the leader to
 * be gone. */
static int await_view(struct spindle_group *group, uint32_t leader, uint64_t view,
                      struct join_view *jv, void **state)
{
    int timeout = group->options.bootstrap_timeout_ms +
                  EXCHANGE_TIMEOUTS * 2 * group->options.failure_timeout_ms;
    int rc = ctl_collect_one(group->ctl, group_join_tag(view, JOIN_VIEW), leader, jv, sizeof *jv,
                             timeout);
    if (rc < 0)
        return sp_error(SPINDLE_EAGAIN, "the leader did not complete the join: %s",
                        spindle_errmsg());
    jv->why[sizeof jv->why - 1] = '\0';
    if (jv->view_id != view)
        return sp_error(SPINDLE_EPROTO, "the leader sent view %llu, not %llu",
                        (unsigned long long)jv->view_id, (unsigned long long)view);
    if (jv->error < 0)
        return sp_error(jv->error, "the join was dropped: %s", jv->why);
    if (jv->state_length == 0)
        return 0;
    if (jv->state_length > (64u << 20))
        return sp_error(SPINDLE_EPROTO, "the leader announced %llu bytes of state",
                        (unsigned long long)jv->state_length);
    uint8_t *buffer = malloc((size_t)jv->state_length);
    if (buffer == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %llu bytes of state",
                        (unsigned long long)jv->state_length);
    rc = ctl_collect_one(group->ctl, group_join_tag(view, JOIN_STATE), leader, buffer,
                         (size_t)jv->state_length, timeout);
    if (rc < 0) {
        free(buffer);
        return sp_error(SPINDLE_EAGAIN, "the state did not arrive: %s", spindle_errmsg());
    }
    *state = buffer;
    return 0;
}

/* Undoes a failed attempt so that the next one starts clean. */
static void join_undo(struct spindle_group *group)
{
    if (group->engine_started) {
        sst_engine_stop(group->engine);
        group->engine_started = false;
    }
    smc_group_destroy(group->smc);
    group->smc = NULL;
    if (group->engine != NULL)
        sst_engine_destroy(group->engine);
    group->engine = NULL;
    ctl_close(group->ctl);
    group->ctl = NULL;
    free(group->layouts);
    group->layouts = NULL;
}

/* Takes on the identity and the view the offer gives this process. */
static int adopt_offer(struct spindle_group *group, const struct join_offer *offer,
                       const struct group_endpoint *self)
{
    struct spindle_group_options *o = &group->options;
    snprintf(group->group_name, sizeof group->group_name, "%.*s", (int)sizeof offer->group_name - 1,
             offer->group_name);
    o->group_name = group->group_name;
    o->self = offer->id;
    o->num_members = offer->num_initial;
    group->boot.kind = SPINDLE_BOOTSTRAP_TCP;
    memset(group->boot.hosts, 0, sizeof group->boot.hosts);
    for (uint32_t r = 0; r < offer->num_rows; r++) {
        group->boot.hosts[offer->member_ids[r]] = offer->addresses[r];
        group->boot.hosts[offer->member_ids[r]].host[GROUP_HOST_MAX - 1] = '\0';
    }
    group->boot.hosts[offer->id] = *self;
    group->next_id = offer->id + 1;
    group->num_rows = offer->num_rows;
    group->my_row = offer->my_row;
    group->view_ctx->view_id = offer->view_id;
    memcpy(group->view_ctx->member_ids, offer->member_ids, sizeof offer->member_ids);
    group->layouts = malloc(offer->num_subgroups * sizeof *group->layouts);
    if (group->layouts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u subgroup layouts", offer->num_subgroups);
    memcpy(group->layouts, offer->layouts, offer->num_subgroups * sizeof *group->layouts);
    return 0;
}

/* Meets the members at the start of the view (they resend and send only
 * once the joiner is there). */
static int meet_members(struct spindle_group *group, uint64_t view)
{
    uint64_t members = 0;
    for (uint32_t r = 0; r < group->num_rows; r++)
        if (r != group->my_row)
            members |= 1ull << group->view_ctx->member_ids[r];
    uint8_t ready = 1, all[SPINDLE_MAX_MEMBERS];
    int rc = ctl_publish(group->ctl, group_view_tag(view, STEP_READY), &ready, 1, members);
    if (rc == 0)
        rc = ctl_collect(group->ctl, group_view_tag(view, STEP_READY), members, all, 1,
                         EXCHANGE_TIMEOUTS * group->options.failure_timeout_ms, NULL);
    return rc;
}

static int join_attempt(struct spindle_group *group,
                        const struct spindle_subgroup_config *subgroups,
                        const struct group_endpoint *self, const struct group_endpoint *contact,
                        uint64_t deadline)
{
    struct join_offer *offer = NULL;
    struct group_endpoint where = *contact;
    int rc = ask_admission(group, subgroups, self, &where, deadline, &offer);
    if (rc < 0)
        return rc;
    uint64_t view = offer->view_id;
    uint32_t leader = offer->member_ids[0];
    rc = check_offer(offer, subgroups);
    if (rc == 0)
        rc = adopt_offer(group, offer, self);
    if (rc == 0)
        rc = group_open_engine(group);
    struct smc_options smc_options = {
        .batching = group->options.batching,
        .null_sends = group->options.null_sends,
        .deliver = group_deliver,
        .deliver_ctx = group->view_ctx,
    };
    if (rc == 0)
        rc = smc_group_create(group->engine, group->layouts, group->num_subgroups, group->num_rows,
                              group->my_row, &smc_options, &group->smc);
    if (rc == 0) {
        struct ctl_member members[SPINDLE_MAX_MEMBERS];
        memset(members, 0, sizeof members);
        for (uint32_t r = 0; r < group->num_rows; r++) {
            uint32_t id = group->view_ctx->member_ids[r];
            members[id] =
                (struct ctl_member){id, group->boot.hosts[id].host, group->boot.hosts[id].port};
        }
        /* A member that cannot be reached may have failed: ask again. */
        rc = ctl_open_tcp_joiner(group->group_name, members, offer->num_initial, offer->id,
                                 group->options.bootstrap_timeout_ms, &group->ctl);
        if (rc == SPINDLE_EUNREACH || rc == SPINDLE_ETIMEDOUT)
            rc = sp_error(SPINDLE_EAGAIN, "%s", spindle_errmsg());
    }
    free(offer);
    struct join_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.view_id = view;
    desc.id = group->options.self;
    if (rc == 0)
        rc = smc_group_export(group->smc, &desc.desc);
    if (rc == 0)
        rc = ctl_publish(group->ctl, group_join_tag(view, JOIN_DESC), &desc, sizeof desc,
                         1ull << leader);
    struct join_view jv;
    void *state = NULL;
    if (rc == 0)
        rc = await_view(group, leader, view, &jv, &state);
    if (rc == 0 && group->options.state_load != NULL) {
        rc = group->options.state_load(group->options.state_ctx, state, (size_t)jv.state_length);
        if (rc < 0)
            rc = sp_error(rc, "state_load refused the state of view %llu (%s)",
                          (unsigned long long)view, spindle_strerror(rc));
    }
    free(state);
    if (rc == 0)
        rc = smc_group_connect(group->smc, jv.descs, group->options.bootstrap_timeout_ms);
    if (rc == 0)
        rc = smc_group_start(group->smc);
    if (rc == 0)
        rc = sst_engine_start(group->engine);
    if (rc == 0)
        group->engine_started = true;
    if (rc == 0)
        rc = meet_members(group, view);
    if (rc < 0)
        return rc;
    __atomic_store_n(&group->view_id, view, __ATOMIC_RELEASE);
    group->detected_ns = 0;
    group_report_view(group, 0, NULL, 0, group->options.self);
    return 0;
}

int group_join_create(struct spindle_group *group, const struct spindle_subgroup_config *subgroups,
                      uint32_t num_subgroups)
{
    struct spindle_group_options *o = &group->options;
    if (!o->tolerate_failures)
        return sp_error(SPINDLE_EINVAL, "joining a group (options.join) needs tolerate_failures");
    struct group_endpoint self, contact;
    int rc = group_parse_endpoint(o->bootstrap, "the joiner's bootstrap address", &self);
    if (rc == 0)
        rc = group_parse_endpoint(o->join, "the join address", &contact);
    if (rc < 0)
        return rc;
    if (num_subgroups > JOIN_MAX_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL, "a joiner may bring at most %u subgroups, not %u",
                        JOIN_MAX_SUBGROUPS, num_subgroups);
    for (uint32_t g = 0; g < num_subgroups; g++)
        if (subgroups[g].window_size == 0 || subgroups[g].max_payload == 0)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: window_size and max_payload must be > 0",
                            g);
    group->num_subgroups = num_subgroups;
    group->joinable = true;
    group->view_ctx = calloc(1, sizeof *group->view_ctx);
    if (group->view_ctx == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the view context");
    group->view_ctx->group = group;
    uint64_t deadline = sp_now_ns() + (uint64_t)o->bootstrap_timeout_ms * 1000000ull;
    for (;;) {
        rc = join_attempt(group, subgroups, &self, &contact, deadline);
        if (rc != SPINDLE_EAGAIN)
            return rc;
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT, "could not join within %d ms: %s",
                            o->bootstrap_timeout_ms, spindle_errmsg());
        sp_log(SP_LOG_INFO, "join", "join attempt failed (%s); asking again", spindle_errmsg());
        join_undo(group);
        struct timespec pause = {0, 50 * 1000000L};
        nanosleep(&pause, NULL);
    }
}
