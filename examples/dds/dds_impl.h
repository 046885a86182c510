/*
 * spindle_dds internals: the sample header and the history state codecs
 * (dds_sample.c), the participant's per-topic state (dds_participant.c),
 * readers (dds_reader.c) and writers (dds_writer.c).
 *
 * Threads: a topic's mutex guards its history and its reader pointer; the
 * delivery upcall, state_save/state_load, the replay upcall and reader
 * creation take it. Nothing here calls into the group with it held.
 * Invariant: a topic's history holds at most history_depth samples, oldest
 * first, each a whole ring payload (header and sample bytes).
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

/* --- history state (what a joiner is handed) ---
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

/* The layout rule (docs/DDS.md "Model"): members are the view's
 * members that publish or subscribe the topic, senders its publishers,
 * in rank order; the leader (rank 0) is added to volatile and logged
 * topics (it hands joiners their history) and to a topic no member of
 * the view uses (a subgroup is never empty). names[rank] are the members'
 * names; a name the configuration lacks takes part in no topic. 0, or
 * SPINDLE_EINVAL for a view of 0 or more than SPINDLE_MAX_MEMBERS. */
int dds_layout_topics(const struct spindle_dds_config *config, const char *const *names,
                      uint32_t num_members, struct spindle_subgroup_layout *layouts);

#endif
