/*
 * The catch-up stream (docs/LOGS.md "Restart of one member"): what the
 * member that admits a logged joiner sends it, as the bytes of the
 * joiner's state (view_join_state.c carries them in chunks):
 *
 *   header    16 bytes: magic "SPNDLCUP", u16 version, u16 flags
 *             (LOG_CATCHUP_RESET), u32 snapshot count (<= 256)
 *   snapshots each a u64 length, then a snapshot file's bytes
 *             (log/log_snapshot.h: header, view record, state)
 *   records   log records back to back, in the sender's log order, each in
 *             the log's own encoding (log_format.h), to the stream's end
 *
 * Integers are little-endian. Records are self-delimiting, so the stream
 * costs its header and 8 bytes a snapshot beyond the bytes the log itself
 * stores. RESET says that the joiner's log is too old to be continued
 * (the sender compacted what lies between): it starts over from the
 * snapshots and the records that follow.
 *
 * The joiner's parser takes the stream in pieces of any size (chunks need
 * not end on a record) and hands each whole snapshot and record to its
 * caller. The bytes come from another process: the header, each snapshot
 * (its header, view record, length and state checksum) and each record are
 * decoded strictly; what they say (which subgroups, which order) is the
 * caller's to check. A record split across pieces is gathered in a buffer
 * of one largest record; a snapshot is gathered whole, growing only as its
 * bytes arrive.
 *
 * Threads: a parser is used by one thread at a time; the functions keep
 * no other state.
 */
#ifndef SP_LOG_LOG_CATCHUP_H
#define SP_LOG_LOG_CATCHUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/log_format.h"
#include "log/log_snapshot.h"

#define LOG_CATCHUP_VERSION     1u
#define LOG_CATCHUP_HEADER_SIZE 16u
/* Header flag: the joiner's log starts over (see above). */
#define LOG_CATCHUP_RESET 1u
/* Bytes before each snapshot's file bytes: its length. */
#define LOG_CATCHUP_SNAPSHOT_PREFIX 8u

/* Writes the stream's header. */
void log_catchup_header_encode(uint16_t flags, uint32_t snapshot_count,
                               uint8_t out[LOG_CATCHUP_HEADER_SIZE]);
/* Writes the length that precedes a snapshot's bytes. */
void log_catchup_snapshot_prefix_encode(uint64_t length, uint8_t out[LOG_CATCHUP_SNAPSHOT_PREFIX]);

/* What the parser hands over; 0, or a negative SPINDLE_E* code that stops
 * the stream (the parser returns it). Pointers are valid only during the
 * call. on_header: the header's flags and snapshot count, once.
 * on_snapshot: a whole, checked snapshot and its state. on_record: one
 * whole record. */
struct log_catchup_sink {
    int (*on_header)(void *ctx, uint16_t flags, uint32_t snapshot_count);
    int (*on_snapshot)(void *ctx, const struct log_snapshot *snap, const uint8_t *state);
    int (*on_record)(void *ctx, const struct log_record *record);
    void *ctx;
};

struct log_catchup_parser {
    struct log_catchup_sink sink;
    uint8_t header[LOG_CATCHUP_HEADER_SIZE];
    size_t header_have;
    uint32_t snapshots_left; /* snapshots still to come */
    uint8_t prefix[LOG_CATCHUP_SNAPSHOT_PREFIX];
    size_t prefix_have;
    uint64_t snapshot_length; /* the current snapshot's, once its prefix is in */
    uint8_t *snapshot;        /* its bytes so far */
    size_t snapshot_have, snapshot_cap;
    uint8_t *carry;   /* LOG_MAX_RECORD bytes: a record split across pieces */
    size_t have;      /* bytes of it so far */
    uint64_t offset;  /* stream bytes taken so far, for messages */
    uint64_t records; /* records handed over */
    uint64_t snapshots;
};

/* 0, or SPINDLE_ENOMEM. */
int log_catchup_parser_init(struct log_catchup_parser *p, const struct log_catchup_sink *sink);
void log_catchup_parser_free(struct log_catchup_parser *p);

/*
 * Takes the next length bytes of the stream. 0; SPINDLE_EPROTO naming the
 * stream offset and what was wrong (a bad header, snapshot or record);
 * SPINDLE_ENOMEM; or the sink's error.
 */
int log_catchup_feed(struct log_catchup_parser *p, const uint8_t *data, size_t length);

/* The stream ended: 0 when it ended after its header and snapshots and a
 * whole record (or none), SPINDLE_EPROTO otherwise. */
int log_catchup_finish(const struct log_catchup_parser *p);

#endif
