/*
 * fabric backend, write grants (tp_mr_grant): the owner of a region says
 * which bytes each member may write, and its progress thread holds every
 * incoming record to that. A member writing inside its grant lands; one
 * writing outside it, or a member without a grant, has its connection
 * failed (the owner's connection back to it reports the failure) and the
 * owner's bytes stay as they were, including those of later writes of the
 * same batch. A region never granted takes writes anywhere; one granted
 * 0 bytes takes none. Runs for the provider given as argv[1].
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test_fabric_util.h"
#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"

static const char *provider = "tcp";

#define REGION     (64u << 10)
#define GRANT_AT   4096u
#define GRANT_SIZE 4096u

/* The owner of a region and one writer, connected both ways (as members of
 * a group are), so the owner learns of the writer's failure as an event. */
struct setup {
    struct tp_endpoint *owner, *writer;
    struct tp_peer *to_owner, *to_writer;
    struct tp_mr *region, *src_mr;
    uint8_t *mem, *src;
    struct tp_rmr *rmr;
};

/* grant: 0 none, GRANT_MEMBER2 member 2 [GRANT_AT, + GRANT_SIZE),
 * GRANT_NOTHING 0 bytes to member 1 (the owner itself). */
#define GRANT_MEMBER2 1
#define GRANT_NOTHING 2

static void setup_open(struct setup *s, uint32_t writer_id, int grant)
{
    memset(s, 0, sizeof *s);
    assert_int_equal(tf_open(provider, 1, 0, 2000, &s->owner), 0);
    assert_int_equal(tf_open(provider, writer_id, 0, 2000, &s->writer), 0);
    void *mem;
    assert_int_equal(tp_mr_alloc(s->owner, REGION, TP_MR_REMOTE_WRITE, &mem, &s->region), 0);
    s->mem = mem;
    if (grant == GRANT_MEMBER2)
        assert_int_equal(tp_mr_grant(s->region, 2, GRANT_AT, GRANT_SIZE), 0);
    if (grant == GRANT_NOTHING)
        assert_int_equal(tp_mr_grant(s->region, 1, 0, 0), 0);
    struct tp_desc addr, rdesc;
    assert_int_equal(tp_address(s->owner, &addr), 0);
    assert_int_equal(tp_connect(s->writer, &addr, 5000, &s->to_owner), 0);
    assert_int_equal(tp_address(s->writer, &addr), 0);
    assert_int_equal(tp_connect(s->owner, &addr, 5000, &s->to_writer), 0);
    assert_int_equal(tp_mr_export(s->region, &rdesc), 0);
    assert_int_equal(tp_rmr_import(s->to_owner, &rdesc, &s->rmr), 0);
    assert_int_equal(tp_mr_alloc(s->writer, REGION, 0, &mem, &s->src_mr), 0);
    s->src = mem;
    memset(s->src, 0xee, REGION);
}

static void setup_close(struct setup *s)
{
    tp_rmr_release(s->to_owner, s->rmr);
    tp_disconnect(s->writer, s->to_owner);
    tp_disconnect(s->owner, s->to_writer);
    tp_close(s->writer);
    tp_close(s->owner);
}

/* Posts one write of length bytes at offset and waits until the word at
 * offset reads 0xeeee... (it landed); 0 when it did not within 5 s. */
static int write_lands(struct setup *s, uint64_t offset, uint32_t length)
{
    struct tp_write w = {s->src, s->src_mr, s->rmr, offset, length};
    assert_int_equal(tp_post_writes(s->to_owner, &w, 1, 0, 0), 0);
    return tf_wait_word(s->owner, s->mem + offset, 0xeeeeeeeeeeeeeeeeull, 5000);
}

/* Waits for the owner's TP_EVENT_PEER_FAILED naming its connection to the
 * writer: 1, or 0 after 10 s. */
static int owner_sees_failure(struct setup *s)
{
    uint64_t deadline = sp_now_ns() + 10000000000ull;
    while (sp_now_ns() < deadline) {
        uint64_t token = tp_doorbell_arm(s->owner);
        struct tp_event ev;
        if (tp_poll(s->owner, &ev, 1) == 1) {
            if (ev.type == TP_EVENT_PEER_FAILED && ev.peer == s->to_writer)
                return 1;
            continue;
        }
        tp_doorbell_wait(s->owner, token, 50);
    }
    return 0;
}

static int all_zero(const uint8_t *mem, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (mem[i] != 0)
            return 0;
    return 1;
}

static void test_writes_inside_the_grant_land_and_outside_fail_the_writer(void **state)
{
    (void)state;
    struct setup s;
    setup_open(&s, 2, GRANT_MEMBER2);
    assert_true(write_lands(&s, GRANT_AT, 64));
    assert_true(write_lands(&s, GRANT_AT + GRANT_SIZE - 8, 8)); /* its last word */
    /* One write straddling the grant's end, then one inside it. */
    struct tp_write w[2] = {{s.src, s.src_mr, s.rmr, GRANT_AT + GRANT_SIZE - 8, 16},
                            {s.src, s.src_mr, s.rmr, GRANT_AT + 512, 8}};
    memset(s.mem + GRANT_AT + GRANT_SIZE - 8, 0, 8);
    assert_int_equal(tp_post_writes(s.to_owner, w, 2, 0, 0), 0);
    assert_true(owner_sees_failure(&s));
    assert_int_equal(tp_peer_state(s.to_writer), SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "outside its grants"));
    /* Nothing of the straddling record, nor of the later one. */
    assert_true(all_zero(s.mem, GRANT_AT + GRANT_SIZE - 8, GRANT_AT + GRANT_SIZE + 8));
    assert_true(all_zero(s.mem, GRANT_AT + 512, GRANT_AT + 520));
    assert_true(all_zero(s.mem, 0, GRANT_AT));
    assert_true(all_zero(s.mem, GRANT_AT + GRANT_SIZE + 8, REGION));
    setup_close(&s);
}

static void test_a_member_without_a_grant_writes_nothing(void **state)
{
    (void)state;
    struct setup s;
    setup_open(&s, 3, GRANT_MEMBER2); /* the grant is member 2's */
    struct tp_write w = {s.src, s.src_mr, s.rmr, GRANT_AT, 8};
    assert_int_equal(tp_post_writes(s.to_owner, &w, 1, 0, 0), 0);
    assert_true(owner_sees_failure(&s));
    assert_int_equal(tp_peer_state(s.to_writer), SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "member 3 wrote"));
    assert_true(all_zero(s.mem, 0, REGION));
    setup_close(&s);
}

static void test_a_region_without_grants_takes_writes_anywhere(void **state)
{
    (void)state;
    struct setup s;
    setup_open(&s, 3, 0);
    assert_true(write_lands(&s, 0, 64));
    assert_true(write_lands(&s, REGION - 8, 8));
    assert_int_equal(tp_peer_state(s.to_writer), 0);
    setup_close(&s);
}

/* An owner that lets no member write the region grants 0 bytes: the
 * region is then closed to every writer, not open to all. */
static void test_a_region_granted_nothing_takes_no_writes(void **state)
{
    (void)state;
    struct setup s;
    setup_open(&s, 3, GRANT_NOTHING);
    struct tp_write w = {s.src, s.src_mr, s.rmr, 0, 8};
    assert_int_equal(tp_post_writes(s.to_owner, &w, 1, 0, 0), 0);
    assert_true(owner_sees_failure(&s));
    assert_int_equal(tp_peer_state(s.to_writer), SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "member 3 wrote"));
    assert_true(all_zero(s.mem, 0, REGION));
    setup_close(&s);
}

static void test_grants_outside_the_region_are_refused(void **state)
{
    (void)state;
    struct tp_endpoint *ep = NULL;
    struct tp_mr *region = NULL;
    void *mem;
    assert_int_equal(tf_open(provider, 1, 0, 2000, &ep), 0);
    assert_int_equal(tp_mr_alloc(ep, 4096, TP_MR_REMOTE_WRITE, &mem, &region), 0);
    assert_int_equal(tp_mr_grant(region, 2, 4000, 200), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "mr_grant"));
    assert_int_equal(tp_mr_grant(region, 2, 4097, 0), SPINDLE_EINVAL);
    assert_int_equal(tp_mr_grant(region, 2, 0, 0), 0); /* nothing, but granted */
    assert_int_equal(tp_mr_grant(region, 2, 0, 4096), 0);
    assert_int_equal(tp_mr_grant(region, 3, 0, 64), 0); /* grants add up */
    tp_mr_free(ep, region);
    tp_close(ep);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    tf_require_provider(provider);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_inside_the_grant_land_and_outside_fail_the_writer),
        cmocka_unit_test(test_a_member_without_a_grant_writes_nothing),
        cmocka_unit_test(test_a_region_without_grants_takes_writes_anywhere),
        cmocka_unit_test(test_a_region_granted_nothing_takes_no_writes),
        cmocka_unit_test(test_grants_outside_the_region_are_refused),
    };
    return cmocka_run_group_tests_name(provider, tests, NULL, NULL);
}
