/*
 * spindle_dds internals: the sample header, history state and history
 * query codecs (dds_sample.c), a volatile topic's history for joiners
 * (dds_history.c), the participant's per-topic state (dds_participant.c),
 * readers (dds_reader.c) and writers (dds_writer.c).
 *
 * Threads: a topic's mutex guards its history, its boundary copy, its
 * loading state and its reader pointer; the delivery, view, point-to-point
 * and replay upcalls, the history fetcher (dds_history.c) and reader
 * creation take it. Nothing here calls into the group with it held.
 * Invariants: a topic's history holds at most history_depth samples, oldest
 * first, each a whole ring payload (header and sample bytes); while a
 * topic is loading, its deliveries wait in its pending list, in order, and
 * reach neither its history nor its reader.
 */
#ifndef SPINDLE_DDS_IMPL_H
#define SPINDLE_DDS_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle_dds.h"

/* Records the message of this thread's last error (spindle_dds_errmsg). */
void dds_error_record(const char *format, ...) __attribute__((format(printf, 1, 2)));
/* Records the message and evaluates to code, a constant the caller
 * returns (as the library's sp_error). */
#define dds_error(code, ...) (dds_error_record(__VA_ARGS__), (code))

/* --- sample header (SPINDLE_DDS_SAMPLE_HEADER bytes, little-endian) ---
 *   0 u32 magic "SDDS"   4 u16 version (1)   6 u16 topic
 *   8 u32 writer        12 u32 length       16 u64 seq   24 u64 time (ns) */
#define DDS_SAMPLE_MAGIC   0x53444453u
#define DDS_SAMPLE_VERSION 1u

void dds_sample_header_encode(uint8_t *out, const struct spindle_dds_sample_info *info);
/* Decodes the header at the start of bytes (size bytes: the whole ring
 * payload) into *info. 0, or SPINDLE_EPROTO naming the wrong field. */
int dds_sample_header_decode(const uint8_t *bytes, size_t size,
                             struct spindle_dds_sample_info *info);

/* --- history state (what a joiner is handed: dds_history.c) ---
 *   u32 magic "SDHS", u32 topics, then per topic: u32 topic, u32 count,
 *   then count times: u32 bytes, that many bytes (one ring payload). */
#define DDS_HISTORY_MAGIC 0x53444853u

/* Called per sample of a decoded state; returns 0 or an error to stop. */
typedef int (*dds_history_fn)(void *ctx, uint32_t topic, const uint8_t *payload, size_t size);
/* Walks a state, checking every length and every sample header before
 * calling fn; topics at or above num_topics are refused. 0, SPINDLE_EPROTO
 * naming what is wrong, or fn's error. */
int dds_history_decode(const uint8_t *bytes, size_t size, uint32_t num_topics, dds_history_fn fn,
                       void *ctx);

/* --- history queries (point-to-point, docs/DDS.md "Late subscribers") ---
 * A loading member asks a member of the topic for the history at the
 * start of a view, in chunks:
 *   query: u32 magic "SDHQ", u32 topic, u64 view, u64 offset
 *   reply: u32 magic "SDHR", u32 status, u32 topic, u32 chunk length,
 *          u64 view, u64 total, u64 offset, then the chunk
 * The bytes a reply's chunks make up are a history state (above) of that
 * topic alone. */
#define DDS_HQUERY_MAGIC      0x53444851u
#define DDS_HREPLY_MAGIC      0x53444852u
#define DDS_HQUERY_SIZE       24u
#define DDS_HREPLY_HEADER     40u
#define DDS_HREPLY_MAX_CHUNK  (SPINDLE_P2P_MAX_PAYLOAD - DDS_HREPLY_HEADER)
#define DDS_HISTORY_MIN_BYTES 16u /* a state of one topic and no sample */
#define DDS_HISTORY_MAX_BYTES                                                                      \
    (DDS_HISTORY_MIN_BYTES + (uint64_t)SPINDLE_DDS_MAX_HISTORY *                                   \
                                 (4u + SPINDLE_DDS_SAMPLE_HEADER + SPINDLE_DDS_MAX_SAMPLE))

enum dds_hreply_status {
    DDS_HREPLY_OK = 0,         /* a chunk of the history asked for */
    DDS_HREPLY_OTHER_VIEW = 1, /* the member's copy is of another view: ask again later */
    DDS_HREPLY_INCOMPLETE = 2, /* the member was loading itself when that view began */
};

struct dds_history_query {
    uint32_t topic;
    uint64_t view_id; /* the history at the start of this view */
    uint64_t offset;  /* into its encoding */
};

struct dds_history_reply {
    uint32_t status; /* enum dds_hreply_status */
    uint32_t topic;
    uint64_t view_id;
    uint64_t total; /* the encoding's length (DDS_HREPLY_OK) */
    uint64_t offset;
    const uint8_t *chunk; /* chunk_length bytes at offset; into the decoded bytes */
    uint32_t chunk_length;
};

/* Writes DDS_HQUERY_SIZE bytes. */
void dds_history_query_encode(uint8_t *out, const struct dds_history_query *query);
/* Exactly DDS_HQUERY_SIZE bytes, the magic, a topic below num_topics, an
 * offset below DDS_HISTORY_MAX_BYTES. 0, or SPINDLE_EPROTO naming what is
 * wrong. */
int dds_history_query_decode(const uint8_t *bytes, size_t size, uint32_t num_topics,
                             struct dds_history_query *query);
/* Writes DDS_HREPLY_HEADER + chunk_length bytes (at most
 * SPINDLE_P2P_MAX_PAYLOAD: chunk_length <= DDS_HREPLY_MAX_CHUNK); returns
 * how many. */
size_t dds_history_reply_encode(uint8_t *out, const struct dds_history_reply *reply);
/* The magic, a known status, a topic below num_topics, a chunk length that
 * is what follows the header; with DDS_HREPLY_OK a total within
 * DDS_HISTORY_MIN_BYTES..DDS_HISTORY_MAX_BYTES and a non-empty chunk
 * inside it, otherwise no chunk, total or offset. The caller checks view,
 * topic and offset against its query. 0, or SPINDLE_EPROTO naming what is
 * wrong. */
int dds_history_reply_decode(const uint8_t *bytes, size_t size, uint32_t num_topics,
                             struct dds_history_reply *reply);

/* One kept sample: a copy of its ring payload. */
struct dds_kept {
    uint8_t *bytes;
    uint32_t size;
    bool from_history;
};

/* A bounded FIFO of kept samples (history and reader queues alike). */
struct dds_fifo {
    struct dds_kept *items;
    uint32_t capacity, start, count;
    uint64_t dropped;
};
int dds_fifo_init(struct dds_fifo *fifo, uint32_t capacity);
void dds_fifo_free(struct dds_fifo *fifo);
/* Appends a copy of bytes, dropping the oldest when full. 0 or
 * SPINDLE_ENOMEM. */
int dds_fifo_push(struct dds_fifo *fifo, const uint8_t *bytes, size_t size, bool from_history);
/* The i-th oldest (i < count). */
const struct dds_kept *dds_fifo_at(const struct dds_fifo *fifo, uint32_t i);
void dds_fifo_pop(struct dds_fifo *fifo);

/* Encodes the histories of the given fifos (NULL entries skipped): a
 * malloc'ed state in *out. 0 or SPINDLE_ENOMEM. */
int dds_history_encode(struct dds_fifo *const *fifos, uint32_t num_topics, uint8_t **out,
                       size_t *size);

struct dds_topic {
    const struct spindle_dds_topic_config *config;
    pthread_mutex_t lock;
    bool keeps_history;      /* volatile or logged */
    struct dds_fifo history; /* when keeps_history */
    struct spindle_dds_reader *reader;
    struct spindle_dds_writer *writer;
    uint64_t bad_samples; /* refused by the header decoder */
    /* Volatile topics (dds_history.c). seen_view: the latest view whose
     * deliveries have begun here; boundary: the history as it began,
     * encoded (a history state of this topic), complete unless this
     * member was loading then. */
    uint64_t seen_view;
    uint8_t *boundary;
    size_t boundary_size;
    bool boundary_complete;
    /* Loading: this member joined and waits for the history at the start
     * of fetch_view (0: its first view is not reported yet) from one of
     * candidates (member ids), keeping its deliveries in pending. */
    bool loading;
    uint64_t fetch_view;
    uint32_t candidates[SPINDLE_MAX_MEMBERS];
    uint32_t num_candidates;
    struct dds_pending *pending;
    uint32_t num_pending, pending_capacity;
};

/* A delivery kept while its topic loads. */
struct dds_pending {
    uint8_t *bytes;
    uint32_t size;
    uint64_t view_id;
};

struct spindle_dds_participant {
    const struct spindle_dds_config *config;
    const struct spindle_dds_participant_config *self;
    spindle_group_t *group;
    struct spindle_dds_participant_options options; /* as given (strings: the caller's) */
    struct dds_topic topics[SPINDLE_DDS_MAX_TOPICS];
    uint32_t view_size; /* atomic */
    char log_dir[512];
    /* The external clients' listener (client_port); atomic: the delivery
     * thread relays to it. */
    struct dds_client_server *clients;
    /* The group once spindle_group_create returned (atomic: upcalls may
     * run before). */
    spindle_group_t *group_live;
    /* The history fetcher (dds_history.c): runs while any topic loads.
     * fetch_lock guards fetch_stop and fetch_generation (bumped by each
     * view), which fetch_cond signals; taken after a topic's lock, never
     * before it. */
    pthread_t fetcher;
    bool fetcher_running;
    pthread_mutex_t fetch_lock;
    pthread_cond_t fetch_cond;
    bool fetch_stop;
    uint64_t fetch_generation;
};

struct spindle_dds_writer {
    spindle_dds_participant_t *participant;
    struct dds_topic *topic;
    uint64_t next_seq;
    uint8_t *loan; /* the slot, header first; NULL when no loan is open */
    size_t loan_size;
};

struct spindle_dds_reader {
    spindle_dds_participant_t *participant;
    struct dds_topic *topic;
    spindle_dds_listener_fn listener;
    void *listener_ctx;
    pthread_mutex_t lock; /* the queue */
    struct dds_fifo queue;
    bool has_queue;
    int event_fd;
};

/* The group of an enabled participant; NULL, with the error recorded,
 * before spindle_dds_participant_enable. */
spindle_group_t *dds_participant_group(spindle_dds_participant_t *participant);

/* Hands one sample (a whole ring payload, its header decoded) to a reader:
 * listener, then queue. Called with the topic's lock held. */
void dds_reader_deliver(struct spindle_dds_reader *reader,
                        const struct spindle_dds_sample_info *info, const uint8_t *payload);

/* Hands one sample to its topic's history, reader and client relays
 * (dds_participant.c). Called with the topic's lock held. */
void dds_deliver_one(spindle_dds_participant_t *p, struct dds_topic *topic, const uint8_t *payload,
                     size_t size, bool from_history);

/* --- volatile topics' history at view boundaries (dds_history.c) --- */
/* Marks the volatile topics this joining participant is a member of as
 * loading, before its group exists. */
void dds_history_mark_joiner(spindle_dds_participant_t *p);
/* Records the group for the upcalls and starts the fetcher if a topic
 * loads. 0, or SPINDLE_EIO naming pthread_create's error. */
int dds_history_start(spindle_dds_participant_t *p);
/* Stops and joins the fetcher (before the group is destroyed). */
void dds_history_stop(spindle_dds_participant_t *p);
/* A delivery of a volatile topic (its lock held): takes the boundary copy
 * at the first delivery of a view, then keeps the sample pending while
 * the topic loads. true: the caller delivers it. */
bool dds_history_on_deliver(struct dds_topic *topic, const struct spindle_message *message);
/* A new view: boundary copies, and the loading topics' candidates. */
void dds_history_on_view(spindle_dds_participant_t *p, const struct spindle_view_info *view);
/* A history query from a loading member: answered at once. */
void dds_history_on_query(spindle_dds_participant_t *p, const struct spindle_p2p_message *message);
/* Frees a topic's boundary copy and pending list. */
void dds_history_free(struct dds_topic *topic);

/* The layout rule (docs/DDS.md "Model"): members are the view's
 * members that publish or subscribe the topic, senders its publishers,
 * in rank order; the leader (rank 0) is added to logged topics (a joiner's
 * log catch-up comes from its log) and to a topic no member of the view
 * uses (a subgroup is never empty). names[rank] are the members'
 * names; a name the configuration lacks takes part in no topic. 0, or
 * SPINDLE_EINVAL for a view of 0 or more than SPINDLE_MAX_MEMBERS. */
int dds_layout_topics(const struct spindle_dds_config *config, const char *const *names,
                      uint32_t num_members, struct spindle_subgroup_layout *layouts);

#endif
