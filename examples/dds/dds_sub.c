/*
 * spindle-dds-sub: the subscriber of the `make dds-demo` pair. Takes
 * samples from its reader's queue, waiting on the reader's descriptor, and
 * prints each with its info until --samples arrived; ends with the
 * publisher (a collective shutdown).
 *
 *   spindle-dds-sub CONFIG PARTICIPANT TOPIC [SAMPLES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spindle_dds.h"

static int fail(const char *what)
{
    fprintf(stderr, "spindle-dds-sub: %s: %s\n", what, spindle_dds_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: spindle-dds-sub CONFIG PARTICIPANT TOPIC [SAMPLES]\n");
        return 2;
    }
    long samples = argc == 5 ? strtol(argv[4], NULL, 10) : 10;
    if (samples < 1 || samples > 1000000) {
        fprintf(stderr, "spindle-dds-sub: SAMPLES %s must be 1..1000000\n", argv[4]);
        return 2;
    }
    struct spindle_dds_config *config;
    if (spindle_dds_config_load(argv[1], &config) != 0)
        return fail("configuration");
    spindle_dds_participant_t *participant;
    if (spindle_dds_participant_create(config, argv[2], NULL, &participant) != 0)
        return fail("participant");
    spindle_dds_reader_t *reader;
    struct spindle_dds_reader_options options = {.queue_depth = 1024};
    if (spindle_dds_reader_create(participant, argv[3], &options, &reader) != 0)
        return fail("reader");
    if (spindle_barrier(spindle_dds_participant_group(participant), 30000) != 0)
        return fail("barrier");
    for (long got = 0; got < samples;) {
        int ready = spindle_dds_reader_wait(reader, 30000);
        if (ready <= 0)
            return fail(ready == 0 ? "no sample for 30 s" : "wait");
        char text[256];
        struct spindle_dds_sample_info info;
        int length;
        while ((length = spindle_dds_take(reader, text, sizeof text - 1, &info)) >= 0) {
            text[length < (int)sizeof text - 1 ? length : (int)sizeof text - 1] = '\0';
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            double age_ms = ((double)now.tv_sec * 1e9 + (double)now.tv_nsec -
                             (double)info.source_timestamp_ns) /
                            1e6;
            printf("%s: took writer %u #%llu (%u bytes, %.3f ms after it was written): \"%s\"\n",
                   argv[2], info.writer, (unsigned long long)info.seq, info.length, age_ms, text);
            got++;
        }
    }
    fflush(stdout);
    int rc = spindle_dds_participant_shutdown(participant, 30000);
    spindle_dds_participant_destroy(participant);
    free(config);
    return rc == 0 ? 0 : fail("shutdown");
}
