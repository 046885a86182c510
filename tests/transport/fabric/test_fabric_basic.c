/*
 * fabric backend, single process: set-up errors name their culprit, writes
 * land (including ones split across records), completions and doorbells are
 * reported, bounds are checked. Runs for the provider given as argv[1].
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "test_ports.h"

#include "test_fabric_util.h"
#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"

static const char *provider = "tcp";

static uint16_t addr_port(struct tp_endpoint *ep)
{
    struct tp_desc desc;
    assert_int_equal(tp_address(ep, &desc), 0);
    char host[FAB_HOST_MAX];
    uint16_t port;
    uint64_t nonce;
    uint32_t id;
    assert_int_equal(fab_addr_decode(&desc, host, sizeof host, &port, &nonce, &id), 0);
    return port;
}

static void test_unknown_provider_names_it_and_lists_found(void **state)
{
    (void)state;
    struct tp_endpoint *ep = NULL;
    int rc = tf_open("carrier-pigeon", 0, 0, 1000, &ep);
    assert_int_equal(rc, SPINDLE_ENODEV);
    assert_null(ep);
    assert_non_null(strstr(spindle_errmsg(), "'carrier-pigeon'"));
    assert_non_null(strstr(spindle_errmsg(), "tcp"));
    assert_non_null(strstr(spindle_errmsg(), "sockets"));
}

static void test_ephemeral_port_is_reported_and_port_in_use_named(void **state)
{
    (void)state;
    struct tp_endpoint *first = NULL, *second = NULL;
    assert_int_equal(tf_open(provider, 0, 0, 1000, &first), 0);
    uint16_t port = addr_port(first);
    assert_true(port != 0);
    int rc = tf_open(provider, 1, port, 1000, &second);
    assert_int_equal(rc, SPINDLE_EADDRINUSE);
    char expect[64];
    snprintf(expect, sizeof expect, "127.0.0.1:%u", port);
    assert_non_null(strstr(spindle_errmsg(), expect));
    tp_close(first);
}

static void test_unreachable_peers_are_named(void **state)
{
    (void)state;
    struct tp_endpoint *ep = NULL;
    assert_int_equal(tf_open(provider, 0, 0, 1000, &ep), 0);
    struct tp_desc desc;
    struct tp_peer *peer = NULL;
    uint16_t port = test_free_port();
    assert_int_equal(fab_addr_encode("127.0.0.1", port, 42, 7, &desc), 0);
    uint64_t t0 = sp_now_ns();
    assert_int_equal(tp_connect(ep, &desc, 2000, &peer), SPINDLE_EUNREACH);
    assert_true(sp_now_ns() - t0 < 4000000000ull);
    char expect[64];
    snprintf(expect, sizeof expect, "127.0.0.1:%u", port);
    assert_non_null(strstr(spindle_errmsg(), expect));

    assert_int_equal(fab_addr_encode("no-such-host.invalid", 4000, 42, 7, &desc), 0);
    t0 = sp_now_ns();
    assert_int_equal(tp_connect(ep, &desc, 2000, &peer), SPINDLE_EUNREACH);
    assert_true(sp_now_ns() - t0 < 4000000000ull);
    assert_non_null(strstr(spindle_errmsg(), "no-such-host.invalid"));
    assert_null(peer);
    tp_close(ep);
}

/* Regression (tests/fuzz/fuzz_fab_addr, fuzz_fab_region): descriptors a
 * peer could send that decode to something the encoder would not write. A
 * NUL inside the host cut it short; a nonzero pad was ignored. Both are
 * refused, naming the offset. */
static void test_descriptors_the_encoder_cannot_write_are_refused(void **state)
{
    (void)state;
    struct tp_desc desc;
    char host[FAB_HOST_MAX];
    uint16_t port;
    uint64_t nonce, region, length;
    uint32_t id;
    assert_int_equal(fab_addr_encode("127.0.0.1", 7000, 42, 7, &desc), 0);
    desc.bytes[FAB_ADDR_WIRE + 3] = '\0'; /* "127\0.0.1" */
    assert_int_equal(fab_addr_decode(&desc, host, sizeof host, &port, &nonce, &id), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "NUL byte at offset 23"));

    fab_region_encode(3, 4096, &desc);
    assert_int_equal(fab_region_decode(&desc, &region, &length), 0);
    desc.bytes[4] = 0x30; /* the pad after the magic */
    assert_int_equal(fab_region_decode(&desc, &region, &length), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "pad is 0x30, not 0, at offset 4"));
}

struct pair {
    struct tp_endpoint *a, *b;
    struct tp_peer *a_to_b;
    struct tp_mr *region; /* at b */
    uint8_t *mem;
    struct tp_rmr *rmr;
    struct tp_mr *src_mr;
    uint8_t *src;
};

#define REGION (512u << 10)

static void pair_open_failing_after(struct pair *p, int fail_ms)
{
    memset(p, 0, sizeof *p);
    assert_int_equal(tf_open(provider, 0, 0, fail_ms, &p->a), 0);
    assert_int_equal(tf_open(provider, 1, 0, fail_ms, &p->b), 0);
    struct tp_desc addr, rdesc;
    assert_int_equal(tp_address(p->b, &addr), 0);
    assert_int_equal(tp_connect(p->a, &addr, 5000, &p->a_to_b), 0);
    void *mem;
    assert_int_equal(tp_mr_alloc(p->b, REGION, TP_MR_REMOTE_WRITE, &mem, &p->region), 0);
    p->mem = mem;
    assert_int_equal(tp_mr_export(p->region, &rdesc), 0);
    assert_int_equal(tp_rmr_import(p->a_to_b, &rdesc, &p->rmr), 0);
    assert_int_equal(tp_mr_alloc(p->a, REGION, 0, &mem, &p->src_mr), 0);
    p->src = mem;
}

static void pair_open(struct pair *p)
{
    pair_open_failing_after(p, 2000);
}

static void pair_close(struct pair *p)
{
    tp_rmr_release(p->a_to_b, p->rmr);
    tp_disconnect(p->a, p->a_to_b);
    tp_close(p->a);
    tp_close(p->b);
}

static void test_writes_land_in_order_and_complete(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    /* A 300 KiB write (split into several records) then a guard. */
    size_t big = 300u << 10;
    for (size_t i = 0; i < big; i++)
        p.src[i] = (uint8_t)(i * 7 + 3);
    uint64_t guard = 0x1122334455667788ull;
    memcpy(p.src + big, &guard, 8);
    struct tp_write w[2] = {{p.src, p.src_mr, p.rmr, 8, (uint32_t)big},
                            {p.src + big, p.src_mr, p.rmr, 0, 8}};
    assert_int_equal(tp_post_writes(p.a_to_b, w, 2, TP_POST_SIGNALED, 99), 0);
    assert_int_equal(tp_doorbell_ring(p.a_to_b), 0);
    assert_true(tf_wait_word(p.b, p.mem, guard, 5000));
    assert_memory_equal(p.mem + 8, p.src, big);

    struct tp_event ev;
    int n = 0;
    uint64_t deadline = sp_now_ns() + 5000000000ull;
    while (n == 0 && sp_now_ns() < deadline) {
        uint64_t token = tp_doorbell_arm(p.a);
        n = tp_poll(p.a, &ev, 1);
        if (n == 0)
            tp_doorbell_wait(p.a, token, 50);
    }
    assert_int_equal(n, 1);
    assert_int_equal(ev.type, TP_EVENT_WRITE_DONE);
    assert_int_equal(ev.cookie, 99);
    assert_ptr_equal(ev.peer, p.a_to_b);
    assert_int_equal(tp_peer_state(p.a_to_b), 0);

    struct tp_stats st;
    tp_stats(p.a, &st);
    /* 300 KiB in 64 KiB records, one write each; the last one's 44 KiB
     * and the guard's record lie back to back and go as one write. */
    assert_int_equal(st.writes_posted, 5);
    assert_int_equal(st.batches_posted, 1);
    assert_int_equal(st.bytes_written, big + 8);
    assert_int_equal(st.signaled, 1);
    pair_close(&p);
}

/* An SST push is a slot and a few counters: the records of a batch that lie
 * back to back in the ring go out as one provider write, and the target
 * applies every one of them, in order, from that write's one completion. */
static void test_small_writes_of_a_batch_go_as_one_write(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    for (uint32_t i = 0; i < 1032; i++)
        p.src[i] = (uint8_t)(i * 5 + 1);
    uint64_t counters[2] = {41, 42};
    memcpy(p.src + 2048, counters, sizeof counters);
    struct tp_write w[3] = {{p.src, p.src_mr, p.rmr, 4096, 1032},
                            {p.src + 2048, p.src_mr, p.rmr, 64, 8},
                            {p.src + 2056, p.src_mr, p.rmr, 128, 8}};
    for (int round = 0; round < 3; round++) {
        counters[0] += 100;
        counters[1] += 100;
        memcpy(p.src + 2048, counters, sizeof counters);
        assert_int_equal(tp_post_writes(p.a_to_b, w, 3, 0, 0), 0);
        assert_true(tf_wait_word(p.b, p.mem + 128, counters[1], 5000));
        /* Posting order (T2): the last record's word is there, so are the
         * others. Read as the progress thread stores them, a word at a time
         * (it may store the next round's same bytes meanwhile). */
        const uint64_t *landed = (const uint64_t *)(const void *)p.mem;
        assert_int_equal(__atomic_load_n(&landed[64 / 8], __ATOMIC_ACQUIRE), counters[0]);
        for (uint32_t i = 0; i < 1032 / 8; i++) {
            uint64_t want;
            memcpy(&want, p.src + 8 * i, 8);
            assert_int_equal(__atomic_load_n(&landed[4096 / 8 + i], __ATOMIC_ACQUIRE), want);
        }
    }
    struct tp_stats st;
    tp_stats(p.a, &st);
    assert_int_equal(st.batches_posted, 3);
    assert_int_equal(st.writes_posted, 3); /* one per batch, not one per record */
    assert_int_equal(st.bytes_written, 3 * (1032 + 16));
    assert_int_equal(tp_peer_state(p.a_to_b), 0);
    pair_close(&p);
}

/* A record that says another of its write follows must leave room for it
 * before the ring's end (a write never wraps), and no other flag exists. */
static void test_record_flags_the_target_cannot_follow_are_refused(void **state)
{
    (void)state;
    static uint8_t ring[FAB_RING_SIZE];
    uint64_t at = FAB_RING_SIZE - 2 * FAB_REC_HDR; /* a 64-byte payload ends the ring */
    struct fab_rec_hdr hdr = {.magic = FAB_REC_MAGIC,
                              .length = 64,
                              .start = FAB_RING_SIZE + at,
                              .end = 2 * FAB_RING_SIZE,
                              .region = 1,
                              .offset = 0};
    struct fab_rec_hdr back;
    memcpy(ring + at, &hdr, sizeof hdr);
    assert_int_equal(fab_rec_read(ring, at, hdr.start, &back), 0);
    hdr.flags = FAB_REC_MORE;
    memcpy(ring + at, &hdr, sizeof hdr);
    assert_int_equal(fab_rec_read(ring, at, hdr.start, &back), SPINDLE_EPROTO);
    /* One record earlier, MORE is what a run of two looks like. */
    hdr.length = 0;
    hdr.start -= FAB_REC_HDR;
    hdr.end = hdr.start + FAB_REC_HDR;
    memcpy(ring + at - FAB_REC_HDR, &hdr, sizeof hdr);
    assert_int_equal(fab_rec_read(ring, at - FAB_REC_HDR, hdr.start, &back), 0);
    assert_int_equal(back.flags, FAB_REC_MORE);
    hdr.flags = 2;
    memcpy(ring + at - FAB_REC_HDR, &hdr, sizeof hdr);
    assert_int_equal(fab_rec_read(ring, at - FAB_REC_HDR, hdr.start, &back), SPINDLE_EPROTO);
}

/* Credits of less than a quarter ring are not returned per completion
 * drain but from the target's timer: a writer that goes idle still gets
 * every credit back (else it would be failed for holding them), soon. */
static void test_idle_writer_gets_its_credits_back(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    uint64_t value = 0x0102030405060708ull;
    memcpy(p.src, &value, 8);
    struct tp_write w = {p.src, p.src_mr, p.rmr, 0, 8};
    assert_int_equal(tp_post_writes(p.a_to_b, &w, 1, 0, 0), 0);
    assert_true(tf_wait_word(p.b, p.mem, value, 5000));
    struct fab_conn *conn = fab_conn_of(p.a_to_b);
    uint64_t posted = atomic_load(&conn->posted);
    uint64_t deadline = sp_now_ns() + 1000000000ull; /* the timer runs every 10 ms */
    while (atomic_load(&conn->acked) != posted && sp_now_ns() < deadline)
        tp_doorbell_wait(p.a, tp_doorbell_arm(p.a), 10);
    assert_int_equal(atomic_load(&conn->acked), posted);
    pair_close(&p);
}

/* Posts one 8-byte write of value at offset 0 and waits until it landed. */
static void post_one_and_wait(struct pair *p, uint64_t value, unsigned flags, uint64_t cookie)
{
    memcpy(p->src, &value, 8);
    struct tp_write w = {p->src, p->src_mr, p->rmr, 0, 8};
    assert_int_equal(tp_post_writes(p->a_to_b, &w, 1, flags, cookie), 0);
    assert_true(tf_wait_word(p->b, p->mem, value, 5000));
}

/* Waits (at most ms) until the writer's progress thread has accounted for
 * want operations; returns the count it saw last. */
static uint64_t wait_ops_completed(struct pair *p, uint64_t want, int ms)
{
    struct fab_conn *conn = fab_conn_of(p->a_to_b);
    uint64_t deadline = sp_now_ns() + (uint64_t)ms * 1000000ull;
    while (atomic_load(&conn->ops_completed) < want && sp_now_ns() < deadline)
        tp_doorbell_wait(p->a, tp_doorbell_arm(p->a), 10);
    return atomic_load(&conn->ops_completed);
}

/* Polls ep (at most ms) until an event is there; returns tp_poll's count. */
static int poll_one_within(struct tp_endpoint *ep, struct tp_event *ev, int ms)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)ms * 1000000ull;
    int n;
    while ((n = tp_poll(ep, ev, 1)) == 0 && sp_now_ns() < deadline)
        tp_doorbell_wait(ep, tp_doorbell_arm(ep), 10);
    return n;
}

/* A local completion wakes the writer's progress thread, so an unsignaled
 * write asks for one only every signal_every-th operation; that completion
 * accounts for the writes before it (they complete in posting order), and a
 * signaled write always asks and accounts for everything before it. */
static void test_writes_ask_for_local_completions_only_now_and_then(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    struct fab_conn *conn = fab_conn_of(p.a_to_b);
    uint32_t every = conn->signal_every;
    assert_true(every > 1 && every <= conn->ops_max / 4);
    uint64_t value = 1000;
    for (uint32_t i = 0; i < 2 * every + 3; i++)
        post_one_and_wait(&p, ++value, 0, 0);
    /* Operations every - 1 and 2 * every - 1 asked; the last three did not
     * (nor will they report: wait a little for a completion that must not
     * come). */
    assert_int_equal(wait_ops_completed(&p, 2 * every, 5000), 2 * every);
    assert_int_equal(wait_ops_completed(&p, 2 * every + 1, 200), 2 * every);
    struct tp_event ev;
    assert_int_equal(tp_poll(p.a, &ev, 1), 0); /* no WRITE_DONE without the flag */
    post_one_and_wait(&p, ++value, TP_POST_SIGNALED, 5);
    assert_int_equal(wait_ops_completed(&p, 2 * every + 4, 5000), 2 * every + 4);
    /* The progress thread counts the operations before it queues the
     * event: wait for the event too. */
    assert_int_equal(poll_one_within(p.a, &ev, 5000), 1);
    assert_int_equal(ev.type, TP_EVENT_WRITE_DONE);
    assert_int_equal(ev.cookie, 5);
    assert_int_equal(tp_peer_state(p.a_to_b), 0);
    pair_close(&p);
}

/* Writes that asked for no completion never report one: once the target has
 * applied them (its credits came back) the writer holds nothing, and an idle
 * writer is not failed for them however long it stays idle. */
static void test_writes_without_completions_do_not_fail_an_idle_peer(void **state)
{
    (void)state;
    struct pair p;
    /* A timeout a starved progress thread on a loaded host does not reach
     * by accident (200 ms once did), idled through one and a half times:
     * credits that never came back would fail the peer in that time. */
    pair_open_failing_after(&p, 1000);
    struct fab_conn *conn = fab_conn_of(p.a_to_b);
    post_one_and_wait(&p, 77, 0, 0);
    post_one_and_wait(&p, 78, 0, 0);
    assert_true(atomic_load(&conn->ops_completed) < conn->ops_posted);
    /* The credit timer runs every 10 ms. */
    uint64_t until = sp_now_ns() + 1500000000ull;
    while (sp_now_ns() < until)
        tp_doorbell_wait(p.a, tp_doorbell_arm(p.a), 50);
    assert_int_equal(atomic_load(&conn->acked), atomic_load(&conn->posted));
    assert_int_equal(tp_peer_state(p.a_to_b), 0);
    post_one_and_wait(&p, 79, 0, 0);
    pair_close(&p);
}

static void test_out_of_bounds_writes_are_refused(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    struct tp_write w = {p.src, p.src_mr, p.rmr, REGION - 4, 8};
    assert_int_equal(tp_post_writes(p.a_to_b, &w, 1, 0, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "exceeds the remote region"));
    pair_close(&p);
}

/* More than one ring's worth in one batch (a window of large messages) is
 * posted in parts, in order: the guard written last still lands last. */
static void test_batch_larger_than_a_ring_lands_in_order(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    size_t quarter = (REGION - 8) / 4 / 8 * 8;
    struct tp_write many[13];
    unsigned n = 0;
    for (size_t i = 0; i < 4 * quarter; i++)
        p.src[i] = (uint8_t)(i * 13 + 5);
    /* The region three times over (1.5 MiB), then a guard. */
    for (unsigned pass = 0; pass < 3; pass++)
        for (unsigned q = 0; q < 4; q++)
            many[n++] = (struct tp_write){p.src + q * quarter, p.src_mr, p.rmr, q * quarter,
                                          (uint32_t)quarter};
    uint64_t guard = 0x5a5a5a5a12345678ull;
    memcpy(p.src + REGION - 8, &guard, 8);
    many[n++] = (struct tp_write){p.src + REGION - 8, p.src_mr, p.rmr, REGION - 8, 8};
    assert_true(3 * 4 * quarter > FAB_RING_SIZE);
    assert_int_equal(tp_post_writes(p.a_to_b, many, n, TP_POST_SIGNALED, 7), 0);
    assert_true(tf_wait_word(p.b, p.mem + REGION - 8, guard, 10000));
    assert_memory_equal(p.mem, p.src, 4 * quarter);
    assert_int_equal(tp_peer_state(p.a_to_b), 0);
    struct tp_stats st;
    tp_stats(p.a, &st);
    assert_int_equal(st.batches_posted, 1);
    assert_true(st.doorbells >= 2); /* more than one part */
    pair_close(&p);
}

static void test_credits_run_out_and_come_back(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p);
    /* Post until refused or far beyond one ring; then every later write
     * still lands once credits return. */
    uint64_t value = 0;
    int eagain = 0;
    for (int i = 0; i < 20000; i++) {
        value++;
        memcpy(p.src, &value, 8);
        struct tp_write w = {p.src, p.src_mr, p.rmr, 0, 8};
        int rc = tp_post_writes(p.a_to_b, &w, 1, 0, 0);
        if (rc == SPINDLE_EAGAIN) {
            eagain++;
            value--;
            uint64_t token = tp_doorbell_arm(p.a);
            tp_doorbell_wait(p.a, token, 20);
            continue;
        }
        assert_int_equal(rc, 0);
    }
    assert_true(tf_wait_word(p.b, p.mem, value, 10000));
    print_message("provider %s: %d EAGAIN refusals over 20000 posts\n", provider, eagain);
    pair_close(&p);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    tf_require_provider(provider);
    if (tp_backend_find("fabric") == NULL) {
        fprintf(stderr, "FATAL: fabric backend not built: %s\n", spindle_errmsg());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_provider_names_it_and_lists_found),
        cmocka_unit_test(test_ephemeral_port_is_reported_and_port_in_use_named),
        cmocka_unit_test(test_unreachable_peers_are_named),
        cmocka_unit_test(test_descriptors_the_encoder_cannot_write_are_refused),
        cmocka_unit_test(test_writes_land_in_order_and_complete),
        cmocka_unit_test(test_small_writes_of_a_batch_go_as_one_write),
        cmocka_unit_test(test_record_flags_the_target_cannot_follow_are_refused),
        cmocka_unit_test(test_idle_writer_gets_its_credits_back),
        cmocka_unit_test(test_writes_ask_for_local_completions_only_now_and_then),
        cmocka_unit_test(test_writes_without_completions_do_not_fail_an_idle_peer),
        cmocka_unit_test(test_out_of_bounds_writes_are_refused),
        cmocka_unit_test(test_batch_larger_than_a_ring_lands_in_order),
        cmocka_unit_test(test_credits_run_out_and_come_back),
    };
    return cmocka_run_group_tests_name(provider, tests, NULL, NULL);
}
