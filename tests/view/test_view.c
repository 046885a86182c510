/* The view model (src/view/view.c, view_layout.c): first views, next
 * views, the partition rule and subgroup layouts across views. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"
#include "view/view.h"

/* A layout of every rank below n, every one a sender. */
static struct smc_layout everyone(uint32_t n)
{
    struct smc_layout l;
    memset(&l, 0, sizeof l);
    for (uint32_t r = 0; r < n; r++) {
        l.members[l.num_members++] = r;
        l.senders[l.num_senders++] = r;
    }
    l.window_size = 16;
    l.max_payload = 64;
    l.mode = SPINDLE_MODE_ATOMIC;
    return l;
}

static void test_first_view_numbers_members_by_id(void **state)
{
    (void)state;
    struct smc_layout l = everyone(4);
    struct view v;
    assert_int_equal(view_init_first(&v, 4, 2, &l, 1), 0);
    assert_int_equal(v.id, 0);
    assert_int_equal(v.num_members, 4);
    assert_int_equal(v.my_rank, 2);
    for (uint32_t r = 0; r < 4; r++)
        assert_int_equal(v.member_ids[r], r);
    assert_int_equal(v.layouts[0].num_senders, 4);
    assert_int_equal(view_member_mask(&v), 0xf);
    assert_int_equal(view_rank_of(&v, 3), 3);
    assert_int_equal(view_rank_of(&v, 9), -1);
    view_clear(&v);
    assert_null(v.layouts);
}

static void test_next_keeps_survivor_order_and_appends_the_joiner(void **state)
{
    (void)state;
    struct smc_layout l = everyone(5);
    struct view v, next;
    struct view_transition how;
    assert_int_equal(view_init_first(&v, 5, 3, &l, 1), 0);
    /* Ranks 1 and 2 fail; member 7 joins. */
    assert_int_equal(view_next(&v, 0x6, 7, &next, &how), 0);
    assert_int_equal(next.id, 1);
    assert_int_equal(next.num_members, 4);
    const uint32_t ids[] = {0, 3, 4, 7};
    assert_memory_equal(next.member_ids, ids, sizeof ids);
    assert_int_equal(next.my_rank, 1);
    const int ranks[] = {0, -1, -1, 1, 2};
    assert_memory_equal(how.new_rank, ranks, sizeof ranks);
    assert_int_equal(how.num_left, 2);
    assert_int_equal(how.left[0], 1);
    assert_int_equal(how.left[1], 2);
    assert_int_equal(how.survivors, 0x19);
    assert_int_equal(how.joiner, 7);
    struct spindle_view_info info;
    view_describe(&next, &how, &info);
    assert_int_equal(info.view_id, 1);
    assert_int_equal(info.num_joined, 1);
    assert_int_equal(info.joined[0], 7);
    assert_int_equal(info.num_left, 2);
    assert_int_equal(info.my_rank, 1);
    view_clear(&next);
    view_clear(&v);
}

static void test_next_refuses_removing_itself_or_a_member_joining_twice(void **state)
{
    (void)state;
    struct smc_layout l = everyone(3);
    struct view v, next;
    struct view_transition how;
    assert_int_equal(view_init_first(&v, 3, 1, &l, 1), 0);
    assert_int_equal(view_next(&v, 0x2, VIEW_NO_JOINER, &next, &how), SPINDLE_EINVAL);
    assert_int_equal(view_next(&v, 0, 2, &next, &how), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "joiner 2"));
    view_clear(&v);
}

static void test_majority_rule_names_the_counts(void **state)
{
    (void)state;
    struct smc_layout l = everyone(5);
    struct view v;
    assert_int_equal(view_init_first(&v, 5, 0, &l, 1), 0);
    assert_int_equal(view_check_majority(&v, 0x6, false), 0); /* 3 of 5 */
    assert_int_equal(view_check_majority(&v, 0x1c, false), SPINDLE_EMINORITY);
    assert_non_null(strstr(spindle_errmsg(), "only 2 of 5"));
    assert_int_equal(view_check_majority(&v, 0x1, false), SPINDLE_EREMOVED);
    view_clear(&v);
    /* Two of four is not a majority either. */
    l = everyone(4);
    assert_int_equal(view_init_first(&v, 4, 0, &l, 1), 0);
    assert_int_equal(view_check_majority(&v, 0xc, false), SPINDLE_EMINORITY);
    /* With the tie-breaker, the half holding the leader (rank 0) goes on,
     * the other half does not, and less than half never does. */
    assert_int_equal(view_check_majority(&v, 0xc, true), 0);
    v.my_rank = 2;
    assert_int_equal(view_check_majority(&v, 0x3, true), SPINDLE_EMINORITY);
    assert_non_null(strstr(spindle_errmsg(), "nor half with the leader"));
    v.my_rank = 0;
    assert_int_equal(view_check_majority(&v, 0xe, true), SPINDLE_EMINORITY);
    assert_true(view_is_quorum(&v, 0x9, true));
    assert_false(view_is_quorum(&v, 0x9, false));
    assert_false(view_is_quorum(&v, 0x6, true));
    view_clear(&v);
    /* Two members: the leader survives its partner, not the reverse. */
    l = everyone(2);
    assert_int_equal(view_init_first(&v, 2, 0, &l, 1), 0);
    assert_int_equal(view_check_majority(&v, 0x2, true), 0);
    assert_int_equal(view_check_majority(&v, 0x2, false), SPINDLE_EMINORITY);
    v.my_rank = 1;
    assert_int_equal(view_check_majority(&v, 0x1, true), SPINDLE_EMINORITY);
    view_clear(&v);
}

static void test_default_layout_drops_the_gone_and_adds_the_joiner_as_receiver(void **state)
{
    (void)state;
    struct smc_layout layouts[2] = {everyone(4), everyone(4)};
    layouts[1].num_members = 2; /* members 0 and 1 only; 1 sends */
    layouts[1].senders[0] = 1;
    layouts[1].num_senders = 1;
    struct view v, next;
    struct view_transition how;
    assert_int_equal(view_init_first(&v, 4, 0, layouts, 2), 0);
    assert_int_equal(view_next(&v, 0x2, 9, &next, &how), 0);
    assert_int_equal(view_next_layouts(&v, &how, NULL, NULL, &next), 0);
    /* Subgroup 0: ranks 0, 2, 3 became 0, 1, 2; the joiner is rank 3. */
    const uint32_t members0[] = {0, 1, 2, 3}, senders0[] = {0, 1, 2};
    assert_int_equal(next.layouts[0].num_members, 4);
    assert_memory_equal(next.layouts[0].members, members0, sizeof members0);
    assert_int_equal(next.layouts[0].num_senders, 3);
    assert_memory_equal(next.layouts[0].senders, senders0, sizeof senders0);
    /* Subgroup 1 lost its only sender. */
    assert_int_equal(next.layouts[1].num_members, 2);
    assert_int_equal(next.layouts[1].num_senders, 0);
    assert_int_equal(next.layouts[1].window_size, 16);
    view_clear(&next);
    view_clear(&v);
}

struct layout_probe {
    int calls;
    uint64_t view_seen;
    uint32_t members_seen;
    int mode; /* 0: put everyone in subgroup 1; 1: a bad rank; 2: refuse */
};

static int probe_layout(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                        struct spindle_subgroup_layout *subgroups)
{
    struct layout_probe *probe = ctx;
    probe->calls++;
    probe->view_seen = view->view_id;
    probe->members_seen = view->num_members;
    if (probe->mode == 2)
        return SPINDLE_EAGAIN;
    struct spindle_subgroup_layout *l = &subgroups[num_subgroups - 1];
    l->num_members = view->num_members;
    for (uint32_t r = 0; r < view->num_members; r++)
        l->members[r] = r;
    if (probe->mode == 1)
        l->members[0] = 40;
    return 0;
}

static void test_layout_function_reshapes_and_is_checked(void **state)
{
    (void)state;
    struct smc_layout layouts[2] = {everyone(3), everyone(3)};
    layouts[1].num_members = 1;
    layouts[1].num_senders = 1;
    struct view v;
    assert_int_equal(view_init_first(&v, 3, 0, layouts, 2), 0);
    for (int mode = 0; mode < 3; mode++) {
        struct layout_probe probe = {0, 0, 0, mode};
        struct view next;
        struct view_transition how;
        assert_int_equal(view_next(&v, 0x4, VIEW_NO_JOINER, &next, &how), 0);
        int rc = view_next_layouts(&v, &how, probe_layout, &probe, &next);
        assert_int_equal(probe.calls, 1);
        assert_int_equal(probe.view_seen, 1);
        assert_int_equal(probe.members_seen, 2);
        if (mode == 0) {
            assert_int_equal(rc, 0);
            assert_int_equal(next.layouts[1].num_members, 2);
        } else if (mode == 1) {
            assert_int_equal(rc, SPINDLE_EINVAL);
            assert_non_null(strstr(spindle_errmsg(), "view 1"));
            assert_non_null(strstr(spindle_errmsg(), "member 40"));
        } else {
            assert_int_equal(rc, SPINDLE_EAGAIN);
            assert_non_null(strstr(spindle_errmsg(), "refused view 1"));
        }
        view_clear(&next);
    }
    view_clear(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_view_numbers_members_by_id),
        cmocka_unit_test(test_next_keeps_survivor_order_and_appends_the_joiner),
        cmocka_unit_test(test_next_refuses_removing_itself_or_a_member_joining_twice),
        cmocka_unit_test(test_majority_rule_names_the_counts),
        cmocka_unit_test(test_default_layout_drops_the_gone_and_adds_the_joiner_as_receiver),
        cmocka_unit_test(test_layout_function_reshapes_and_is_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
