/*
 * The on-disk format of a member's log (docs/LOGS.md): segment file
 * headers and records, encoded and decoded. Pure functions over bytes; no
 * I/O, no state, so any thread may call them.
 *
 * A log is a directory of segment files. A segment opens with a 32-byte
 * header naming the position (record ordinal) of its first record; records
 * follow back to back, each a 24-byte header (CRC-32C, body length, type,
 * position) and a body. Integers are little-endian. Bytes read back from a
 * file are untrusted: the decoders check every length, count and reserved
 * byte, and the checksum, before anything is used.
 */
#ifndef SP_LOG_LOG_FORMAT_H
#define SP_LOG_LOG_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include <spindle/group.h>
#include <spindle/view.h>

#define LOG_FORMAT_VERSION      1u
#define LOG_SEGMENT_HEADER_SIZE 32u
#define LOG_RECORD_HEADER_SIZE  24u
/* The fixed part of a message record's body; the payload follows. */
#define LOG_MESSAGE_FIXED_SIZE 36u
/* Largest body any record may have: a message of SPINDLE_MAX_PAYLOAD bytes
 * (a view record is smaller). A longer length field is corruption. */
#define LOG_MAX_BODY   (LOG_MESSAGE_FIXED_SIZE + SPINDLE_MAX_PAYLOAD)
#define LOG_MAX_RECORD (LOG_RECORD_HEADER_SIZE + LOG_MAX_BODY)
/* "<20-digit first position>.seg": zero-padded, so names sort as positions. */
#define LOG_SEGMENT_NAME_SIZE 24u

enum log_record_type {
    LOG_REC_MESSAGE = 1, /* a message this member delivered */
    LOG_REC_VIEW = 2,    /* a view this member installed */
};

/* A delivered message. payload points into the decoded bytes (or, when
 * encoding, at the caller's). */
struct log_message {
    uint32_t subgroup;
    uint32_t sender_id;    /* the sender's member id */
    uint64_t sender_index; /* the sender's message number in the subgroup */
    uint64_t seq;          /* global sequence number in the subgroup, in its view */
    uint64_t view_id;      /* the view it was delivered in */
    uint32_t length;       /* payload bytes, <= SPINDLE_MAX_PAYLOAD */
    const uint8_t *payload;
};

/* An installed view and what this member delivered before installing it. */
struct log_view {
    uint64_t view_id;
    uint32_t member_count;                 /* 1..SPINDLE_MAX_MEMBERS */
    uint32_t subgroup_count;               /* 0..SPINDLE_MAX_SUBGROUPS */
    uint32_t members[SPINDLE_MAX_MEMBERS]; /* member ids in rank order, distinct, < 64 */
    /* Per subgroup: one past the last global sequence number delivered in
     * the previous view (the ragged-edge trim delivered up to). */
    uint64_t delivered_through[SPINDLE_MAX_SUBGROUPS];
};

struct log_record {
    uint16_t type;     /* enum log_record_type */
    uint64_t position; /* the record's ordinal in the log, from 0 */
    union {
        struct log_message message;
        struct log_view view;
    };
};

/* 0 when the format can hold record (what the decoder would accept), or
 * SPINDLE_EINVAL naming the field and its value. */
int log_record_check(const struct log_record *record);

/* Bytes the record takes on disk (header and body). */
size_t log_record_size(const struct log_record *record);

/*
 * Encodes record (header with its checksum, then body) into buf when cap
 * is enough; returns its size either way (log_record_size).
 */
size_t log_record_encode(const struct log_record *record, uint8_t *buf, size_t cap);

/*
 * Decodes the record at the start of buf (len bytes; more may follow).
 * 1 and *size (its bytes) for a whole valid record; 0 when buf holds only
 * part of one, *size then the bytes needed so far (at least the header,
 * then the whole record); SPINDLE_EPROTO ("log record: <field> ... at
 * offset N") for a bad length, type, reserved byte, checksum or body.
 * A message's payload points into buf.
 */
int log_record_decode(const uint8_t *buf, size_t len, struct log_record *record, size_t *size);

/* Encodes a segment header for first_position into out. */
void log_segment_header_encode(uint64_t first_position, uint8_t out[LOG_SEGMENT_HEADER_SIZE]);

/* Decodes a segment header: 0 and *first_position, or SPINDLE_EPROTO
 * ("log segment header: ...") for a bad magic, version, size, reserved
 * byte or checksum. */
int log_segment_header_decode(const uint8_t *buf, size_t len, uint64_t *first_position);

/* Writes the name of the segment starting at first_position into name. */
void log_segment_name(uint64_t first_position, char name[LOG_SEGMENT_NAME_SIZE + 1]);

/* 1 and *first_position when name is a segment's name, 0 otherwise. */
int log_segment_name_parse(const char *name, uint64_t *first_position);

#endif
