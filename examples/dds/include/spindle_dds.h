/*
 * spindle_dds: DDS-style publish/subscribe over libspindle (docs/DDS.md),
 * after the OMG DDS DCPS model, in C.
 *
 * One libspindle group holds every participant (one process's membership);
 * each topic is a subgroup holding its publishers and subscribers. Topics,
 * their QoS and their members come from an INI file (spindle_dds_config_load).
 * A writer loans a slot of the topic's ring, the application builds the
 * sample in place and writes it (spindle_reserve/spindle_commit under it:
 * no copy on the send path). A reader gets samples through a listener
 * callback, or takes them from its bounded queue, which an application
 * thread waits on through a file descriptor (an eventfd).
 *
 * QoS (Spindle section 4.6), what each guarantees under failures:
 *  - UNORDERED: delivered on arrival; each writer's samples in its order;
 *    a failed writer's samples reach each survivor as a gap-free prefix,
 *    not necessarily the same one.
 *  - ATOMIC: every subscriber delivers the same samples in the same order;
 *    a failed writer's last samples are delivered by every survivor or by
 *    none (virtual synchrony).
 *  - VOLATILE: atomic, and every publisher and subscriber keeps the last
 *    history_depth samples in memory; a subscriber that joins later
 *    receives that history from one of them, then the live stream, with
 *    no gap and no duplicate (create its readers before enabling it:
 *    options.disabled). The history lives only in the members' memory:
 *    it survives as long as one member that held it does.
 *  - LOGGED: atomic with a history, and every member of the topic
 *    appends each sample to its log (libspindle's logged delivery) before
 *    delivering it; a member that joins with a log directory, new or its
 *    own, is sent what its log lacks and replays the log to readers
 *    created before enabling.
 *
 * Threads: listeners run on the library's delivery thread (keep them short;
 * copy what must outlive the call). One thread at a time may hold a loan
 * of a writer. Readers' take/read may be called from any thread.
 *
 * Errors: functions return 0 (or a documented non-negative value) or a
 * negative SPINDLE_E* code; spindle_dds_errmsg() names what was wrong.
 */
#ifndef SPINDLE_DDS_H
#define SPINDLE_DDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spindle/spindle.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most topics of one configuration (one subgroup each). */
#define SPINDLE_DDS_MAX_TOPICS 64u
/* Most participants of one configuration (members of one group). */
#define SPINDLE_DDS_MAX_PARTICIPANTS SPINDLE_MAX_MEMBERS
/* Longest topic or participant name, its NUL included. */
#define SPINDLE_DDS_NAME_MAX 64u
/* Bytes of the header every sample carries in its ring slot. */
#define SPINDLE_DDS_SAMPLE_HEADER 32u
/* Largest sample a topic may declare (the ring's slot less the header). */
#define SPINDLE_DDS_MAX_SAMPLE (SPINDLE_MAX_PAYLOAD - SPINDLE_DDS_SAMPLE_HEADER)
/* Largest history a volatile or logged topic may keep, in samples. */
#define SPINDLE_DDS_MAX_HISTORY 100000u

enum spindle_dds_qos {
    SPINDLE_DDS_UNORDERED = 0,
    SPINDLE_DDS_ATOMIC = 1,
    SPINDLE_DDS_VOLATILE = 2,
    SPINDLE_DDS_LOGGED = 3,
};

/* The name of a QoS ("unordered", "atomic", "volatile", "logged"), or
 * "unknown". */
const char *spindle_dds_qos_name(enum spindle_dds_qos qos);
/* Parses a QoS name into *out: 0, or SPINDLE_EINVAL naming the text. */
int spindle_dds_qos_parse(const char *text, enum spindle_dds_qos *out);

struct spindle_dds_participant_config {
    uint32_t id;                            /* [participant.N]: 0..SPINDLE_DDS_MAX_PARTICIPANTS-1 */
    char name[SPINDLE_DDS_NAME_MAX];        /* persistent member name; default "participant-N" */
    char host[SPINDLE_DDS_NAME_MAX];        /* default "127.0.0.1" */
    uint16_t port;                          /* required: its bootstrap and join address */
    bool founder;                           /* starts the group (else it joins a running one) */
    uint16_t client_port;                   /* external clients' listener; 0: none */
    char client_bind[SPINDLE_DDS_NAME_MAX]; /* its address, default "127.0.0.1" */
};

struct spindle_dds_topic_config {
    uint32_t id; /* [topic.N]: the topic's number, also its subgroup index */
    char name[SPINDLE_DDS_NAME_MAX];
    enum spindle_dds_qos qos;
    uint64_t publishers;      /* bit i: participant i publishes */
    uint64_t subscribers;     /* bit i: participant i subscribes */
    uint32_t max_sample_size; /* bytes, 1..SPINDLE_DDS_MAX_SAMPLE, default 1024 */
    uint32_t history_depth;   /* volatile/logged: samples kept, default 100 */
    uint32_t window;          /* ring slots per publisher, default 64 */
};

struct spindle_dds_config {
    char group_name[SPINDLE_DDS_NAME_MAX]; /* [dds] group, default "dds" */
    char log_dir[256];                     /* [dds] log_dir: root of each participant's log dir */
    char key_file[256];                    /* [dds] key_file: the group key, "" = none */
    int failure_timeout_ms;                /* [dds] failure_timeout_ms, default 2000 */
    uint32_t num_participants;
    struct spindle_dds_participant_config participants[SPINDLE_DDS_MAX_PARTICIPANTS];
    uint32_t num_topics; /* topics are numbered 0..num_topics-1 without gaps */
    struct spindle_dds_topic_config topics[SPINDLE_DDS_MAX_TOPICS];
};

/*
 * Reads an INI configuration (docs/DDS.md "Configuration"):
 *
 *   [dds]            group, founders (participant ids; default all),
 *                    log_dir, key_file, failure_timeout_ms
 *   [participant.N]  name, host, port, client_port, client_bind
 *   [topic.N]        name, qos, publishers, subscribers (participant ids),
 *                    max_sample_size, history_depth, window
 *
 * 0, or SPINDLE_ECONFIG naming the line, key and value that are wrong,
 * SPINDLE_ENOENT when the file cannot be read, SPINDLE_ENOMEM. The
 * configuration is a plain value; free() it.
 */
int spindle_dds_config_load(const char *path, struct spindle_dds_config **out);
/* The same from text (len bytes, need not end in NUL); path names it in
 * messages. */
int spindle_dds_config_parse(const char *text, size_t len, const char *path,
                             struct spindle_dds_config **out);
/* The participant or topic of that name, or NULL. */
const struct spindle_dds_participant_config *
spindle_dds_config_participant(const struct spindle_dds_config *config, const char *name);
const struct spindle_dds_topic_config *
spindle_dds_config_topic(const struct spindle_dds_config *config, const char *name);

/* The message of the last error of this thread. */
const char *spindle_dds_errmsg(void);

typedef struct spindle_dds_participant spindle_dds_participant_t;
typedef struct spindle_dds_writer spindle_dds_writer_t;
typedef struct spindle_dds_reader spindle_dds_reader_t;

struct spindle_dds_participant_options {
    /* Spindle optimizations (batching, null-sends, early unlock); all on
     * unless baseline is true. */
    bool baseline;
    /* A joining participant tries the founders' addresses in turn; set
     * join to "host:port" of any running member to use that one. */
    const char *join;
    /* Log directory of this participant (logged topics); NULL: the
     * configuration's log_dir followed by /<participant name>. */
    const char *log_dir;
    int bootstrap_timeout_ms; /* default 30000 */
    /* Create without joining (DDS's autoenable_created_entities false):
     * create the readers first, then spindle_dds_participant_enable, so
     * that a reader of a volatile or logged topic receives the history
     * whole and every later sample. A reader created after the participant
     * is enabled gets what the topic's history holds by then (its last
     * history_depth samples), and of other topics only what follows. */
    bool disabled;
};

/*
 * Creates the participant named name of config and, unless
 * options->disabled, enables it: founders start the group together
 * (collective over the founders), the others join the running group,
 * receiving the history of their volatile and logged topics. The
 * configuration, and the strings options points to, must stay valid until
 * the participant is destroyed. options may be NULL. 0 and *out, or
 * SPINDLE_EINVAL naming what was wrong (unknown name, ...), or the
 * group's error.
 */
int spindle_dds_participant_create(const struct spindle_dds_config *config, const char *name,
                                   const struct spindle_dds_participant_options *options,
                                   spindle_dds_participant_t **out);
/* Enables a participant created disabled (see above). 0, SPINDLE_EINVAL
 * when it is enabled already, or the group's error (the participant may
 * then be enabled again, or destroyed). */
int spindle_dds_participant_enable(spindle_dds_participant_t *participant);
/* Collective: every participant of the current view calls it at the end
 * of a run (spindle_group_shutdown: what each wrote is delivered
 * everywhere first). The participant must still be destroyed. */
int spindle_dds_participant_shutdown(spindle_dds_participant_t *participant, int timeout_ms);
/* Leaves the group (others go on) and releases everything, writers and
 * readers included. Safe on NULL. */
void spindle_dds_participant_destroy(spindle_dds_participant_t *participant);
/* This participant's configuration id. */
uint32_t spindle_dds_participant_id(const spindle_dds_participant_t *participant);
/* The libspindle group under it (statistics, flush, barrier); NULL until
 * the participant is enabled. */
spindle_group_t *spindle_dds_participant_group(spindle_dds_participant_t *participant);
/* Number of members of the current view. */
uint32_t spindle_dds_participant_view_size(spindle_dds_participant_t *participant);

/* A participant's client listener ([participant.N] client_port). */
struct spindle_dds_client_stats {
    uint32_t connections;     /* open now */
    uint64_t accepted;        /* connections accepted so far */
    uint64_t refused;         /* closed for a bad frame (malformed, or with a key one that
                                 does not open: altered, replayed, reordered), a missing
                                 key or a full listener */
    uint64_t dropped_samples; /* samples a client's full output could not take */
};
/* Fills *stats. 0, or SPINDLE_EINVAL when the participant has no listener
 * (no client_port, or not enabled). */
int spindle_dds_participant_client_stats(spindle_dds_participant_t *participant,
                                         struct spindle_dds_client_stats *stats);

/* What a reader learns of each sample. */
struct spindle_dds_sample_info {
    uint32_t topic;               /* topic number */
    uint32_t writer;              /* the writing participant's id */
    uint64_t seq;                 /* the writer's sequence number: 1, 2, 3 ... */
    uint64_t source_timestamp_ns; /* CLOCK_REALTIME at the writer's write */
    uint32_t length;              /* bytes of the sample */
    bool from_history;            /* handed over at a join or replayed from the log */
};

/* Writers: one per topic per participant, which must publish the topic in
 * the configuration. 0 and *out, or SPINDLE_EINVAL (unknown topic,
 * not a publisher, a writer already open), SPINDLE_ENOMEM. */
int spindle_dds_writer_create(spindle_dds_participant_t *participant, const char *topic,
                              spindle_dds_writer_t **out);
void spindle_dds_writer_destroy(spindle_dds_writer_t *writer);
/* Loans room for a sample of up to size bytes in the topic's ring; blocks
 * while the window is full or a view change is under way unless nonblock
 * (then SPINDLE_EAGAIN: spindle_reserve, send_ready follows). *sample
 * is where to build it. SPINDLE_EMSGSIZE above max_sample_size,
 * SPINDLE_EINVAL when a loan is already open, or spindle_reserve's errors. */
int spindle_dds_writer_loan(spindle_dds_writer_t *writer, size_t size, bool nonblock,
                            void **sample);
/* Writes the loaned sample with its first length bytes (<= the loan):
 * stamps the header (sequence number, source time) and commits. Returns
 * the sample's sequence number (> 0), or SPINDLE_EINVAL without a loan
 * or with a length above it. */
int64_t spindle_dds_writer_write(spindle_dds_writer_t *writer, size_t length);
/* Convenience: loan, copy, write (blocking). Returns the sequence number. */
int64_t spindle_dds_write(spindle_dds_writer_t *writer, const void *data, size_t length);

/* Listener: runs on the library's delivery thread for each sample, data
 * valid only during the call, with the topic's lock held: it may take
 * from queues, but must not create or destroy readers or call into the
 * group (an upcall's rules, include/spindle/group.h). */
typedef void (*spindle_dds_listener_fn)(void *ctx, const struct spindle_dds_sample_info *info,
                                        const void *data);

struct spindle_dds_reader_options {
    spindle_dds_listener_fn listener; /* NULL: none */
    void *listener_ctx;
    /* Samples the queue holds (0: no queue, listener only); when full, the
     * oldest is dropped and counted (spindle_dds_reader_lost). */
    uint32_t queue_depth;
};

/* Readers: one per topic per participant, which must subscribe the topic
 * in the configuration. A reader of a volatile or logged topic first gets
 * the history the participant holds, then the live stream. */
int spindle_dds_reader_create(spindle_dds_participant_t *participant, const char *topic,
                              const struct spindle_dds_reader_options *options,
                              spindle_dds_reader_t **out);
void spindle_dds_reader_destroy(spindle_dds_reader_t *reader);
/* Removes the oldest queued sample: copies up to capacity bytes into
 * buffer and its info into *info. Returns the sample's length (which may
 * exceed capacity: the rest is dropped), or SPINDLE_EAGAIN when the queue
 * is empty. */
int spindle_dds_take(spindle_dds_reader_t *reader, void *buffer, size_t capacity,
                     struct spindle_dds_sample_info *info);
/* As take, but leaves the sample queued. */
int spindle_dds_read(spindle_dds_reader_t *reader, void *buffer, size_t capacity,
                     struct spindle_dds_sample_info *info);
/* A descriptor readable while the queue holds samples (poll it only).
 * SPINDLE_EINVAL when the reader has no queue. */
int spindle_dds_reader_fd(spindle_dds_reader_t *reader);
/* Waits up to timeout_ms (< 0: no limit) for a queued sample: 1 when one
 * is queued, 0 on timeout. */
int spindle_dds_reader_wait(spindle_dds_reader_t *reader, int timeout_ms);
/* Samples dropped from a full queue. */
uint64_t spindle_dds_reader_lost(spindle_dds_reader_t *reader);

/*
 * External clients (docs/DDS.md "External clients"): a process that is not
 * a group member publishes and subscribes through a participant that has
 * a client listener ([participant.N] client_port), over TCP. When that
 * member fails, the client connects to the next member of its list and
 * subscribes again. Samples keep their writer and per-writer sequence
 * number end to end, so the client tells what it missed (a gap) and what
 * it received twice (a duplicate, e.g. from a history replayed after a
 * failover). One thread at a time may use a client.
 */
typedef struct spindle_dds_client spindle_dds_client_t;

/* Most members a client may list. */
#define SPINDLE_DDS_CLIENT_MAX_MEMBERS 16u

struct spindle_dds_client_options {
    /* "host:port" of members' client listeners, tried in this order, and
     * after a failure from the next one on. */
    const char *const *members;
    uint32_t num_members;
    /* The group key (docs/SECURITY.md) when the group has one; NULL: none. */
    const char *key_file;
    int timeout_ms;       /* connecting, and each reply; default 10000 */
    uint32_t queue_depth; /* samples held while a reply is awaited; default 65536 */
};

/* What a client learns of each sample. */
struct spindle_dds_client_sample_info {
    struct spindle_dds_sample_info sample; /* topic, writer, seq, time, length, from_history */
    uint32_t member;                       /* the participant that relayed it */
    /* seq is at or below the last one received of this writer on this
     * topic: received before (after a failover, or a history replay). */
    bool duplicate;
    /* Samples of this writer skipped before this one: seq - last - 1 when
     * seq is above last + 1 (0 for the writer's first sample seen). */
    uint64_t missed;
};

/*
 * Connects to the first member of options->members that answers and
 * proves the group key when key_file is given (and the member's group
 * has one). 0 and *out, or SPINDLE_EINVAL (options), SPINDLE_EAUTH (a
 * member refused the key, or the client has none and the group one),
 * SPINDLE_EUNREACH naming the members tried, SPINDLE_ENOMEM.
 */
int spindle_dds_client_connect(const struct spindle_dds_client_options *options,
                               spindle_dds_client_t **out);
/* Closes the connection. Safe on NULL. */
void spindle_dds_client_close(spindle_dds_client_t *client);
/*
 * Subscribes to topic through the member (which must publish or subscribe
 * it). With history, a volatile or logged topic's history as the member
 * holds it comes first (from_history), then the live stream. The client
 * subscribes again, with the same flag, to each member it fails over to.
 * 0, or the member's refusal (SPINDLE_ENOENT unknown topic, SPINDLE_EPERM
 * a member outside the topic) with its text, or a connection error.
 */
int spindle_dds_client_subscribe(spindle_dds_client_t *client, const char *topic, bool history);
/*
 * Publishes length bytes on topic through the member's writer of it (the
 * member must publish the topic; its application must not hold a writer of
 * it). Returns the sample's sequence number (> 0) and, in *writer (may be
 * NULL), the relaying participant's id: the (writer, seq) subscribers see.
 * SPINDLE_EPEERFAILED when the member failed before confirming: the
 * sample may or may not have been written, and the client is connected to
 * another member (publish again, and a subscriber may get both copies).
 */
int64_t spindle_dds_client_publish(spindle_dds_client_t *client, const char *topic,
                                   const void *data, size_t length, uint32_t *writer);
/*
 * Takes the next sample, waiting up to timeout_ms (< 0: no limit): its
 * length (up to capacity bytes copied; the rest is dropped), or
 * SPINDLE_EAGAIN on timeout (0: only what has arrived). A member's failure,
 * or malformed bytes from it, is handled inside (the next member,
 * subscriptions again); SPINDLE_EUNREACH (SPINDLE_EAUTH: a refused key)
 * when no member answers.
 */
int spindle_dds_client_receive(spindle_dds_client_t *client, void *buffer, size_t capacity,
                               struct spindle_dds_client_sample_info *info, int timeout_ms);
/* The connection's descriptor, for poll (POLLIN): call receive with
 * timeout 0 until SPINDLE_EAGAIN before waiting on it (samples that came
 * with replies wait in the client), and ask again after each call, since a
 * failover changes it. SPINDLE_EINVAL when no member is connected. */
int spindle_dds_client_fd(const spindle_dds_client_t *client);
/* The participant id of the member in use. */
uint32_t spindle_dds_client_member(const spindle_dds_client_t *client);
/* Failovers so far (connections to another member after a failure). */
uint64_t spindle_dds_client_failovers(const spindle_dds_client_t *client);
/* The last sequence number received of writer on topic (0: none). */
uint64_t spindle_dds_client_last_seq(const spindle_dds_client_t *client, uint32_t topic,
                                     uint32_t writer);

#ifdef __cplusplus
}
#endif

#endif
