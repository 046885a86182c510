/*
 * spindle_dds external clients (docs/DDS.md "External clients"): the test
 * process is the client, never a group member; the participants are
 * forked.
 *
 * - Failover: a client publishes and receives through participant 1, which
 *   is killed with SIGKILL; the client goes on through participant 2. Of
 *   the volatile topic it subscribed to with its history, it ends with
 *   every sample of the writer exactly once in order after dropping what
 *   the sequence numbers flag as duplicates (exactly the samples it had
 *   before the failover: participant 2's history replays them), with
 *   nothing missed; its publishes come back with the (writer, seq) each
 *   was confirmed with, as participant 1's and then participant 2's.
 * - Key: a group with a key refuses a client without it and one with
 *   another key, each with an error that says so, and serves one with it.
 * - Malformed: a bad frame length, a frame before the HELLO, a bad magic,
 *   a bad name and an unknown type each get an ERROR naming what was
 *   wrong, and the member still serves a good client afterwards.
 * - Slow, and lags (the same with a key, so sealed frames): a client that
 *   does not read loses samples, which the member counts; it sees exactly
 *   that many missing from the sequence numbers.
 * - Sealed: with a key, frames after the handshake are sealed both ways;
 *   one altered on the wire, replayed or reordered is refused with an
 *   ERROR naming which and counted, and the member goes on.
 */
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cmocka.h>

#include "dds_client_raw.h"
#include "dds_forked.h"

#define PHASE_ONE   400
#define PHASE_TWO   400
#define ECHOES      50
#define DEADLINE_MS 25000

struct member_arg {
    int done_fd;       /* the members wait for its end of file before they stop */
    int done_write_fd; /* closed in the members */
    uint32_t members;  /* the view the survivors wait for */
};

/* The members of every scenario: participant 0 writes phase one of "v",
 * waits for the view without participant 1, writes phase two; the others
 * only serve clients. Each signals once its listener is up. */
static int member_role(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                       int signal_fd, void *arg)
{
    const struct member_arg *m = arg;
    close(m->done_write_fd);
    char name[16];
    snprintf(name, sizeof name, "p%u", id);
    spindle_dds_participant_t *p;
    DDS_CHECK(spindle_dds_participant_create(config, name, NULL, &p) == 0, "create %s", name);
    spindle_dds_writer_t *writer = NULL;
    if (spindle_dds_config_topic(config, "v") != NULL && id == 0)
        DDS_CHECK(spindle_dds_writer_create(p, "v", &writer) == 0, "writer");
    if (config->num_participants > 1)
        DDS_CHECK(spindle_barrier(spindle_dds_participant_group(p), 30000) == 0, "barrier");
    DDS_CHECK(write(signal_fd, "1", 1) == 1, "signal");
    if (writer != NULL) {
        for (uint64_t seq = 1; seq <= PHASE_ONE; seq++)
            DDS_CHECK(spindle_dds_write(writer, &seq, sizeof seq) == (int64_t)seq, "phase one");
        DDS_CHECK(dds_wait_view(p, m->members), "the view without participant 1");
        for (uint64_t seq = PHASE_ONE + 1; seq <= PHASE_ONE + PHASE_TWO; seq++)
            DDS_CHECK(spindle_dds_write(writer, &seq, sizeof seq) == (int64_t)seq, "phase two");
    }
    char byte;
    DDS_CHECK(read(m->done_fd, &byte, 1) == 0, "the test's end");
    DDS_CHECK(dds_wait_view(p, m->members), "the survivors' view");
    if (m->members > 1)
        DDS_CHECK(spindle_dds_participant_shutdown(p, 30000) == 0, "shutdown");
    /* The listener's counters, in the report's fields: received = samples
     * dropped for slow clients, from_history = connections refused. */
    struct dds_report report = {0};
    struct spindle_dds_client_stats stats;
    if (spindle_dds_participant_client_stats(p, &stats) == 0) {
        report.received = stats.dropped_samples;
        report.from_history = stats.refused;
    }
    spindle_dds_participant_destroy(p);
    dds_send_report(report_fd, &report);
    return 0;
}

/* What the client has received. */
struct tally {
    uint64_t v_unique, v_duplicates, v_missed, v_out_of_order;
    uint64_t echoes[3]; /* of "in", per relaying writer */
    uint64_t echo_bad;  /* an echo whose seq or bytes are not what was confirmed */
    uint64_t echo_duplicates;
};

static void take_one(spindle_dds_client_t *client, struct tally *t)
{
    uint8_t buffer[64];
    struct spindle_dds_client_sample_info info;
    int rc = spindle_dds_client_receive(client, buffer, sizeof buffer, &info, 1000);
    if (rc == SPINDLE_EAGAIN)
        return;
    if (rc < 0)
        fail_msg("receive: %d %s", rc, spindle_dds_errmsg());
    if (info.sample.topic == 0) { /* "v": the bytes are the seq */
        uint64_t value;
        memcpy(&value, buffer, sizeof value);
        assert_int_equal(rc, sizeof value);
        assert_int_equal(info.sample.writer, 0);
        assert_int_equal(value, info.sample.seq);
        if (info.duplicate) {
            t->v_duplicates++;
            return;
        }
        t->v_missed += info.missed;
        t->v_out_of_order += info.sample.seq != t->v_unique + 1;
        t->v_unique++;
        return;
    }
    assert_int_equal(info.sample.topic, 1);
    assert_true(info.sample.writer >= 1 && info.sample.writer <= 2);
    uint64_t *count = &t->echoes[info.sample.writer];
    uint64_t value;
    memcpy(&value, buffer, sizeof value);
    /* Each echo carries the seq its publish was confirmed with. */
    if (info.duplicate) {
        /* After the failover, the next member may relay echoes the client
         * already had from the dead one (docs/DDS.md: flagged duplicates);
         * only ones it had. */
        t->echo_bad += info.sample.seq > *count || value != info.sample.seq;
        t->echo_duplicates++;
        return;
    }
    t->echo_bad += info.sample.seq != *count + 1 || value != info.sample.seq;
    (*count)++;
}

static void receive_until(spindle_dds_client_t *client, struct tally *t, uint64_t v_unique,
                          uint32_t echo_writer, uint64_t echoes)
{
    time_t start = time(NULL);
    while (t->v_unique < v_unique || t->echoes[echo_writer] < echoes) {
        if (time(NULL) - start > DEADLINE_MS / 1000)
            fail_msg("after %d s: %llu of %llu samples of v, %llu of %llu echoes",
                     DEADLINE_MS / 1000, (unsigned long long)t->v_unique,
                     (unsigned long long)v_unique, (unsigned long long)t->echoes[echo_writer],
                     (unsigned long long)echoes);
        take_one(client, t);
    }
}

static void publish_echoes(spindle_dds_client_t *client, uint32_t want_writer)
{
    for (uint64_t seq = 1; seq <= ECHOES; seq++) {
        uint32_t writer = 99;
        int64_t got = spindle_dds_client_publish(client, "in", &seq, sizeof seq, &writer);
        if (got != (int64_t)seq)
            fail_msg("publish %llu: %lld %s", (unsigned long long)seq, (long long)got,
                     spindle_dds_errmsg());
        assert_int_equal(writer, want_writer);
    }
}

static void fork_members(struct dds_forked *forked, uint32_t n,
                         const struct spindle_dds_config *config, struct member_arg *arg)
{
    int done[2];
    assert_int_equal(pipe(done), 0);
    arg->done_fd = done[0];
    arg->done_write_fd = done[1];
    for (uint32_t i = 0; i < n; i++)
        dds_fork(&forked[i], i, config, member_role, arg);
    close(done[0]);
    for (uint32_t i = 0; i < n; i++) {
        char byte;
        assert_int_equal(read(forked[i].signal_fd, &byte, 1), 1);
    }
}

/* Lets the members stop and checks they exited well; skip: killed.
 * reports[i]: member i's (member_role). */
static void end_members(struct dds_forked *forked, uint32_t n, const struct member_arg *arg,
                        int skip, struct dds_report *reports)
{
    close(arg->done_write_fd);
    bool ok = true;
    for (uint32_t i = 0; i < n; i++) {
        if ((int)i == skip)
            continue;
        ok &= dds_collect(&forked[i], &reports[i]);
    }
    assert_true(ok);
}

static char address_text[3][32];

static void test_client_fails_over_to_another_member(void **state)
{
    (void)state;
    char text[4096];
    dds_config_head(text, sizeof text, 3, NULL);
    size_t at = strlen(text);
    uint16_t ports[3] = {0, test_free_port(), test_free_port()};
    snprintf(text + at, sizeof text - at,
             "[participant.1]\nclient_port = %u\n[participant.2]\nclient_port = %u\n"
             "[topic.0]\nname = v\nqos = volatile\npublishers = 0\nsubscribers = 1,2\n"
             "max_sample_size = 64\nwindow = 32\nhistory_depth = %u\n"
             "[topic.1]\nname = in\nqos = atomic\npublishers = 1,2\nsubscribers = 0\n"
             "max_sample_size = 64\nwindow = 32\n",
             ports[1], ports[2], PHASE_ONE + PHASE_TWO + 100);
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct member_arg arg = {.members = 2};
    struct dds_forked forked[3];
    fork_members(forked, 3, config, &arg);

    const char *members[2];
    for (uint32_t i = 1; i < 3; i++) {
        snprintf(address_text[i], sizeof address_text[i], "127.0.0.1:%u", ports[i]);
        members[i - 1] = address_text[i];
    }
    struct spindle_dds_client_options o = {.members = members, .num_members = 2};
    spindle_dds_client_t *client;
    assert_int_equal(spindle_dds_client_connect(&o, &client), 0);
    assert_int_equal(spindle_dds_client_member(client), 1);
    assert_int_equal(spindle_dds_client_subscribe(client, "v", true), 0);
    assert_int_equal(spindle_dds_client_subscribe(client, "in", false), 0);
    /* A member that does not publish a topic refuses to relay to it. */
    uint64_t one = 1;
    assert_int_equal(spindle_dds_client_publish(client, "v", &one, sizeof one, NULL),
                     SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_dds_errmsg(), "does not publish topic v"));
    assert_int_equal(spindle_dds_client_subscribe(client, "nosuch", false), SPINDLE_ENOENT);

    struct tally t = {0};
    publish_echoes(client, 1);
    receive_until(client, &t, PHASE_ONE, 1, ECHOES);
    assert_int_equal(t.v_duplicates, 0);

    assert_int_equal(kill(forked[1].pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(forked[1].pid, &status, 0), forked[1].pid);
    close(forked[1].report_fd);
    close(forked[1].signal_fd);
    /* Phase two is written once the others have removed participant 1. */
    receive_until(client, &t, PHASE_ONE + PHASE_TWO, 1, ECHOES);
    assert_int_equal(spindle_dds_client_member(client), 2);
    assert_int_equal(spindle_dds_client_failovers(client), 1);
    publish_echoes(client, 2);
    receive_until(client, &t, PHASE_ONE + PHASE_TWO, 2, ECHOES);

    /* What docs/DDS.md promises: participant 2's history gives again every
     * sample received through participant 1 (flagged duplicates), and
     * covers what was written meanwhile (nothing missed). */
    assert_int_equal(t.v_unique, PHASE_ONE + PHASE_TWO);
    assert_int_equal(t.v_duplicates, PHASE_ONE);
    assert_int_equal(t.v_missed, 0);
    assert_int_equal(t.v_out_of_order, 0);
    assert_int_equal(t.echo_bad, 0);
    assert_true(t.echo_duplicates <= ECHOES);
    assert_int_equal(spindle_dds_client_last_seq(client, 0, 0), PHASE_ONE + PHASE_TWO);
    assert_int_equal(spindle_dds_client_last_seq(client, 1, 2), ECHOES);
    spindle_dds_client_close(client);
    struct dds_report reports[3];
    end_members(forked, 3, &arg, 1, reports);
    free(config);
}

/* A one-participant group with the client listener, a key when key_file. */
static struct spindle_dds_config *single_member(const char *key_file, uint16_t *port)
{
    char text[4096];
    dds_config_head(text, sizeof text, 1, NULL);
    size_t at = strlen(text);
    *port = test_free_port();
    snprintf(text + at, sizeof text - at,
             "[participant.0]\nclient_port = %u\n%s%s\n"
             "[topic.0]\nname = in\nqos = atomic\npublishers = 0\nsubscribers = 0\n"
             "max_sample_size = 64\n",
             *port, key_file != NULL ? "[dds]\nkey_file = " : "", key_file != NULL ? key_file : "");
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    return config;
}

static void write_key(const char *path)
{
    uint8_t key[DDS_CLIENT_KEY];
    assert_int_equal(dds_client_random(key, sizeof key), 0);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, key, sizeof key), sizeof key);
    close(fd);
}

/* A fresh key file in a directory of its own. */
struct temp_key {
    char dir[32], file[64];
};

static void temp_key_make(struct temp_key *k)
{
    snprintf(k->dir, sizeof k->dir, "/tmp/spindle-dds-key-XXXXXX");
    assert_non_null(mkdtemp(k->dir));
    snprintf(k->file, sizeof k->file, "%s/key", k->dir);
    write_key(k->file);
}

static void temp_key_remove(const struct temp_key *k)
{
    unlink(k->file);
    rmdir(k->dir);
}

/* Publishes one sample and receives it back through the member. A sample
 * that an earlier client published may still be delivered after this
 * subscription took effect: it comes first, with a smaller seq. */
static void check_round_trip(spindle_dds_client_t *client)
{
    assert_int_equal(spindle_dds_client_subscribe(client, "in", false), 0);
    uint64_t value = 42, got[8] = {0};
    int64_t seq = spindle_dds_client_publish(client, "in", &value, sizeof value, NULL);
    assert_true(seq > 0);
    /* The application's loop: receive without waiting, then poll the
     * client's descriptor. */
    struct spindle_dds_client_sample_info info;
    int rc;
    for (;;) {
        rc = spindle_dds_client_receive(client, got, sizeof got, &info, 0);
        if (rc == SPINDLE_EAGAIN) {
            struct pollfd pfd = {.fd = spindle_dds_client_fd(client), .events = POLLIN};
            assert_true(pfd.fd >= 0);
            assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
            continue;
        }
        assert_true(rc >= 0);
        if (info.sample.seq == (uint64_t)seq)
            break;
        assert_true(info.sample.seq < (uint64_t)seq);
    }
    assert_int_equal(rc, sizeof value);
    assert_int_equal(got[0], value);
}

static void test_client_without_the_group_key_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-dds-key-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char key[64], other[64], address[32];
    snprintf(key, sizeof key, "%s/key", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    write_key(key);
    write_key(other);
    uint16_t port;
    struct spindle_dds_config *config = single_member(key, &port);
    struct member_arg arg = {.members = 1};
    struct dds_forked forked[1];
    fork_members(forked, 1, config, &arg);
    snprintf(address, sizeof address, "127.0.0.1:%u", port);
    const char *members[1] = {address};
    struct spindle_dds_client_options o = {.members = members, .num_members = 1};
    spindle_dds_client_t *client = NULL;
    assert_int_equal(spindle_dds_client_connect(&o, &client), SPINDLE_EAUTH);
    assert_non_null(strstr(spindle_dds_errmsg(), "its group has a key"));
    o.key_file = other;
    assert_int_equal(spindle_dds_client_connect(&o, &client), SPINDLE_EAUTH);
    assert_non_null(strstr(spindle_dds_errmsg(), "does not prove it"));
    o.key_file = key;
    assert_int_equal(spindle_dds_client_connect(&o, &client), 0);
    check_round_trip(client);
    spindle_dds_client_close(client);
    struct dds_report report;
    end_members(forked, 1, &arg, -1, &report);
    assert_int_equal(report.from_history, 1); /* the other key's client */
    free(config);
    unlink(key);
    unlink(other);
    rmdir(dir);
}

/* A client (with key_file, or none) of the one member at port. */
static spindle_dds_client_t *connect_one(uint16_t port, const char *key_file)
{
    char address[32];
    snprintf(address, sizeof address, "127.0.0.1:%u", port);
    const char *members[1] = {address};
    struct spindle_dds_client_options o = {
        .members = members, .num_members = 1, .key_file = key_file};
    spindle_dds_client_t *client;
    if (spindle_dds_client_connect(&o, &client) != 0)
        fail_msg("connect to %s: %s", address, spindle_dds_errmsg());
    return client;
}

/* A client (with key_file, or none) of the one member at port makes a
 * round trip; then the member stops: the connections it refused. */
static uint64_t serve_and_end(uint16_t port, const char *key_file, struct dds_forked *forked,
                              const struct member_arg *arg)
{
    spindle_dds_client_t *client = connect_one(port, key_file);
    check_round_trip(client);
    spindle_dds_client_close(client);
    struct dds_report report;
    end_members(forked, 1, arg, -1, &report);
    return report.from_history;
}

static void test_malformed_client_bytes_do_not_hurt_the_member(void **state)
{
    (void)state;
    uint16_t port;
    struct spindle_dds_config *config = single_member(NULL, &port);
    struct member_arg arg = {.members = 1};
    struct dds_forked forked[1];
    fork_members(forked, 1, config, &arg);

    const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, DDS_CLIENT_HELLO};
    expect_refusal(port, huge, sizeof huge, "frame length");
    const uint8_t early[] = {4, 0, 0, 0, DDS_CLIENT_SUBSCRIBE, 0, 1, 'x'};
    expect_refusal(port, early, sizeof early, "before the HELLO");
    uint8_t hello[4 + 1 + 6 + DDS_CLIENT_NONCE + DDS_CLIENT_PROOF] = {
        sizeof hello - 4, 0, 0, 0, DDS_CLIENT_HELLO, 'n', 'o', 'p', 'e', 1, 0};
    expect_refusal(port, hello, sizeof hello, "bad magic");
    const uint8_t trailing[] = {3, 0, 0, 0, DDS_CLIENT_SUBSCRIBE, 0, 0};
    expect_refusal(port, trailing, sizeof trailing, "SUBSCRIBE frame: bad topic name");
    const uint8_t unknown[] = {1, 0, 0, 0, 77};
    expect_refusal(port, unknown, sizeof unknown, "unknown frame type 77");
    /* Half a frame, then the client goes away. */
    int fd = raw_connect(port, 0);
    const uint8_t half[] = {200, 0, 0, 0, DDS_CLIENT_PUBLISH, 1, 'i'};
    assert_int_equal(send(fd, half, sizeof half, MSG_NOSIGNAL), (ssize_t)sizeof half);
    close(fd);

    /* every malformed connection but the half frame */
    assert_int_equal(serve_and_end(port, NULL, forked, &arg), 5);
    free(config);
}

#define BIG_SAMPLE  60000
#define BIG_SAMPLES 600 /* 36 MB: beyond the listener's 8 MiB and the sockets' buffers */

/* A subscriber of "big" (with key, or none) whose receive buffer is small
 * and fixed: its member's output is what must hold the samples. */
static int raw_subscriber(uint16_t port, const uint8_t *key, uint8_t *in,
                          struct dds_client_seal *seal)
{
    int fd = raw_connect(port, 16384);
    raw_handshake(fd, key, in, seal);
    uint8_t out[256];
    raw_send_sealed(fd, seal,
                    &(struct dds_client_frame){.type = DDS_CLIENT_SUBSCRIBE, .name = "big"}, out);
    struct dds_client_frame frame;
    assert_int_equal(raw_read_sealed(fd, in, seal, &frame, DEADLINE_MS), 1);
    assert_int_equal(frame.type, DDS_CLIENT_SUBSCRIBED);
    return fd;
}

/* A client that does not read while another publishes: the member drops
 * the samples its output cannot take and counts them, exactly what the
 * slow client then sees missing, and goes on. With key_file, the output's
 * bound holds for sealed frames. */
static void slow_client_scenario(const char *key_file)
{
    uint8_t key[DDS_CLIENT_KEY];
    if (key_file != NULL)
        assert_int_equal(dds_client_key_load(key_file, key), 0);
    char text[4096];
    dds_config_head(text, sizeof text, 1, NULL);
    size_t at = strlen(text);
    uint16_t port = test_free_port();
    snprintf(text + at, sizeof text - at,
             "[participant.0]\nclient_port = %u\n%s%s\n"
             "[topic.0]\nname = big\nqos = atomic\npublishers = 0\nsubscribers = 0\n"
             "max_sample_size = %u\nwindow = 8\n",
             port, key_file != NULL ? "[dds]\nkey_file = " : "", key_file != NULL ? key_file : "",
             BIG_SAMPLE);
    struct spindle_dds_config *config;
    assert_int_equal(spindle_dds_config_parse(text, strlen(text), "test.ini", &config), 0);
    struct member_arg arg = {.members = 1};
    struct dds_forked forked[1];
    fork_members(forked, 1, config, &arg);
    uint8_t *in = malloc(4 + DDS_CLIENT_MAX_FRAME);
    assert_non_null(in);
    struct dds_client_seal seal;
    int slow = raw_subscriber(port, key_file != NULL ? key : NULL, in, &seal);
    spindle_dds_client_t *publisher = connect_one(port, key_file);
    static uint8_t sample[BIG_SAMPLE];
    uint64_t published = 0;
    for (; published < BIG_SAMPLES; published++)
        assert_int_equal(spindle_dds_client_publish(publisher, "big", sample, sizeof sample, NULL),
                         (int64_t)published + 1);
    /* The slow client reads now; a marker follows each quiet second, until
     * one gets through the drained output. */
    uint64_t received = 0, missed = 0, last = 0;
    time_t start = time(NULL);
    while (last <= BIG_SAMPLES) {
        if (time(NULL) - start > DEADLINE_MS / 1000)
            fail_msg("after %d s: %llu received, last seq %llu", DEADLINE_MS / 1000,
                     (unsigned long long)received, (unsigned long long)last);
        struct dds_client_frame frame;
        if (raw_read_sealed(slow, in, &seal, &frame, 1000) == 0) {
            assert_int_equal(spindle_dds_client_publish(publisher, "big", sample, 8, NULL),
                             (int64_t)++published);
            continue;
        }
        assert_int_equal(frame.type, DDS_CLIENT_SAMPLE);
        assert_true(frame.seq > last);
        missed += frame.seq - last - 1;
        last = frame.seq;
        received++;
    }
    assert_int_equal(received + missed, last);
    assert_true(missed > 0);
    close(slow);
    free(in);
    spindle_dds_client_close(publisher);
    struct dds_report report;
    end_members(forked, 1, &arg, -1, &report);
    assert_int_equal(report.received, missed); /* the member counted what it dropped */
    free(config);
}

static void test_slow_client_loses_samples_the_member_counts(void **state)
{
    (void)state;
    slow_client_scenario(NULL);
}

static void test_keyed_client_that_lags_loses_samples_the_member_counts(void **state)
{
    (void)state;
    struct temp_key k;
    temp_key_make(&k);
    slow_client_scenario(k.file);
    temp_key_remove(&k);
}

/* With a key every frame after READY is sealed: the member opens the
 * client's and seals its own; a frame altered on the wire, replayed or
 * reordered gets a sealed ERROR naming which, the connection is closed and
 * counted as refused, and the member goes on. */
static void test_sealed_frames_altered_or_replayed_are_refused(void **state)
{
    (void)state;
    struct temp_key k;
    temp_key_make(&k);
    uint8_t key[DDS_CLIENT_KEY];
    assert_int_equal(dds_client_key_load(k.file, key), 0);
    uint16_t port;
    struct spindle_dds_config *config = single_member(k.file, &port);
    struct member_arg arg = {.members = 1};
    struct dds_forked forked[1];
    fork_members(forked, 1, config, &arg);
    uint8_t in[4 + 2048], out[256];
    struct dds_client_frame frame;
    const struct dds_client_frame subscribe = {.type = DDS_CLIENT_SUBSCRIBE, .name = "in"};
    const uint8_t reading[] = "a reading";
    const struct dds_client_frame publish = {
        .type = DDS_CLIENT_PUBLISH, .name = "in", .data = reading, .length = sizeof reading};

    /* Both ways through the seal, then a flipped byte. */
    struct dds_client_seal seal;
    int fd = raw_keyed_client(port, key, in, &seal);
    raw_send_sealed(fd, &seal, &subscribe, out);
    assert_int_equal(raw_read_sealed(fd, in, &seal, &frame, DEADLINE_MS), 1);
    assert_int_equal(frame.type, DDS_CLIENT_SUBSCRIBED);
    size_t n = dds_client_frame_seal(&seal, out, sizeof out, &publish);
    assert_true(n > 0);
    assert_null(memmem(out, n, reading, sizeof reading)); /* not in the clear */
    out[n - 20] ^= 1;
    assert_int_equal(send(fd, out, n, MSG_NOSIGNAL), (ssize_t)n);
    expect_sealed_refusal(fd, in, &seal, "sealed frame (counter 1, 1 due) failed authentication");

    /* A frame sent twice. */
    fd = raw_keyed_client(port, key, in, &seal);
    n = raw_send_sealed(fd, &seal, &publish, out);
    assert_int_equal(raw_read_sealed(fd, in, &seal, &frame, DEADLINE_MS), 1);
    assert_int_equal(frame.type, DDS_CLIENT_PUBLISHED);
    assert_int_equal(send(fd, out, n, MSG_NOSIGNAL), (ssize_t)n);
    expect_sealed_refusal(fd, in, &seal,
                          "sealed frame 0 arrived again after frame 0 was opened (replayed)");

    /* Two frames swapped. */
    fd = raw_keyed_client(port, key, in, &seal);
    uint8_t first[256];
    size_t n1 = dds_client_frame_seal(&seal, first, sizeof first, &subscribe);
    n = dds_client_frame_seal(&seal, out, sizeof out, &publish);
    assert_true(n1 > 0 && n > 0);
    assert_int_equal(send(fd, out, n, MSG_NOSIGNAL), (ssize_t)n);
    expect_sealed_refusal(fd, in, &seal, "sealed frame 1 arrived where frame 0 was due");

    /* The member serves a keyed client after all of it. */
    assert_int_equal(serve_and_end(port, k.file, forked, &arg), 3);
    free(config);
    temp_key_remove(&k);
}

/* argv[1], when given, runs only the tests it matches (one ctest each). */
int main(int argc, char **argv)
{
    if (argc > 1)
        cmocka_set_test_filter(argv[1]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_fails_over_to_another_member),
        cmocka_unit_test(test_client_without_the_group_key_is_refused),
        cmocka_unit_test(test_malformed_client_bytes_do_not_hurt_the_member),
        cmocka_unit_test(test_slow_client_loses_samples_the_member_counts),
        cmocka_unit_test(test_sealed_frames_altered_or_replayed_are_refused),
        cmocka_unit_test(test_keyed_client_that_lags_loses_samples_the_member_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
