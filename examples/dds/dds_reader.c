/*
 * Readers: the listener runs where the sample is delivered; the queue
 * keeps copies for take/read, and its eventfd is readable while it holds
 * any.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "dds_impl.h"

static void signal_fd(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* a counter at its limit is readable already */
}

static void drain_fd(int fd)
{
    uint64_t value;
    ssize_t n = read(fd, &value, sizeof value);
    (void)n; /* EAGAIN: nothing to drain */
}

void dds_reader_deliver(struct spindle_dds_reader *reader,
                        const struct spindle_dds_sample_info *info, const uint8_t *payload)
{
    if (reader->listener != NULL)
        reader->listener(reader->listener_ctx, info, payload + SPINDLE_DDS_SAMPLE_HEADER);
    if (!reader->has_queue)
        return;
    pthread_mutex_lock(&reader->lock);
    bool was_empty = reader->queue.count == 0;
    int rc = dds_fifo_push(&reader->queue, payload, SPINDLE_DDS_SAMPLE_HEADER + info->length,
                           info->from_history);
    if (rc < 0)
        reader->queue.dropped++;
    if (rc == 0 && was_empty)
        signal_fd(reader->event_fd);
    pthread_mutex_unlock(&reader->lock);
}

int spindle_dds_reader_create(spindle_dds_participant_t *participant, const char *topic_name,
                              const struct spindle_dds_reader_options *options,
                              spindle_dds_reader_t **out)
{
    if (participant == NULL || options == NULL || out == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL participant, options or out");
    const struct spindle_dds_topic_config *config =
        spindle_dds_config_topic(participant->config, topic_name);
    if (config == NULL)
        return dds_error(SPINDLE_EINVAL, "topic \"%s\" is not in the configuration",
                         topic_name != NULL ? topic_name : "(null)");
    if (((config->subscribers >> participant->self->id) & 1u) == 0)
        return dds_error(SPINDLE_EINVAL, "participant %s does not subscribe topic %s",
                         participant->self->name, config->name);
    if (options->queue_depth > SPINDLE_DDS_MAX_HISTORY * 10u)
        return dds_error(SPINDLE_EINVAL, "queue_depth %u exceeds %u", options->queue_depth,
                         SPINDLE_DDS_MAX_HISTORY * 10u);
    spindle_dds_reader_t *reader = calloc(1, sizeof *reader);
    if (reader == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for a reader of %s", config->name);
    reader->participant = participant;
    reader->topic = &participant->topics[config->id];
    reader->listener = options->listener;
    reader->listener_ctx = options->listener_ctx;
    reader->has_queue = options->queue_depth > 0;
    reader->event_fd = -1;
    pthread_mutex_init(&reader->lock, NULL);
    int rc = dds_fifo_init(&reader->queue, options->queue_depth);
    if (rc == 0 && reader->has_queue) {
        reader->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (reader->event_fd < 0)
            rc = dds_error(SPINDLE_EIO, "eventfd for a reader of %s: %s", config->name,
                           strerror(errno));
    }
    struct dds_topic *topic = reader->topic;
    pthread_mutex_lock(&topic->lock);
    if (rc == 0 && topic->reader != NULL)
        rc = dds_error(SPINDLE_EINVAL, "participant %s already has a reader of topic %s",
                       participant->self->name, config->name);
    if (rc == 0) {
        /* The history first, then (same lock) the live stream: no gap, no
         * duplicate. */
        for (uint32_t i = 0; i < topic->history.count; i++) {
            const struct dds_kept *kept = dds_fifo_at(&topic->history, i);
            struct spindle_dds_sample_info info;
            if (dds_sample_header_decode(kept->bytes, kept->size, &info) != 0)
                continue;
            info.from_history = kept->from_history;
            dds_reader_deliver(reader, &info, kept->bytes);
        }
        topic->reader = reader;
    }
    pthread_mutex_unlock(&topic->lock);
    if (rc < 0) {
        if (reader->event_fd >= 0)
            close(reader->event_fd);
        dds_fifo_free(&reader->queue);
        pthread_mutex_destroy(&reader->lock);
        free(reader);
        return rc;
    }
    *out = reader;
    return 0;
}

void spindle_dds_reader_destroy(spindle_dds_reader_t *reader)
{
    if (reader == NULL)
        return;
    pthread_mutex_lock(&reader->topic->lock);
    reader->topic->reader = NULL;
    pthread_mutex_unlock(&reader->topic->lock);
    if (reader->event_fd >= 0)
        close(reader->event_fd);
    dds_fifo_free(&reader->queue);
    pthread_mutex_destroy(&reader->lock);
    free(reader);
}

static int copy_out(spindle_dds_reader_t *reader, void *buffer, size_t capacity,
                    struct spindle_dds_sample_info *info, bool remove)
{
    if (reader == NULL || (buffer == NULL && capacity > 0))
        return dds_error(SPINDLE_EINVAL, "NULL reader or buffer");
    if (!reader->has_queue)
        return dds_error(SPINDLE_EINVAL, "the reader has no queue (queue_depth 0)");
    pthread_mutex_lock(&reader->lock);
    if (reader->queue.count == 0) {
        pthread_mutex_unlock(&reader->lock);
        return SPINDLE_EAGAIN;
    }
    const struct dds_kept *kept = dds_fifo_at(&reader->queue, 0);
    struct spindle_dds_sample_info decoded;
    int rc = dds_sample_header_decode(kept->bytes, kept->size, &decoded);
    if (rc == 0) {
        decoded.from_history = kept->from_history;
        size_t n = decoded.length < capacity ? decoded.length : capacity;
        if (n > 0)
            memcpy(buffer, kept->bytes + SPINDLE_DDS_SAMPLE_HEADER, n);
        if (info != NULL)
            *info = decoded;
        rc = (int)decoded.length;
    }
    if (remove) {
        dds_fifo_pop(&reader->queue);
        if (reader->queue.count == 0)
            drain_fd(reader->event_fd);
    }
    pthread_mutex_unlock(&reader->lock);
    return rc;
}

int spindle_dds_take(spindle_dds_reader_t *reader, void *buffer, size_t capacity,
                     struct spindle_dds_sample_info *info)
{
    return copy_out(reader, buffer, capacity, info, true);
}

int spindle_dds_read(spindle_dds_reader_t *reader, void *buffer, size_t capacity,
                     struct spindle_dds_sample_info *info)
{
    return copy_out(reader, buffer, capacity, info, false);
}

int spindle_dds_reader_fd(spindle_dds_reader_t *reader)
{
    if (reader == NULL || !reader->has_queue)
        return dds_error(SPINDLE_EINVAL, "the reader has no queue (queue_depth 0)");
    return reader->event_fd;
}

int spindle_dds_reader_wait(spindle_dds_reader_t *reader, int timeout_ms)
{
    int fd = spindle_dds_reader_fd(reader);
    if (fd < 0)
        return fd;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int n;
    do
        n = poll(&pfd, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return dds_error(SPINDLE_EIO, "poll on a reader: %s", strerror(errno));
    return n > 0 ? 1 : 0;
}

uint64_t spindle_dds_reader_lost(spindle_dds_reader_t *reader)
{
    if (reader == NULL)
        return 0;
    pthread_mutex_lock(&reader->lock);
    uint64_t lost = reader->queue.dropped;
    pthread_mutex_unlock(&reader->lock);
    return lost;
}
