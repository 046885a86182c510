/*
 * A volatile topic's history for members that join it (docs/DDS.md,
 * "Late subscribers"). Every member of the topic keeps, as each view
 * begins, a copy of the history as it stands then: "the history at the
 * start of view V" (the boundary copy), which is the same at every member
 * that was in the topic through the previous view (virtual synchrony: they
 * delivered the same samples before V). A member that joins the topic in
 * V keeps its deliveries of V pending and asks a member that was in the
 * topic before V for that copy, in chunks of point-to-point queries; once
 * it has it, its readers get the history, then the pending samples, then
 * the live stream: no gap, no duplicate.
 *
 * Only a joiner loads: roles come from the file, so a member already in
 * the view enters a volatile topic's subgroup only as the filler of a
 * topic no member of the view uses (dds_layout.c), when every member that
 * held its history is gone; its empty history is then the topic's.
 *
 * Threads: the boundary copies are taken in the delivery, view and
 * point-to-point upcalls, which answer queries at once (never waiting);
 * the queries are asked by the fetcher thread, since an upcall may not
 * wait for a reply. Both sides take the topic's lock, the fetcher never
 * while it waits for a reply.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dds_impl.h"

/* How long the fetcher waits for one reply, and before it asks again when
 * no member could answer yet (a member's copy is of another view). */
#define FETCH_REPLY_TIMEOUT_MS 2000
#define FETCH_RETRY_MS         50

static bool is_volatile(const struct dds_topic *topic)
{
    return topic->config != NULL && topic->config->qos == SPINDLE_DDS_VOLATILE;
}

/* Replaces the boundary copy with the history as view_id begins, once per
 * view: at the first of the view's upcalls to reach the topic (a view's
 * first deliveries may come before its view_changed; every delivery of the
 * previous view came before both). Called with the topic's lock held. */
static void take_boundary(struct dds_topic *topic, uint64_t view_id)
{
    if (view_id <= topic->seen_view && topic->boundary != NULL)
        return;
    struct dds_fifo *fifos[SPINDLE_DDS_MAX_TOPICS] = {NULL};
    uint32_t id = topic->config->id;
    fifos[id] = &topic->history;
    uint8_t *bytes = NULL;
    size_t size = 0;
    /* Without memory the old copy goes: asked for, it answers "another
     * view" and the joiner asks elsewhere. */
    int rc = dds_history_encode(fifos, id + 1, &bytes, &size);
    free(topic->boundary);
    topic->boundary = rc == 0 ? bytes : NULL;
    topic->boundary_size = rc == 0 ? size : 0;
    topic->boundary_complete = !topic->loading;
    topic->seen_view = view_id;
}

void dds_history_mark_joiner(spindle_dds_participant_t *p)
{
    uint64_t bit = 1ull << p->self->id;
    for (uint32_t t = 0; t < p->config->num_topics; t++) {
        struct dds_topic *topic = &p->topics[t];
        if (is_volatile(topic) &&
            ((topic->config->publishers | topic->config->subscribers) & bit) != 0)
            topic->loading = true;
    }
}

bool dds_history_on_deliver(struct dds_topic *topic, const struct spindle_message *message)
{
    if (!is_volatile(topic))
        return true;
    take_boundary(topic, message->view_id);
    if (!topic->loading)
        return true;
    if (topic->num_pending == topic->pending_capacity) {
        uint32_t capacity = topic->pending_capacity > 0 ? topic->pending_capacity * 2 : 64;
        struct dds_pending *grown = realloc(topic->pending, capacity * sizeof *grown);
        if (grown == NULL) {
            topic->bad_samples++; /* lost here: the reader sees the gap in seq */
            return false;
        }
        topic->pending = grown;
        topic->pending_capacity = capacity;
    }
    uint8_t *copy = malloc(message->length > 0 ? message->length : 1);
    if (copy == NULL) {
        topic->bad_samples++;
        return false;
    }
    memcpy(copy, message->data, message->length);
    topic->pending[topic->num_pending++] =
        (struct dds_pending){.bytes = copy, .size = message->length, .view_id = message->view_id};
    return false;
}

/* The members of topic t in view that can hand its history at the start
 * of view: in the topic's subgroup, neither this member nor a joiner. */
static void find_candidates(const struct spindle_view_info *view,
                            const struct spindle_subgroup_layout *layout, struct dds_topic *topic)
{
    uint32_t self = view->members[view->my_rank];
    topic->num_candidates = 0;
    for (uint32_t i = 0; i < layout->num_members; i++) {
        uint32_t id = view->members[layout->members[i]];
        bool joined = id == self;
        for (uint32_t j = 0; j < view->num_joined && !joined; j++)
            joined = view->joined[j] == id;
        if (!joined)
            topic->candidates[topic->num_candidates++] = id;
    }
}

/* Every topic's subgroup in view (a malloc'ed array), or NULL. */
static struct spindle_subgroup_layout *layouts_of(const spindle_dds_participant_t *p,
                                                  const struct spindle_view_info *view)
{
    const char *names[SPINDLE_MAX_MEMBERS];
    if (view->num_members > SPINDLE_MAX_MEMBERS)
        return NULL;
    struct spindle_subgroup_layout *layouts = calloc(SPINDLE_DDS_MAX_TOPICS, sizeof *layouts);
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        names[rank] = view->identities[rank].name;
    if (layouts != NULL && dds_layout_topics(p->config, names, view->num_members, layouts) != 0) {
        free(layouts);
        layouts = NULL;
    }
    return layouts;
}

void dds_history_on_view(spindle_dds_participant_t *p, const struct spindle_view_info *view)
{
    struct spindle_subgroup_layout *layouts = NULL;
    for (uint32_t t = 0; t < p->config->num_topics; t++) {
        struct dds_topic *topic = &p->topics[t];
        if (!is_volatile(topic))
            continue;
        pthread_mutex_lock(&topic->lock);
        take_boundary(topic, view->view_id);
        if (topic->loading && layouts == NULL)
            layouts = layouts_of(p, view);
        if (topic->loading && layouts != NULL) {
            find_candidates(view, &layouts[t], topic);
            topic->fetch_view = view->view_id;
        }
        pthread_mutex_unlock(&topic->lock);
    }
    free(layouts);
    pthread_mutex_lock(&p->fetch_lock);
    p->fetch_generation++;
    pthread_cond_broadcast(&p->fetch_cond);
    pthread_mutex_unlock(&p->fetch_lock);
}

/* The reply to a decoded query, built under the topic's lock; 0 when the
 * query deserves none (an offset past the copy: the asker times out). */
static size_t answer(struct dds_topic *topic, const struct dds_history_query *query,
                     uint64_t message_view, uint8_t *out)
{
    struct dds_history_reply reply = {
        .status = DDS_HREPLY_OK, .topic = query->topic, .view_id = query->view_id};
    pthread_mutex_lock(&topic->lock);
    take_boundary(topic, message_view);
    if (query->view_id != message_view || topic->seen_view != query->view_id ||
        topic->boundary == NULL) {
        reply.status = DDS_HREPLY_OTHER_VIEW;
    } else if (!topic->boundary_complete) {
        reply.status = DDS_HREPLY_INCOMPLETE;
    } else if (query->offset >= topic->boundary_size) {
        pthread_mutex_unlock(&topic->lock);
        return 0;
    } else {
        uint64_t left = topic->boundary_size - query->offset;
        reply.total = topic->boundary_size;
        reply.offset = query->offset;
        reply.chunk = topic->boundary + query->offset;
        reply.chunk_length = (uint32_t)(left < DDS_HREPLY_MAX_CHUNK ? left : DDS_HREPLY_MAX_CHUNK);
    }
    size_t length = dds_history_reply_encode(out, &reply);
    pthread_mutex_unlock(&topic->lock);
    return length;
}

void dds_history_on_query(spindle_dds_participant_t *p, const struct spindle_p2p_message *message)
{
    spindle_group_t *group = __atomic_load_n(&p->group_live, __ATOMIC_ACQUIRE);
    struct dds_history_query query;
    if (group == NULL || message->query_id == 0 ||
        dds_history_query_decode(message->data, message->length, p->config->num_topics, &query) !=
            0)
        return; /* a peer's bad bytes get no answer, never trust */
    struct dds_topic *topic = &p->topics[query.topic];
    if (!is_volatile(topic))
        return;
    uint8_t reply[SPINDLE_P2P_MAX_PAYLOAD];
    size_t length = answer(topic, &query, message->view_id, reply);
    /* Never waits here; a reply that does not fit is asked for again. */
    if (length > 0)
        (void)spindle_p2p_reply(group, message, reply, length, SPINDLE_P2P_NONBLOCK);
}

/* --- the fetcher --- */

enum fetch_outcome {
    FETCH_GOT = 0,
    FETCH_INCOMPLETE = 1, /* that member was loading too when the view began */
    FETCH_LATER = 2,      /* no answer now: another view, a timeout, a failure */
};

struct fetch_plan {
    uint32_t topic;
    uint64_t view_id;
    uint32_t candidates[SPINDLE_MAX_MEMBERS];
    uint32_t num_candidates;
    uint64_t max_bytes; /* the most a history of this topic can take */
};

/* One member's copy, whole, in *out (malloc'ed; *size bytes). A reply
 * that does not answer the query asked is a peer's bad bytes: it ends the
 * attempt as FETCH_LATER. */
static enum fetch_outcome fetch_from(spindle_dds_participant_t *p, const struct fetch_plan *plan,
                                     uint32_t target, uint8_t **out, size_t *size)
{
    uint8_t request[DDS_HQUERY_SIZE];
    uint8_t *buffer = malloc(SPINDLE_P2P_MAX_PAYLOAD);
    uint8_t *bytes = NULL;
    uint64_t total = 0, offset = 0;
    enum fetch_outcome outcome = FETCH_LATER;
    while (buffer != NULL) {
        struct dds_history_query query = {
            .topic = plan->topic, .view_id = plan->view_id, .offset = offset};
        dds_history_query_encode(request, &query);
        size_t length = 0;
        struct dds_history_reply reply;
        if (spindle_p2p_query(p->group, target, request, sizeof request, buffer,
                              SPINDLE_P2P_MAX_PAYLOAD, &length, FETCH_REPLY_TIMEOUT_MS) != 0 ||
            dds_history_reply_decode(buffer, length, p->config->num_topics, &reply) != 0 ||
            reply.topic != plan->topic || reply.view_id != plan->view_id)
            break;
        if (reply.status != DDS_HREPLY_OK) {
            outcome = reply.status == DDS_HREPLY_INCOMPLETE ? FETCH_INCOMPLETE : FETCH_LATER;
            break;
        }
        if (offset == 0 && bytes == NULL) {
            if (reply.total > plan->max_bytes)
                break;
            total = reply.total;
            bytes = malloc(total);
            if (bytes == NULL)
                break;
        }
        if (reply.total != total || reply.offset != offset)
            break;
        memcpy(bytes + offset, reply.chunk, reply.chunk_length);
        offset += reply.chunk_length;
        if (offset == total) {
            *out = bytes;
            *size = total;
            bytes = NULL;
            outcome = FETCH_GOT;
            break;
        }
    }
    free(bytes);
    free(buffer);
    return outcome;
}

struct apply_ctx {
    spindle_dds_participant_t *p;
    uint32_t topic;
};

/* The first pass: every sample is of the topic asked for. */
static int check_sample(void *ctx, uint32_t topic, const uint8_t *payload, size_t size)
{
    const struct apply_ctx *apply = ctx;
    (void)payload;
    (void)size;
    return topic == apply->topic ? 0
                                 : dds_error(SPINDLE_EPROTO, "history of topic %u holds topic %u",
                                             apply->topic, topic);
}

static int load_sample(void *ctx, uint32_t topic, const uint8_t *payload, size_t size)
{
    const struct apply_ctx *apply = ctx;
    dds_deliver_one(apply->p, &apply->p->topics[topic], payload, size, true);
    return 0;
}

/* Goes live: the history at the start of view_id (NULL: lost), then the
 * pending samples of that view and later ones, in order. Those of earlier
 * views are in the history already. */
static void go_live(spindle_dds_participant_t *p, uint32_t t, uint64_t view_id,
                    const uint8_t *history, size_t size)
{
    struct dds_topic *topic = &p->topics[t];
    struct apply_ctx ctx = {.p = p, .topic = t};
    pthread_mutex_lock(&topic->lock);
    if (history != NULL)
        (void)dds_history_decode(history, size, p->config->num_topics, load_sample, &ctx);
    for (uint32_t i = 0; i < topic->num_pending; i++) {
        struct dds_pending *pending = &topic->pending[i];
        if (history == NULL || pending->view_id >= view_id)
            dds_deliver_one(p, topic, pending->bytes, pending->size, false);
        free(pending->bytes);
    }
    topic->num_pending = 0;
    topic->loading = false;
    pthread_mutex_unlock(&topic->lock);
}

/* Asks each candidate in turn. true: the topic is live (with its history,
 * or without it when no member that held it is left); false: ask again
 * later. */
static bool fetch_topic(spindle_dds_participant_t *p, const struct fetch_plan *plan)
{
    bool lost = true;
    for (uint32_t i = 0; i < plan->num_candidates; i++) {
        uint8_t *bytes = NULL;
        size_t size = 0;
        enum fetch_outcome outcome = fetch_from(p, plan, plan->candidates[i], &bytes, &size);
        if (outcome == FETCH_GOT) {
            struct apply_ctx ctx = {.p = p, .topic = plan->topic};
            if (dds_history_decode(bytes, size, p->config->num_topics, check_sample, &ctx) == 0) {
                go_live(p, plan->topic, plan->view_id, bytes, size);
                free(bytes);
                return true;
            }
            free(bytes); /* a peer's bad bytes: ask another */
        }
        if (outcome != FETCH_INCOMPLETE)
            lost = false;
    }
    if (!lost)
        return false;
    /* Not the library's log: spindle_dds has no log of its own, and this
     * is the one event an operator must hear of. */
    fprintf(stderr,
            "spindle_dds: participant %s: the history of volatile topic %s at view %llu is lost "
            "(no member that held it is left); going on with the live samples\n",
            p->self->name, p->config->topics[plan->topic].name, (unsigned long long)plan->view_id);
    go_live(p, plan->topic, plan->view_id, NULL, 0);
    return true;
}

/* The next loading topic with a view to ask about, from topic `from` on;
 * false when there is none. */
static bool next_plan(spindle_dds_participant_t *p, uint32_t from, struct fetch_plan *plan)
{
    for (uint32_t t = from; t < p->config->num_topics; t++) {
        struct dds_topic *topic = &p->topics[t];
        if (!is_volatile(topic))
            continue;
        pthread_mutex_lock(&topic->lock);
        bool wanted = topic->loading && topic->fetch_view != 0;
        if (wanted) {
            plan->topic = t;
            plan->view_id = topic->fetch_view;
            plan->num_candidates = topic->num_candidates;
            memcpy(plan->candidates, topic->candidates,
                   topic->num_candidates * sizeof topic->candidates[0]);
            plan->max_bytes = DDS_HISTORY_MIN_BYTES +
                              (uint64_t)topic->config->history_depth *
                                  (4u + SPINDLE_DDS_SAMPLE_HEADER + topic->config->max_sample_size);
        }
        pthread_mutex_unlock(&topic->lock);
        if (wanted)
            return true;
    }
    return false;
}

static bool any_loading(spindle_dds_participant_t *p)
{
    bool loading = false;
    for (uint32_t t = 0; t < p->config->num_topics; t++) {
        pthread_mutex_lock(&p->topics[t].lock);
        loading |= p->topics[t].loading;
        pthread_mutex_unlock(&p->topics[t].lock);
    }
    return loading;
}

static void *fetcher_main(void *arg)
{
    spindle_dds_participant_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->fetch_lock);
        uint64_t generation = p->fetch_generation;
        bool stop = p->fetch_stop;
        pthread_mutex_unlock(&p->fetch_lock);
        if (stop || spindle_group_status(p->group) != 0 || !any_loading(p))
            return NULL;
        bool again = false;
        struct fetch_plan plan;
        for (uint32_t from = 0; next_plan(p, from, &plan); from = plan.topic + 1)
            again |= !fetch_topic(p, &plan);
        /* Until the next view, or a while when a member could not answer
         * yet (its copy is of a view this member has not reached). */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = until.tv_nsec + (again ? FETCH_RETRY_MS : 1000) * 1000000L;
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_mutex_lock(&p->fetch_lock);
        while (!p->fetch_stop && p->fetch_generation == generation &&
               pthread_cond_timedwait(&p->fetch_cond, &p->fetch_lock, &until) == 0) {
        }
        pthread_mutex_unlock(&p->fetch_lock);
    }
}

int dds_history_start(spindle_dds_participant_t *p)
{
    __atomic_store_n(&p->group_live, p->group, __ATOMIC_RELEASE);
    if (!any_loading(p))
        return 0;
    int rc = pthread_create(&p->fetcher, NULL, fetcher_main, p);
    if (rc != 0)
        return dds_error(SPINDLE_EIO, "participant %s: no history fetcher thread: %s",
                         p->self->name, strerror(rc));
    p->fetcher_running = true;
    return 0;
}

void dds_history_stop(spindle_dds_participant_t *p)
{
    if (!p->fetcher_running)
        return;
    pthread_mutex_lock(&p->fetch_lock);
    p->fetch_stop = true;
    pthread_cond_broadcast(&p->fetch_cond);
    pthread_mutex_unlock(&p->fetch_lock);
    pthread_join(p->fetcher, NULL);
    p->fetcher_running = false;
}

void dds_history_free(struct dds_topic *topic)
{
    for (uint32_t i = 0; i < topic->num_pending; i++)
        free(topic->pending[i].bytes);
    free(topic->pending);
    free(topic->boundary);
    topic->pending = NULL;
    topic->boundary = NULL;
    topic->num_pending = 0;
}
