/*
 * Sample records for the log tests: message i of a deterministic stream
 * (its payload, length and fields derived from i and a salt) and a view,
 * written through the appender and checked on the way back.
 */
#ifndef SPINDLE_TESTS_LOG_SAMPLES_H
#define SPINDLE_TESTS_LOG_SAMPLES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log_append.h"

#define SAMPLE_MAX_PAYLOAD 300u

struct sample_payload {
    uint8_t bytes[SAMPLE_MAX_PAYLOAD];
};

/* Message i of the stream of salt: payload (0..299 bytes) into storage. */
static inline struct log_record sample_message(uint64_t i, uint32_t salt,
                                               struct sample_payload *storage)
{
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_MESSAGE;
    uint32_t length = (uint32_t)((i * 37 + salt) % SAMPLE_MAX_PAYLOAD);
    for (uint32_t b = 0; b < length; b++)
        storage->bytes[b] = (uint8_t)(i * 131 + b * 7 + salt);
    record.message = (struct log_message){
        .subgroup = (uint32_t)(i % 3),
        .sender_id = (uint32_t)(i % 5),
        .sender_index = i / 5,
        .seq = i,
        .view_id = 1 + i / 100,
        .length = length,
        .payload = storage->bytes,
    };
    return record;
}

static inline struct log_record sample_view(uint64_t view_id)
{
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_VIEW;
    record.view.view_id = view_id;
    record.view.member_count = 3;
    record.view.members[0] = 4;
    record.view.members[1] = 0;
    record.view.members[2] = 9;
    record.view.subgroup_count = 2;
    record.view.delivered_through[0] = view_id * 10;
    record.view.delivered_through[1] = view_id * 10 + 3;
    return record;
}

/* True when got is message i of the stream of salt, field by field. */
static inline int sample_message_matches(const struct log_record *got, uint64_t i, uint32_t salt)
{
    struct sample_payload storage;
    struct log_record want = sample_message(i, salt, &storage);
    const struct log_message *a = &got->message, *b = &want.message;
    return got->type == LOG_REC_MESSAGE && a->subgroup == b->subgroup &&
           a->sender_id == b->sender_id && a->sender_index == b->sender_index && a->seq == b->seq &&
           a->view_id == b->view_id && a->length == b->length &&
           memcmp(a->payload, b->payload, b->length) == 0;
}

/*
 * Appends messages first..first+count-1 of the stream of salt to the log
 * in dir, in batches of batch records, waiting for each; 0 or the error.
 */
static inline int sample_append(const char *dir, uint64_t first, uint64_t count, uint32_t salt,
                                size_t batch, const struct log_appender_options *options)
{
    struct log *log;
    int rc = log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, NULL);
    if (rc < 0)
        return rc;
    struct log_appender *app;
    rc = log_appender_start(log, options, &app);
    struct log_record records[64];
    struct sample_payload payloads[64];
    for (uint64_t done = 0; rc == 0 && done < count;) {
        size_t n = 0;
        for (; n < batch && n < 64 && done + n < count; n++)
            records[n] = sample_message(first + done + n, salt, &payloads[n]);
        uint64_t end;
        rc = log_appender_submit(app, records, n, &end);
        if (rc == 0)
            rc = log_appender_wait(app, end, 10000);
        done += n;
    }
    int stopped = log_appender_stop(app); /* NULL when start failed */
    log_close(log);
    return rc < 0 ? rc : stopped;
}

/*
 * A test program's main: runs count cmocka tests (cmocka.h included
 * before this header) with root, a fresh directory /tmp/<prefix>-XXXXXX,
 * removed afterwards. Returns the failures.
 */
#define SAMPLE_RUN_IN_ROOT(root, prefix, tests)                                                    \
    sample_run_in_root(root, sizeof(root), prefix, tests, sizeof(tests) / sizeof((tests)[0]))

static inline int sample_run_in_root(char *root, size_t size, const char *prefix,
                                     const struct CMUnitTest *tests, size_t count)
{
    snprintf(root, size, "/tmp/%s-XXXXXX", prefix);
    if (mkdtemp(root) == NULL)
        return 1;
    int failed = _cmocka_run_group_tests(prefix, tests, count, NULL, NULL);
    char cleanup[160];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", root);
    if (system(cleanup) != 0)
        failed++;
    return failed;
}

#endif
