/*
 * spindle-dds-pub: the publisher of the `make dds-demo` pair. Creates its
 * participant from the configuration, waits for the subscriber, writes
 * --samples text samples built in place in the topic's ring, and ends
 * with the subscriber (a collective shutdown).
 *
 *   spindle-dds-pub CONFIG PARTICIPANT TOPIC [SAMPLES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spindle_dds.h"

static int fail(const char *what)
{
    fprintf(stderr, "spindle-dds-pub: %s: %s\n", what, spindle_dds_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: spindle-dds-pub CONFIG PARTICIPANT TOPIC [SAMPLES]\n");
        return 2;
    }
    long samples = argc == 5 ? strtol(argv[4], NULL, 10) : 10;
    if (samples < 1 || samples > 1000000) {
        fprintf(stderr, "spindle-dds-pub: SAMPLES %s must be 1..1000000\n", argv[4]);
        return 2;
    }
    struct spindle_dds_config *config;
    if (spindle_dds_config_load(argv[1], &config) != 0)
        return fail("configuration");
    spindle_dds_participant_t *participant;
    if (spindle_dds_participant_create(config, argv[2], NULL, &participant) != 0)
        return fail("participant");
    spindle_dds_writer_t *writer;
    if (spindle_dds_writer_create(participant, argv[3], &writer) != 0)
        return fail("writer");
    /* Every reader is in place before the first sample. */
    if (spindle_barrier(spindle_dds_participant_group(participant), 30000) != 0)
        return fail("barrier");
    for (long i = 1; i <= samples; i++) {
        void *sample;
        if (spindle_dds_writer_loan(writer, 64, false, &sample) != 0)
            return fail("loan");
        int length = snprintf(sample, 64, "hello from %s, sample %ld", argv[2], i);
        int64_t seq = spindle_dds_writer_write(writer, (size_t)length);
        if (seq < 0)
            return fail("write");
        printf("%s: wrote #%lld \"%.*s\"\n", argv[2], (long long)seq, length, (char *)sample);
    }
    fflush(stdout);
    int rc = spindle_dds_participant_shutdown(participant, 30000);
    spindle_dds_participant_destroy(participant);
    free(config);
    return rc == 0 ? 0 : fail("shutdown");
}
