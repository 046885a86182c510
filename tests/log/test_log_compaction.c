/*
 * Snapshots through the public call on a running member: over a long run
 * with a snapshot every SNAPSHOT_EVERY messages, the log directory stays
 * within a bound computed from the segment size, the snapshot interval and
 * the snapshots' size, while far more than that bound is written; the
 * records after the older kept snapshot are all there, in order; the two
 * newest snapshots are kept and read back; a temporary file a crash left
 * is removed at start; and points the member cannot snapshot are refused,
 * named.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "group/group_impl.h"
#include "log/log.h"
#include "log/log_append.h"
#include "log/log_direct.h"
#include "log/log_snapshot.h"
#include "log_samples.h"

#define MESSAGES       4096
#define SIZE           1000
#define SEGMENT_BYTES  (32u << 10)
#define SNAPSHOT_EVERY 256 /* messages */
#define DURABLE_EVERY  64  /* messages: a batch of the writer holds at most these */
#define RECORD_BYTES   (LOG_RECORD_HEADER_SIZE + LOG_MESSAGE_FIXED_SIZE + SIZE)

static char root[64];

/* The application's state: what it applied, and the point after it. */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static struct app_state {
    uint64_t applied;
    uint64_t sum;
} app;
static uint64_t point_view, point_seq;

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    pthread_mutex_lock(&state_lock);
    for (size_t i = 0; i < n; i++) {
        app.applied++;
        app.sum += ((const uint8_t *)m[i].data)[0];
        point_view = m[i].view_id;
        point_seq = m[i].seq + 1;
    }
    pthread_mutex_unlock(&state_lock);
}

/* Bytes of the regular files in dir; *snapshots counts snapshot files. */
static uint64_t dir_bytes(const char *dir, unsigned *snapshots)
{
    DIR *listing = opendir(dir);
    assert_non_null(listing);
    uint64_t bytes = 0;
    *snapshots = 0;
    for (struct dirent *e; (e = readdir(listing)) != NULL;) {
        struct stat st;
        if (fstatat(dirfd(listing), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode)) {
            bytes += (uint64_t)st.st_size;
            *snapshots += strstr(e->d_name, ".snap") != NULL;
        }
    }
    closedir(listing);
    return bytes;
}

/*
 * What the directory may hold once compaction has caught up, right after
 * a snapshot (nothing delivered since): the segment holding the older
 * snapshot's point (a full segment, which may pass SEGMENT_BYTES by one
 * batch of the writer), the records from there to the newest point (one
 * interval), a header per segment for those, the view record, the two
 * snapshot files, and the zeros the appender writes ahead of the tail
 * segment's records (log/log_direct.h: up to the block after the point
 * where the segment is sealed).
 */
static uint64_t bound(void)
{
    uint64_t segment = SEGMENT_BYTES + DURABLE_EVERY * RECORD_BYTES;
    uint64_t interval = SNAPSHOT_EVERY * RECORD_BYTES;
    uint64_t headers = (interval / SEGMENT_BYTES + 2) * LOG_SEGMENT_HEADER_SIZE;
    uint64_t snapshot =
        log_snapshot_encode(&(struct log_snapshot){.view.member_count = 1}, NULL, 0) + sizeof app;
    return segment + interval + headers + 4096 + 2 * snapshot + SEGMENT_BYTES + LOG_DIRECT_BLOCK;
}

static spindle_group_t *start(const char *log_dir)
{
    char bootstrap[128];
    snprintf(bootstrap, sizeof bootstrap, "%s/bootstrap", root);
    static const uint32_t self[] = {0};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = bootstrap;
    o.deliver = on_deliver;
    o.log_dir = log_dir;
    o.logged_subgroups = self;
    o.num_logged_subgroups = 1;
    struct spindle_subgroup_config sg = {self, 1, self, 1, 64, 4096, SPINDLE_MODE_ATOMIC};
    struct group_test_options test = {.log_segment_bytes = SEGMENT_BYTES};
    spindle_group_t *g;
    assert_int_equal(group_create_with(&o, &sg, 1, &test, &g), 0);
    return g;
}

static void expect_message(int rc, const char *says)
{
    if (rc >= 0 || strstr(spindle_errmsg(), says) == NULL)
        fail_msg("rc %d, \"%s\" does not say \"%s\"", rc, spindle_errmsg(), says);
}

static void test_periodic_snapshots_keep_the_log_bounded(void **state)
{
    (void)state;
    char log_dir[128], temp[256];
    snprintf(log_dir, sizeof log_dir, "%s/log", root);
    assert_int_equal(mkdir(log_dir, 0700), 0);
    /* What a crash while writing a snapshot leaves. */
    snprintf(temp, sizeof temp, "%s/000-00000000000000000001-00000000000000000100.snap.tmp",
             log_dir);
    FILE *torn = fopen(temp, "w");
    assert_non_null(torn);
    fputs("SPNDLSNP", torn);
    fclose(torn);
    spindle_group_t *g = start(log_dir);
    assert_int_equal(access(temp, F_OK), -1);
    struct log_appender *appender = g->membership.appender;
    uint8_t message[SIZE];
    uint64_t worst = 0, limit = bound();
    unsigned snapshots = 0, files;
    struct app_state taken;
    uint64_t taken_view = 0, taken_seq = 0, older_seq = 0;
    for (uint32_t i = 0; i < MESSAGES; i++) {
        memset(message, (int)(i & 0xff), sizeof message);
        assert_int_equal(spindle_send(g, 0, message, sizeof message, 0), 0);
        if ((i + 1) % DURABLE_EVERY != 0)
            continue;
        assert_int_equal(spindle_flush_persistent(g, 0, 30000), 0);
        if ((i + 1) % SNAPSHOT_EVERY != 0)
            continue;
        pthread_mutex_lock(&state_lock);
        taken = app;
        older_seq = taken_seq;
        taken_view = point_view;
        taken_seq = point_seq;
        pthread_mutex_unlock(&state_lock);
        assert_int_equal(taken.applied, i + 1);
        assert_int_equal(spindle_group_snapshot(g, 0, taken_view, taken_seq, &taken, sizeof taken),
                         0);
        snapshots++;
        assert_int_equal(log_appender_compact_wait(appender, 30000), 0);
        uint64_t bytes = dir_bytes(log_dir, &files);
        assert_int_equal(files, snapshots < 2 ? 1 : 2);
        if (snapshots >= 2) {
            if (bytes > limit)
                fail_msg("after snapshot %u the log directory holds %" PRIu64
                         " bytes, above the bound %" PRIu64,
                         snapshots, bytes, limit);
            worst = bytes > worst ? bytes : worst;
        }
    }
    uint64_t written = log_appender_durable_bytes(appender);
    printf("written %" PRIu64 " bytes; the directory held at most %" PRIu64 " (bound %" PRIu64
           "), %" PRIu64 " segments removed\n",
           written, worst, limit, log_appender_segments_removed(appender));
    assert_true(written > 8 * limit);
    assert_true(log_appender_segments_removed(appender) > 0);
    /* Points it cannot take, named. */
    expect_message(spindle_group_snapshot(g, 0, taken_view, taken_seq + 1, &taken, sizeof taken),
                   "past what this member delivered");
    expect_message(spindle_group_snapshot(g, 0, taken_view, older_seq, &taken, sizeof taken),
                   "before its newest snapshot");
    expect_message(spindle_group_snapshot(g, 1, taken_view, 0, &taken, sizeof taken),
                   "not a logged subgroup");
    expect_message(spindle_group_snapshot(g, 0, taken_view, taken_seq, NULL, 4), "NULL");
    assert_int_equal(spindle_group_shutdown(g, 10000), 0);
    spindle_group_destroy(g);

    /* The log from the older snapshot's point on: every message in order,
     * the last one last. */
    struct log *log;
    assert_int_equal(log_open(log_dir, 0, &log, NULL), 0);
    assert_true(log->first_position > 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    bool first = true;
    uint64_t next = 0;
    while (log_reader_next(&reader, &record) == 1) {
        if (record.type != LOG_REC_MESSAGE)
            continue;
        if (first) {
            assert_true(record.message.seq <= older_seq);
            next = record.message.sender_index;
            first = false;
        }
        assert_int_equal(record.message.sender_index, next);
        assert_int_equal(record.message.payload[0], next & 0xff);
        next++;
    }
    assert_int_equal(next, MESSAGES);
    log_reader_close(&reader);
    /* The newest two snapshots: the last holds the state it was given. */
    struct log_snapshot_file *list;
    size_t count;
    assert_int_equal(log_snapshot_list(log->dir_fd, log_dir, false, &list, &count), 0);
    assert_int_equal(count, 2);
    assert_true(list[0].valid && list[1].valid);
    assert_int_equal(list[0].snap.seq, older_seq);
    assert_int_equal(list[1].snap.seq, taken_seq);
    assert_int_equal(list[1].snap.view.member_count, 1);
    struct log_snapshot snap;
    void *bytes;
    assert_int_equal(log_snapshot_read(log->dir_fd, log_dir, list[1].name, &snap, &bytes), 0);
    assert_int_equal(snap.state_length, sizeof taken);
    assert_memory_equal(bytes, &taken, sizeof taken);
    free(bytes);
    free(list);
    log_close(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_periodic_snapshots_keep_the_log_bounded),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logcompact", tests);
}
