/*
 * spindle-dds-sensors: the sensor example (examples/dds/sensors.ini). One
 * process per participant, forked here:
 *  - station publishes temperature (logged), humidity (unordered) and
 *    alarms (atomic);
 *  - display subscribes to all three from the start, with listeners;
 *  - archive joins once the station wrote half its readings: it receives
 *    the last temperature readings (its log's catch-up), then the live
 *    stream of temperature and alarms.
 * Each subscriber prints what it received per topic, and how much of it
 * came from the history.
 *
 *   spindle-dds-sensors [CONFIG]   (default: the sensors.ini beside the source)
 *
 * Its log_dir is emptied first: logs of an earlier run belong to another
 * group.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spindle_dds.h"

#define READINGS 200 /* per topic, in two halves around the archive's join */
#define TOPICS   3

static const char *const topic_names[TOPICS] = {"temperature", "humidity", "alarms"};

struct tally {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t received[TOPICS], from_history[TOPICS], last_seq[TOPICS];
};

static void on_sample(void *ctx, const struct spindle_dds_sample_info *info, const void *data)
{
    (void)data;
    struct tally *t = ctx;
    pthread_mutex_lock(&t->lock);
    t->received[info->topic]++;
    t->from_history[info->topic] += info->from_history;
    t->last_seq[info->topic] = info->seq;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static int fail(const char *who, const char *what)
{
    fprintf(stderr, "spindle-dds-sensors: %s: %s: %s\n", who, what, spindle_dds_errmsg());
    return 1;
}

/* Writes readings first..last of each topic. */
static int publish(spindle_dds_writer_t *const *writers, int first, int last)
{
    for (int i = first; i <= last; i++)
        for (int topic = 0; topic < TOPICS; topic++) {
            if (topic == 2 && i % 10 != 0)
                continue; /* an alarm every tenth reading */
            char text[96];
            int length = topic == 0   ? snprintf(text, sizeof text, "%.1f C", 15.0 + i % 7)
                         : topic == 1 ? snprintf(text, sizeof text, "%d %%", 40 + i % 20)
                                      : snprintf(text, sizeof text, "reading %d out of range", i);
            if (spindle_dds_write(writers[topic], text, (size_t)length) < 0)
                return fail("station", topic_names[topic]);
        }
    return 0;
}

static int station(const struct spindle_dds_config *config, int go_fd)
{
    spindle_dds_participant_t *p;
    if (spindle_dds_participant_create(config, "station", NULL, &p) != 0)
        return fail("station", "create");
    spindle_dds_writer_t *writers[TOPICS];
    for (int topic = 0; topic < TOPICS; topic++)
        if (spindle_dds_writer_create(p, topic_names[topic], &writers[topic]) != 0)
            return fail("station", "writer");
    if (spindle_barrier(spindle_dds_participant_group(p), 30000) != 0)
        return fail("station", "barrier");
    if (publish(writers, 1, READINGS / 2) != 0)
        return 1;
    if (write(go_fd, "j", 1) != 1) /* the archive may join now */
        return fail("station", "signal");
    for (int waited = 0; spindle_dds_participant_view_size(p) < 3; waited++) {
        if (waited > 30000)
            return fail("station", "the archive did not join");
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (publish(writers, READINGS / 2 + 1, READINGS) != 0)
        return 1;
    printf("station: wrote %d temperature, %d humidity and %d alarm samples\n", READINGS, READINGS,
           READINGS / 10);
    fflush(stdout);
    int rc = spindle_dds_participant_shutdown(p, 30000);
    spindle_dds_participant_destroy(p);
    return rc == 0 ? 0 : fail("station", "shutdown");
}

static int subscriber(const struct spindle_dds_config *config, const char *name)
{
    struct tally t = {0};
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    /* Readers before the membership, so that the archive's reader gets
     * the temperature history whole, then every later reading. */
    struct spindle_dds_participant_options po = {.disabled = true};
    spindle_dds_participant_t *p;
    if (spindle_dds_participant_create(config, name, &po, &p) != 0)
        return fail(name, "create");
    bool display = strcmp(name, "display") == 0;
    uint64_t want[TOPICS] = {READINGS, display ? READINGS : 0, READINGS / 10};
    for (int topic = 0; topic < TOPICS; topic++) {
        if (want[topic] == 0)
            continue;
        struct spindle_dds_reader_options options = {.listener = on_sample, .listener_ctx = &t};
        spindle_dds_reader_t *reader;
        if (spindle_dds_reader_create(p, topic_names[topic], &options, &reader) != 0)
            return fail(name, "reader");
    }
    if (spindle_dds_participant_enable(p) != 0)
        return fail(name, "enable");
    if (display && spindle_barrier(spindle_dds_participant_group(p), 30000) != 0)
        return fail(name, "barrier");
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&t.lock);
    int rc = 0;
    for (int topic = 0; topic < TOPICS && rc == 0; topic++)
        while (t.last_seq[topic] < want[topic] && rc == 0)
            rc = pthread_cond_timedwait(&t.cond, &t.lock, &deadline);
    pthread_mutex_unlock(&t.lock);
    if (rc != 0)
        return fail(name, "timed out waiting for the readings");
    for (int topic = 0; topic < TOPICS; topic++)
        if (want[topic] > 0)
            printf("%s: %-11s %3llu samples (%llu from the history), last #%llu\n", name,
                   topic_names[topic], (unsigned long long)t.received[topic],
                   (unsigned long long)t.from_history[topic],
                   (unsigned long long)t.last_seq[topic]);
    fflush(stdout);
    rc = spindle_dds_participant_shutdown(p, 30000);
    spindle_dds_participant_destroy(p);
    return rc == 0 ? 0 : fail(name, "shutdown");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : SPINDLE_DDS_SENSORS_INI;
    struct spindle_dds_config *config;
    if (spindle_dds_config_load(path, &config) != 0)
        return fail("configuration", path);
    /* Logs of an earlier run belong to another group: start afresh. */
    if (config->log_dir[0] != '\0')
        nftw(config->log_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    int go[2];
    if (pipe(go) != 0)
        return fail("main", "pipe");
    pid_t pids[3];
    const char *names[3] = {"station", "display", "archive"};
    int started = 0, failed = 0;
    for (; started < 3; started++) {
        if (started == 2) { /* the archive starts once the first half is written */
            char byte;
            if (read(go[0], &byte, 1) != 1) { /* the station ended first */
                failed = 1;
                break;
            }
        }
        pids[started] = fork();
        if (pids[started] < 0) {
            failed = 1;
            break;
        }
        if (pids[started] == 0)
            _exit(started == 0 ? station(config, go[1]) : subscriber(config, names[started]));
        if (started == 0)
            close(go[1]); /* so that the read above ends if the station dies */
    }
    for (int i = 0; i < started; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed = 1;
    }
    free(config);
    return failed;
}
