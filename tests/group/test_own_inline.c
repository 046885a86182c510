/*
 * Own deliveries inline (spindle_group_options.own_inline), with three
 * forked members on shm that all send at once in an unordered subgroup
 * with a small window: every own message is delivered inside the send
 * call that made it, on the sending thread; every member delivers every
 * message once, in per-sender order; no two upcalls of a member overlap,
 * though its predicate thread delivers the others' messages meanwhile.
 * A reservation the sender holds on another subgroup across such a send
 * survives the upcall, and a send from inside an inline upcall goes out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "forked_members.h"

#define MESSAGES 3000 /* per sender, in subgroup 0 */
#define WINDOW   8    /* small: the ring wraps hundreds of times */
#define ECHO     100  /* every ECHO-th own message is echoed in subgroup 1 */
#define HOLD     10   /* every HOLD-th send holds a reservation on subgroup 1 */
#define HELD_TAG 0x100u

struct own_member {
    spindle_group_t *group;
    uint32_t self;
    int busy;                           /* an upcall runs (atomic) */
    uint64_t next_index[MAX_MEMBERS];   /* per sender, subgroup 0 */
    uint64_t echoes_seen[MAX_MEMBERS];  /* subgroup 1 */
    uint64_t held_seen[MAX_MEMBERS];    /* subgroup 1 */
    uint64_t own_inline, own_elsewhere; /* own messages: in the send call or not */
    uint64_t echoes_sent;
    int bad;
    struct counter delivered; /* subgroup 0 and 1 messages, all senders */
};

static _Thread_local bool in_send;

static void own_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct own_member *s = ctx;
    if (__atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQ_REL) != 0)
        s->bad = 1; /* two upcalls at once */
    for (size_t i = 0; i < n; i++) {
        uint64_t value[2];
        if (m[i].length != sizeof value || m[i].sender_id >= MAX_MEMBERS) {
            s->bad = 2;
            continue;
        }
        memcpy(value, m[i].data, sizeof value);
        uint32_t from = m[i].sender_id;
        if (m[i].subgroup == 1 && value[0] == (from | HELD_TAG)) {
            if (value[1] != s->held_seen[from]++)
                s->bad = 7;
            continue;
        }
        if (m[i].subgroup == 1) {
            if (value[0] != from || value[1] != s->echoes_seen[from]++ * ECHO)
                s->bad = 3;
            continue;
        }
        if (value[0] != from || value[1] != s->next_index[from] ||
            m[i].sender_index != s->next_index[from])
            s->bad = 4; /* out of per-sender order, lost or twice */
        s->next_index[from]++;
        if (from != s->self)
            continue;
        if (in_send)
            s->own_inline++;
        else
            s->own_elsewhere++;
        if (value[1] % ECHO == 0) {
            /* From inside an inline upcall, as from any upcall. */
            uint64_t echo[2] = {s->self, value[1]};
            int rc =
                spindle_send(__atomic_load_n(&s->group, __ATOMIC_ACQUIRE), 1, echo, sizeof echo, 0);
            if (rc == 0)
                s->echoes_sent++;
            else if (rc != SPINDLE_EAGAIN)
                s->bad = 5;
            else
                s->bad = 6; /* the echo window is never full here */
        }
    }
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
    counter_add(&s->delivered, n);
}

static int own_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)arg;
    static struct own_member s;
    s.self = self;
    counter_init(&s.delivered);
    struct spindle_group_options o;
    options_for(&o, self, MAX_MEMBERS, dir);
    o.own_inline = true;
    o.deliver = own_deliver;
    o.deliver_ctx = &s;
    struct spindle_subgroup_config sg[2] = {
        {all_ids, MAX_MEMBERS, all_ids, MAX_MEMBERS, WINDOW, 64, SPINDLE_MODE_UNORDERED},
        /* echoes and held messages, within the window: an echo never
         * finds it full */
        {all_ids, MAX_MEMBERS, all_ids, MAX_MEMBERS, MESSAGES / ECHO + MESSAGES / HOLD + 1, 64,
         SPINDLE_MODE_ATOMIC},
    };
    spindle_group_t *group;
    CHECK(spindle_group_create(&o, sg, 2, &group) == 0, "create");
    __atomic_store_n(&s.group, group, __ATOMIC_RELEASE); /* nothing is sent before the barrier */
    CHECK(spindle_barrier(group, 20000) == 0, "barrier");
    for (uint64_t i = 0; i < MESSAGES; i++) {
        uint64_t value[2] = {self, i};
        /* Every HOLD-th send, with a reservation held on the other
         * subgroup: the inline upcall must leave it alone. */
        void *held = NULL;
        bool hold = i % HOLD == 5;
        if (hold)
            CHECK(spindle_reserve(group, 1, 16, 0, &held) == 0, "reserve");
        in_send = true;
        CHECK(spindle_send(group, 0, value, sizeof value, 0) == 0, "send %llu",
              (unsigned long long)i);
        in_send = false;
        if (hold) {
            uint64_t tagged[2] = {self | HELD_TAG, i / HOLD};
            memcpy(held, tagged, sizeof tagged);
            CHECK(spindle_commit(group, 1) == 0, "the held reservation survived");
        }
    }
    uint64_t total = (uint64_t)MAX_MEMBERS * (MESSAGES + MESSAGES / ECHO + MESSAGES / HOLD);
    CHECK(counter_wait(&s.delivered, total), "delivered %llu of %llu",
          (unsigned long long)counter_get(&s.delivered), (unsigned long long)total);
    CHECK(spindle_group_shutdown(group, 30000) == 0, "shutdown");
    CHECK(s.bad == 0, "bad %d", s.bad);
    for (uint32_t m = 0; m < MAX_MEMBERS; m++)
        CHECK(s.next_index[m] == MESSAGES && s.echoes_seen[m] == MESSAGES / ECHO &&
                  s.held_seen[m] == MESSAGES / HOLD,
              "sender %u: %llu messages, %llu echoes, %llu held", m,
              (unsigned long long)s.next_index[m], (unsigned long long)s.echoes_seen[m],
              (unsigned long long)s.held_seen[m]);
    spindle_group_destroy(group);
    struct result r = {.hash = s.own_elsewhere, .eagain = s.echoes_sent, .delivered = s.own_inline};
    report(&r);
    return 0;
}

static void test_own_unordered_messages_are_delivered_once_in_order_inside_the_send(void **state)
{
    (void)state;
    struct result r[MAX_MEMBERS];
    run_members(MAX_MEMBERS, own_member_main, NULL, r);
    for (uint32_t m = 0; m < MAX_MEMBERS; m++) {
        assert_int_equal(r[m].delivered, MESSAGES); /* each own one inside its send */
        assert_int_equal(r[m].hash, 0);             /* none on another thread */
        assert_int_equal(r[m].eagain, MESSAGES / ECHO);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_unordered_messages_are_delivered_once_in_order_inside_the_send),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
