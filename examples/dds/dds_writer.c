/*
 * Writers: a loan is a reserved ring slot (spindle_reserve), the sample
 * is built in it after the header, and write stamps the header and
 * commits it (spindle_commit): the sample is never copied on its way out.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dds_impl.h"

int spindle_dds_writer_create(spindle_dds_participant_t *participant, const char *topic_name,
                              spindle_dds_writer_t **out)
{
    if (participant == NULL || out == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL participant or out");
    const struct spindle_dds_topic_config *config =
        spindle_dds_config_topic(participant->config, topic_name);
    if (config == NULL)
        return dds_error(SPINDLE_EINVAL, "topic \"%s\" is not in the configuration",
                         topic_name != NULL ? topic_name : "(null)");
    if (((config->publishers >> participant->self->id) & 1u) == 0)
        return dds_error(SPINDLE_EINVAL, "participant %s does not publish topic %s",
                         participant->self->name, config->name);
    struct dds_topic *topic = &participant->topics[config->id];
    spindle_dds_writer_t *writer = calloc(1, sizeof *writer);
    if (writer == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for a writer of %s", config->name);
    writer->participant = participant;
    writer->topic = topic;
    writer->next_seq = 1;
    /* Under the topic's lock: the client listener opens writers too. */
    pthread_mutex_lock(&topic->lock);
    bool taken = topic->writer != NULL;
    if (!taken)
        topic->writer = writer;
    pthread_mutex_unlock(&topic->lock);
    if (taken) {
        free(writer);
        return dds_error(SPINDLE_EINVAL,
                         "participant %s already has a writer of topic %s (its application's, "
                         "or the client listener's for relayed publishes)",
                         participant->self->name, config->name);
    }
    *out = writer;
    return 0;
}

void spindle_dds_writer_destroy(spindle_dds_writer_t *writer)
{
    if (writer == NULL)
        return;
    if (writer->loan != NULL) /* an open loan goes out as an empty sample */
        (void)spindle_dds_writer_write(writer, 0);
    pthread_mutex_lock(&writer->topic->lock);
    writer->topic->writer = NULL;
    pthread_mutex_unlock(&writer->topic->lock);
    free(writer);
}

int spindle_dds_writer_loan(spindle_dds_writer_t *writer, size_t size, bool nonblock, void **sample)
{
    if (writer == NULL || sample == NULL)
        return dds_error(SPINDLE_EINVAL, "NULL writer or sample");
    const struct spindle_dds_topic_config *config = writer->topic->config;
    if (writer->loan != NULL)
        return dds_error(SPINDLE_EINVAL, "topic %s: a loan is already open (write it first)",
                         config->name);
    if (size > config->max_sample_size)
        return dds_error(SPINDLE_EMSGSIZE, "topic %s: a sample of %zu bytes exceeds its %u",
                         config->name, size, config->max_sample_size);
    void *slot;
    int rc =
        spindle_reserve(writer->participant->group, config->id, size + SPINDLE_DDS_SAMPLE_HEADER,
                        nonblock ? SPINDLE_RESERVE_NONBLOCK : 0, &slot);
    if (rc < 0)
        return dds_error(rc, "topic %s: %s", config->name, spindle_errmsg());
    writer->loan = slot;
    writer->loan_size = size;
    *sample = writer->loan + SPINDLE_DDS_SAMPLE_HEADER;
    return 0;
}

int64_t spindle_dds_writer_write(spindle_dds_writer_t *writer, size_t length)
{
    if (writer == NULL || writer->loan == NULL)
        return dds_error(SPINDLE_EINVAL, "write without a loan");
    const struct spindle_dds_topic_config *config = writer->topic->config;
    if (length > writer->loan_size)
        return dds_error(SPINDLE_EINVAL, "topic %s: writing %zu bytes of a %zu-byte loan",
                         config->name, length, writer->loan_size);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct spindle_dds_sample_info info = {
        .topic = config->id,
        .writer = writer->participant->self->id,
        .seq = writer->next_seq,
        .source_timestamp_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec,
        .length = (uint32_t)length,
    };
    dds_sample_header_encode(writer->loan, &info);
    writer->loan = NULL;
    int rc = spindle_commit(writer->participant->group, config->id);
    if (rc < 0)
        return dds_error(rc, "topic %s: %s", config->name, spindle_errmsg());
    return (int64_t)writer->next_seq++;
}

int64_t spindle_dds_write(spindle_dds_writer_t *writer, const void *data, size_t length)
{
    void *sample;
    int rc = spindle_dds_writer_loan(writer, length, false, &sample);
    if (rc < 0)
        return rc;
    if (length > 0)
        memcpy(sample, data, length);
    return spindle_dds_writer_write(writer, length);
}
