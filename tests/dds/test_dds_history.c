/*
 * A volatile topic's history outlives the leader (real processes, forked
 * on shm): the leader, which takes part in no topic, is killed with
 * SIGKILL once a writer's first samples are delivered; a subscriber that
 * joins afterwards receives the last history_depth of them from the
 * topic's members, then every later sample, with no gap or duplicate.
 * (When the leader held every volatile topic's history, the next leader,
 * which never received the topic, handed the joiner nothing.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "dds_forked.h"

#define SAMPLES   1500
#define HISTORY   40
#define PHASE_ONE 300

/* p0, the first founder (rank 0: the leader), and p1 use no topic; p2
 * writes v; p3 subscribes from the start; p4 joins once p0 is gone. */
#define LEADER     0u
#define WRITER     2u
#define SUBSCRIBER 3u
#define JOINER     4u

/* Progress bytes the subscriber sends the parent. */
#define SIGNAL_FIRST_PHASE 'f'
#define SIGNAL_LEADER_GONE 'g'

static int leader_role(spindle_dds_participant_t *p)
{
    /* Until the parent kills it (the alarm of dds_fork bounds it). */
    for (;;) {
        DDS_CHECK(spindle_group_status(spindle_dds_participant_group(p)) == 0,
                  "the leader's group");
        struct timespec second = {1, 0};
        nanosleep(&second, NULL); /* nothing to wait for: it only holds rank 0 */
    }
}

/* Waits for the parent's byte on go_fd: the joiner is in. Its view then
 * follows the one without the leader at this member too (views are
 * installed in order), so four members mean the joiner's view. */
static void wait_for_joiner(spindle_dds_participant_t *p, int go_fd)
{
    char byte;
    DDS_CHECK(read(go_fd, &byte, 1) == 1, "the parent's go");
    DDS_CHECK(dds_wait_view(p, 4), "the joiner's view");
}

/* arg: the read end of the parent's go pipe. */
static int history_role(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                        int signal_fd, void *arg)
{
    int go_fd = *(const int *)arg;
    char name[16];
    snprintf(name, sizeof name, "p%u", id);
    struct spindle_dds_participant_options po = {.disabled = true};
    char join[SPINDLE_DDS_NAME_MAX + 8];
    if (id == JOINER) { /* through p1: p0 is dead */
        snprintf(join, sizeof join, "%s:%u", config->participants[1].host,
                 config->participants[1].port);
        po.join = join;
    }
    spindle_dds_participant_t *p;
    DDS_CHECK(spindle_dds_participant_create(config, name, &po, &p) == 0, "create %s", name);
    struct dds_sink sink;
    dds_sink_init(&sink);
    spindle_dds_writer_t *writer = NULL;
    spindle_dds_reader_t *reader = NULL;
    if (id == WRITER) {
        DDS_CHECK(spindle_dds_writer_create(p, "v", &writer) == 0, "writer");
    } else if (id >= SUBSCRIBER) {
        struct spindle_dds_reader_options ro = {.listener = dds_sink_listener,
                                                .listener_ctx = &sink};
        DDS_CHECK(spindle_dds_reader_create(p, "v", &ro, &reader) == 0, "reader");
    }
    DDS_CHECK(spindle_dds_participant_enable(p) == 0, "enable %s", name);
    if (id != JOINER) /* the founders: every reader exists before the first sample */
        DDS_CHECK(spindle_barrier(spindle_dds_participant_group(p), 30000) == 0, "barrier");
    if (id == LEADER)
        return leader_role(p);
    if (id == WRITER) {
        dds_write_samples(writer, WRITER, 1, PHASE_ONE);
        wait_for_joiner(p, go_fd);
        dds_write_samples(writer, WRITER, PHASE_ONE + 1, SAMPLES);
    } else if (id == SUBSCRIBER) {
        char byte = SIGNAL_FIRST_PHASE;
        DDS_CHECK(dds_sink_wait(&sink, WRITER, PHASE_ONE), "first phase");
        DDS_CHECK(write(signal_fd, &byte, 1) == 1, "signal");
        DDS_CHECK(dds_wait_view(p, 3), "the view without the leader");
        byte = SIGNAL_LEADER_GONE;
        DDS_CHECK(write(signal_fd, &byte, 1) == 1, "signal");
        DDS_CHECK(dds_sink_wait(&sink, WRITER, SAMPLES), "every sample");
    } else if (id == JOINER) {
        char byte = 'j';
        DDS_CHECK(write(signal_fd, &byte, 1) == 1, "signal");
        DDS_CHECK(dds_sink_wait(&sink, WRITER, SAMPLES - PHASE_ONE + HISTORY), "every sample");
    } else { /* p1 */
        wait_for_joiner(p, go_fd);
    }
    return dds_role_finish(p, 4, &sink, report_fd);
}

static void test_history_survives_the_leader_killed(void **state)
{
    (void)state;
    char text[4096];
    dds_config_head(text, sizeof text, 5, "0,1,2,3");
    size_t at = strlen(text);
    snprintf(text + at, sizeof text - at,
             "[topic.0]\nname = v\nqos = volatile\npublishers = %u\nsubscribers = %u,%u\n"
             "max_sample_size = 64\nwindow = 32\nhistory_depth = %u\n",
             WRITER, SUBSCRIBER, JOINER, HISTORY);
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct dds_forked forked[5];
    int go[2];
    assert_int_equal(pipe(go), 0);
    for (uint32_t i = 0; i < JOINER; i++)
        dds_fork(&forked[i], i, config, history_role, &go[0]);
    char byte = 0;
    assert_int_equal(read(forked[SUBSCRIBER].signal_fd, &byte, 1), 1);
    assert_int_equal(byte, SIGNAL_FIRST_PHASE);
    assert_int_equal(kill(forked[LEADER].pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(forked[LEADER].pid, &status, 0), forked[LEADER].pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(forked[LEADER].report_fd);
    close(forked[LEADER].signal_fd);
    assert_int_equal(read(forked[SUBSCRIBER].signal_fd, &byte, 1), 1);
    assert_int_equal(byte, SIGNAL_LEADER_GONE);
    dds_fork(&forked[JOINER], JOINER, config, history_role, &go[0]);
    assert_int_equal(read(forked[JOINER].signal_fd, &byte, 1), 1);
    assert_int_equal(write(go[1], "gg", 2), 2); /* the writer and p1 */
    struct dds_report reports[5];
    bool ok = true;
    for (uint32_t i = 1; i <= JOINER; i++)
        ok &= dds_collect(&forked[i], &reports[i]);
    free(config);
    close(go[0]);
    close(go[1]);
    assert_true(ok);
    assert_int_equal(reports[SUBSCRIBER].received, SAMPLES);
    assert_int_equal(reports[SUBSCRIBER].from_history, 0);
    assert_int_equal(reports[SUBSCRIBER].out_of_order, 0);
    /* The joiner: the last HISTORY samples of the first phase, then every
     * later one, each once, in order. */
    const struct dds_report *late = &reports[JOINER];
    assert_int_equal(late->from_history, HISTORY);
    assert_int_equal(late->first_seq, PHASE_ONE - HISTORY + 1);
    assert_int_equal(late->received, SAMPLES - PHASE_ONE + HISTORY);
    assert_int_equal(late->out_of_order, 0);
    assert_int_equal(late->history_after_live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history_survives_the_leader_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
