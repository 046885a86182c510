/*
 * spindle_dds with real processes (participants forked on shm, loopback
 * TCP bootstrap):
 *
 * - Two writers and two subscribers of an atomic topic: both subscribers
 *   receive every sample, in the same sequence.
 * - The same over an unordered topic: every sample of each writer, in the
 *   writer's order.
 * - A subscriber that joins a volatile topic late receives the history
 *   (the last history_depth samples), then the live stream, without a gap
 *   or a duplicate, also when a logged topic gives every participant a
 *   log directory; of a logged topic, every earlier sample through its
 *   log's catch-up, then the live stream, once every sample is on every
 *   member's disk, and every member's log holds every sample in order
 *   (spindle-log).
 * - A subscriber and a writer killed with SIGKILL mid-stream: the other
 *   writer and subscribers go on, and the subscribers agree on what they
 *   received.
 * - A subscriber that leaves mid-stream (destroys its participant): the
 *   writer and the other subscribers go on and agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "dds_forked.h"

#define SAMPLES   1500
#define HISTORY   40
#define PHASE_ONE 300

struct scenario {
    const char *topic;
    uint32_t writers;     /* participants 0..writers-1 write */
    uint32_t subscribers; /* the next ones subscribe */
    uint64_t samples;     /* per writer */
};

/* A founder: writes, or subscribes and reports; everyone shuts down
 * together once every subscriber has everything. */
static int founder_role(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                        int signal_fd, void *arg)
{
    const struct scenario *s = arg;
    char name[16];
    snprintf(name, sizeof name, "p%u", id);
    spindle_dds_participant_t *p;
    DDS_CHECK(spindle_dds_participant_create(config, name, NULL, &p) == 0, "create %s", name);
    struct dds_sink sink;
    dds_sink_init(&sink);
    spindle_dds_writer_t *writer = NULL;
    spindle_dds_reader_t *reader = NULL;
    if (id < s->writers) {
        DDS_CHECK(spindle_dds_writer_create(p, s->topic, &writer) == 0, "writer");
    } else {
        struct spindle_dds_reader_options ro = {.listener = dds_sink_listener,
                                                .listener_ctx = &sink};
        DDS_CHECK(spindle_dds_reader_create(p, s->topic, &ro, &reader) == 0, "reader");
    }
    /* Every reader exists before anything is written. */
    DDS_CHECK(spindle_barrier(spindle_dds_participant_group(p), 30000) == 0, "barrier");
    if (writer != NULL)
        dds_write_samples(writer, id, 1, s->samples);
    for (uint32_t w = 0; reader != NULL && w < s->writers; w++)
        DDS_CHECK(dds_sink_wait(&sink, w, s->samples), "samples of writer %u", w);
    DDS_CHECK(spindle_dds_participant_shutdown(p, 30000) == 0, "shutdown");
    spindle_dds_participant_destroy(p);
    struct dds_report report = dds_sink_get(&sink);
    dds_send_report(report_fd, &report);
    (void)signal_fd;
    return 0;
}

static void run_founders(const char *qos, struct dds_report *reports)
{
    struct scenario s = {.topic = "t", .writers = 2, .subscribers = 2, .samples = SAMPLES};
    char text[4096];
    dds_config_head(text, sizeof text, 4, NULL);
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at,
             "[topic.0]\nname = t\nqos = %s\npublishers = 0,1\nsubscribers = 2,3\n"
             "max_sample_size = 64\nwindow = 32\n",
             qos);
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct dds_forked forked[4];
    for (uint32_t i = 0; i < 4; i++)
        dds_fork(&forked[i], i, config, founder_role, &s);
    bool ok = true;
    for (uint32_t i = 0; i < 4; i++)
        ok &= dds_collect(&forked[i], &reports[i]);
    free(config);
    assert_true(ok);
}

static void test_atomic_subscribers_receive_identical_sequences(void **state)
{
    (void)state;
    struct dds_report reports[4];
    run_founders("atomic", reports);
    for (uint32_t sub = 2; sub < 4; sub++) {
        assert_int_equal(reports[sub].received, 2 * SAMPLES);
        assert_int_equal(reports[sub].out_of_order, 0);
    }
    assert_int_equal(reports[2].hash, reports[3].hash);
}

static void test_unordered_subscribers_receive_each_writer_in_order(void **state)
{
    (void)state;
    struct dds_report reports[4];
    run_founders("unordered", reports);
    for (uint32_t sub = 2; sub < 4; sub++) {
        assert_int_equal(reports[sub].received, 2 * SAMPLES);
        assert_int_equal(reports[sub].per_writer[0], SAMPLES);
        assert_int_equal(reports[sub].per_writer[1], SAMPLES);
        assert_int_equal(reports[sub].out_of_order, 0);
    }
}

/* Late joiner: participant 0 writes PHASE_ONE samples, waits for the
 * joiner's view, writes the rest; 1 subscribes from the start; 2 joins
 * once 1 has the first phase (the parent starts it then). arg: the QoS
 * name; a logged topic's writer also waits until its samples are on
 * every member's disk. */
static int late_role(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                     int signal_fd, void *arg)
{
    bool logged = strcmp(arg, "logged") == 0;
    char name[16];
    snprintf(name, sizeof name, "p%u", id);
    /* Readers first, then the membership: the joiner's reader gets the
     * history whole (spindle_dds_participant_options.disabled). */
    struct spindle_dds_participant_options po = {.disabled = true};
    spindle_dds_participant_t *p;
    DDS_CHECK(spindle_dds_participant_create(config, name, &po, &p) == 0, "create %s", name);
    struct dds_sink sink;
    dds_sink_init(&sink);
    spindle_dds_writer_t *writer = NULL;
    spindle_dds_reader_t *reader = NULL;
    if (id == 0) {
        DDS_CHECK(spindle_dds_writer_create(p, "v", &writer) == 0, "writer");
    } else {
        struct spindle_dds_reader_options ro = {.listener = dds_sink_listener,
                                                .listener_ctx = &sink};
        DDS_CHECK(spindle_dds_reader_create(p, "v", &ro, &reader) == 0, "reader");
    }
    DDS_CHECK(spindle_dds_participant_enable(p) == 0, "enable %s", name);
    if (id < 2) /* the founders: both ready before the first sample */
        DDS_CHECK(spindle_barrier(spindle_dds_participant_group(p), 30000) == 0, "barrier");
    if (id == 0) {
        dds_write_samples(writer, 0, 1, PHASE_ONE);
        DDS_CHECK(dds_wait_view(p, 3), "the joiner's view");
        dds_write_samples(writer, 0, PHASE_ONE + 1, SAMPLES);
        if (logged)
            DDS_CHECK(spindle_flush_persistent(spindle_dds_participant_group(p), 0, 30000) == 0,
                      "every sample on every member's disk");
    } else {
        if (id == 1) {
            DDS_CHECK(dds_sink_wait(&sink, 0, PHASE_ONE), "first phase");
            DDS_CHECK(write(signal_fd, "1", 1) == 1, "signal");
        }
        uint64_t history = logged ? PHASE_ONE : HISTORY;
        DDS_CHECK(dds_sink_wait(&sink, 0, id == 1 ? SAMPLES : SAMPLES - PHASE_ONE + history),
                  "every sample");
    }
    return dds_role_finish(p, 3, &sink, report_fd);
}

/* spindle-log, for the logged test (argv[2]); NULL: its log checks are
 * skipped. */
static const char *log_tool;

/* Runs `spindle-log VERB DIRS...` into out; its exit status. */
static int run_log_tool(const char *verb, const char *dirs, char *out, size_t size)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", log_tool, verb, dirs);
    FILE *pipe = popen(cmd, "r");
    assert_non_null(pipe);
    size_t got = fread(out, 1, size - 1, pipe);
    out[got] = '\0';
    int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Every member's log holds every sample of the writer, in order
 * (spindle-log check verifies the delivery order), and the logs agree. */
static void check_logs(const char *logs)
{
    char dirs[256], out[4096], want[128];
    for (uint32_t i = 0; i < 3; i++) {
        snprintf(dirs, sizeof dirs, "%s/p%u", logs, i);
        if (run_log_tool("check", dirs, out, sizeof out) != 0)
            fail_msg("spindle-log check %s: %s", dirs, out);
        assert_int_equal(run_log_tool("summary", dirs, out, sizeof out), 0);
        /* (sender indices count per view: the last one says nothing here) */
        snprintf(want, sizeof want, "subgroup 0: %u messages", SAMPLES);
        if (strstr(out, want) == NULL)
            fail_msg("%s lacks \"%s\": %s", dirs, want, out);
    }
    snprintf(dirs, sizeof dirs, "%s/p0 %s/p1 %s/p2", logs, logs, logs);
    if (run_log_tool("compare", dirs, out, sizeof out) != 0)
        fail_msg("spindle-log compare: %s", out);
}

/* The late joiner's run for a QoS of topic v (volatile or logged;
 * "log_dirs": volatile, beside a logged topic no one writes, which gives
 * every participant a log directory); reports[3]. */
static void run_late(const char *qos, struct dds_report *reports)
{
    bool log_dirs = strcmp(qos, "log_dirs") == 0;
    char text[4096];
    char logs[] = "/tmp/spindle-dds-logs-XXXXXX";
    assert_non_null(mkdtemp(logs));
    dds_config_head(text, sizeof text, 3, "0,1");
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at,
             "[dds]\nlog_dir = %s\n"
             "[topic.0]\nname = v\nqos = %s\npublishers = 0\nsubscribers = 1,2\n"
             "max_sample_size = 64\nwindow = 32\nhistory_depth = %u\n%s",
             logs, log_dirs ? "volatile" : qos, HISTORY,
             log_dirs ? "[topic.1]\nname = g\nqos = logged\npublishers = 0\nsubscribers = 1\n"
                      : "");
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct dds_forked forked[3];
    dds_fork(&forked[0], 0, config, late_role, (void *)qos);
    dds_fork(&forked[1], 1, config, late_role, (void *)qos);
    char byte;
    assert_int_equal(read(forked[1].signal_fd, &byte, 1), 1);
    dds_fork(&forked[2], 2, config, late_role, (void *)qos);
    bool ok = true;
    for (uint32_t i = 0; i < 3; i++)
        ok &= dds_collect(&forked[i], &reports[i]);
    free(config);
    if (ok && strcmp(qos, "logged") == 0 && log_tool != NULL)
        check_logs(logs);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", logs);
    assert_int_equal(system(cmd), 0);
    assert_true(ok);
}

/* history: how many samples of the first phase the joiner gets first. */
static void check_late(const struct dds_report *reports, uint64_t history)
{
    assert_int_equal(reports[1].received, SAMPLES);
    assert_int_equal(reports[1].from_history, 0);
    /* The joiner: the last `history` samples of the first phase, then
     * every later one, each once, in order. */
    const struct dds_report *late = &reports[2];
    assert_int_equal(late->from_history, history);
    assert_int_equal(late->first_seq, PHASE_ONE - history + 1);
    assert_int_equal(late->received, SAMPLES - PHASE_ONE + history);
    assert_int_equal(late->out_of_order, 0);
    assert_int_equal(late->history_after_live, 0);
}

static void test_late_volatile_subscriber_gets_history_then_live(void **state)
{
    (void)state;
    struct dds_report reports[3];
    run_late("volatile", reports);
    check_late(reports, HISTORY);
}

/* The same through the log: the joiner brings an empty log directory, is
 * sent the leader's log (libspindle's catch-up) and replays it to its
 * reader, created before: every sample of the first phase. */
static void test_late_logged_subscriber_gets_log_then_live(void **state)
{
    (void)state;
    struct dds_report reports[3];
    run_late("logged", reports);
    check_late(reports, PHASE_ONE);
}

/* With a logged topic in the file, every participant has a log directory
 * and joins through libspindle's log catch-up, which hands no state: the
 * volatile topic's history comes from its members all the same. */
static void test_log_dirs_everywhere_late_subscriber_still_gets_memory_history(void **state)
{
    (void)state;
    struct dds_report reports[3];
    run_late("log_dirs", reports);
    check_late(reports, HISTORY);
}

/* Kill: writers 0 and 1, subscribers 2, 3, 4; the parent kills 1 and 4
 * once subscriber 2 has a third of writer 0's samples. */
static int kill_role(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                     int signal_fd, void *arg)
{
    (void)arg;
    char name[16];
    snprintf(name, sizeof name, "p%u", id);
    spindle_dds_participant_t *p;
    DDS_CHECK(spindle_dds_participant_create(config, name, NULL, &p) == 0, "create %s", name);
    struct dds_sink sink;
    dds_sink_init(&sink);
    spindle_dds_writer_t *writer = NULL;
    spindle_dds_reader_t *reader = NULL;
    if (id < 2) {
        DDS_CHECK(spindle_dds_writer_create(p, "k", &writer) == 0, "writer");
    } else {
        struct spindle_dds_reader_options ro = {.listener = dds_sink_listener,
                                                .listener_ctx = &sink};
        DDS_CHECK(spindle_dds_reader_create(p, "k", &ro, &reader) == 0, "reader");
    }
    DDS_CHECK(spindle_barrier(spindle_dds_participant_group(p), 30000) == 0, "barrier");
    if (writer != NULL) {
        /* Writer 1 writes until it is killed (its last sample is never
         * reached: the parent kills it first). */
        dds_write_samples(writer, id, 1, id == 0 ? SAMPLES : 1000000);
    } else {
        if (id == 2) {
            DDS_CHECK(dds_sink_wait(&sink, 0, SAMPLES / 3), "a third");
            DDS_CHECK(write(signal_fd, "1", 1) == 1, "signal");
        }
        DDS_CHECK(dds_sink_wait(&sink, 0, SAMPLES), "writer 0's samples");
    }
    /* Writer 1's samples are final once its removal is installed. */
    return dds_role_finish(p, 3, &sink, report_fd);
}

static void test_killed_writer_and_subscriber_the_others_go_on_and_agree(void **state)
{
    (void)state;
    char text[4096];
    dds_config_head(text, sizeof text, 5, NULL);
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at,
             "[topic.0]\nname = k\nqos = atomic\npublishers = 0,1\nsubscribers = 2,3,4\n"
             "max_sample_size = 64\nwindow = 32\n");
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct dds_forked forked[5];
    for (uint32_t i = 0; i < 5; i++)
        dds_fork(&forked[i], i, config, kill_role, NULL);
    char byte;
    assert_int_equal(read(forked[2].signal_fd, &byte, 1), 1);
    assert_int_equal(kill(forked[1].pid, SIGKILL), 0);
    assert_int_equal(kill(forked[4].pid, SIGKILL), 0);
    struct dds_report reports[5];
    bool ok = true;
    for (uint32_t i = 0; i < 5; i++) {
        if (i == 1 || i == 4) {
            int status;
            assert_int_equal(waitpid(forked[i].pid, &status, 0), forked[i].pid);
            assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
            close(forked[i].report_fd);
            close(forked[i].signal_fd);
            continue;
        }
        ok &= dds_collect(&forked[i], &reports[i]);
    }
    free(config);
    assert_true(ok);
    for (uint32_t sub = 2; sub < 4; sub++) {
        assert_int_equal(reports[sub].per_writer[0], SAMPLES);
        assert_true(reports[sub].per_writer[1] > 0);
        assert_int_equal(reports[sub].out_of_order, 0);
    }
    assert_int_equal(reports[2].received, reports[3].received);
    assert_int_equal(reports[2].hash, reports[3].hash);
}

/* Leave: writer 0, subscribers 1, 2, 3; subscriber 3 destroys its
 * participant (a graceful leave) once it has a third of the samples. */
static int leave_role(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                      int signal_fd, void *arg)
{
    (void)arg;
    (void)signal_fd;
    char name[16];
    snprintf(name, sizeof name, "p%u", id);
    struct spindle_dds_participant_options po = {.disabled = true};
    spindle_dds_participant_t *p;
    DDS_CHECK(spindle_dds_participant_create(config, name, &po, &p) == 0, "create %s", name);
    struct dds_sink sink;
    dds_sink_init(&sink);
    spindle_dds_writer_t *writer = NULL;
    if (id == 0) {
        DDS_CHECK(spindle_dds_writer_create(p, "l", &writer) == 0, "writer");
    } else {
        struct spindle_dds_reader_options ro = {.listener = dds_sink_listener,
                                                .listener_ctx = &sink};
        spindle_dds_reader_t *reader;
        DDS_CHECK(spindle_dds_reader_create(p, "l", &ro, &reader) == 0, "reader");
    }
    DDS_CHECK(spindle_dds_participant_enable(p) == 0, "enable");
    DDS_CHECK(spindle_barrier(spindle_dds_participant_group(p), 30000) == 0, "barrier");
    if (id == 3) {
        DDS_CHECK(dds_sink_wait(&sink, 0, SAMPLES / 3), "a third");
        spindle_dds_participant_destroy(p); /* leaves; the others go on */
        struct dds_report report = dds_sink_get(&sink);
        dds_send_report(report_fd, &report);
        return 0;
    }
    if (writer != NULL)
        dds_write_samples(writer, id, 1, SAMPLES);
    else
        DDS_CHECK(dds_sink_wait(&sink, 0, SAMPLES), "every sample");
    return dds_role_finish(p, 3, &sink, report_fd);
}

static void test_left_subscriber_the_others_go_on_and_agree(void **state)
{
    (void)state;
    char text[4096];
    dds_config_head(text, sizeof text, 4, NULL);
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at,
             "[topic.0]\nname = l\nqos = atomic\npublishers = 0\nsubscribers = 1,2,3\n"
             "max_sample_size = 64\nwindow = 32\n");
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct dds_forked forked[4];
    for (uint32_t i = 0; i < 4; i++)
        dds_fork(&forked[i], i, config, leave_role, NULL);
    struct dds_report reports[4];
    bool ok = true;
    for (uint32_t i = 0; i < 4; i++)
        ok &= dds_collect(&forked[i], &reports[i]);
    free(config);
    assert_true(ok);
    assert_true(reports[3].received >= SAMPLES / 3);
    for (uint32_t sub = 1; sub < 3; sub++) {
        assert_int_equal(reports[sub].received, SAMPLES);
        assert_int_equal(reports[sub].out_of_order, 0);
    }
    assert_int_equal(reports[1].hash, reports[2].hash);
}

/* argv[1], when given, runs only the tests it matches (one ctest each);
 * argv[2], spindle-log's path, lets the logged test read the logs. */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    if (argc > 2)
        log_tool = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_subscribers_receive_identical_sequences),
        cmocka_unit_test(test_unordered_subscribers_receive_each_writer_in_order),
        cmocka_unit_test(test_late_volatile_subscriber_gets_history_then_live),
        cmocka_unit_test(test_late_logged_subscriber_gets_log_then_live),
        cmocka_unit_test(test_log_dirs_everywhere_late_subscriber_still_gets_memory_history),
        cmocka_unit_test(test_killed_writer_and_subscriber_the_others_go_on_and_agree),
        cmocka_unit_test(test_left_subscriber_the_others_go_on_and_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
