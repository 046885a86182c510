/* Views: construction, validation, layouts, leader and majority rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"
#include "view/view.h"

/* Adds members with the given ids, hosts "h<id>", ports 7000+id. */
static void add_members(struct view *view, const uint32_t *ids, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        char host[32];
        snprintf(host, sizeof host, "h%u", ids[i]);
        struct tp_desc address = {.len = 4};
        memcpy(address.bytes, &ids[i], 4);
        assert_int_equal(view_add_member(view, ids[i], host, (uint16_t)(7000 + ids[i]), &address),
                         0);
    }
}

static void test_add_member_rejects_duplicates_and_bad_hosts(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    assert_int_equal(view_add_member(&view, 5, "a", 1, NULL), 0);
    assert_int_equal(view_add_member(&view, 5, "b", 2, NULL), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "5"));
    assert_int_equal(view_add_member(&view, 6, "", 2, NULL), SPINDLE_EINVAL);
    assert_int_equal(view_add_member(&view, 6, NULL, 2, NULL), SPINDLE_EINVAL);
    char long_host[VIEW_HOST_MAX + 1];
    memset(long_host, 'x', sizeof long_host - 1);
    long_host[VIEW_HOST_MAX] = '\0';
    assert_int_equal(view_add_member(&view, 6, long_host, 2, NULL), SPINDLE_EINVAL);
    struct tp_desc big = {.len = TP_DESC_MAX + 1};
    assert_int_equal(view_add_member(&view, 6, "c", 2, &big), SPINDLE_EINVAL);
    assert_int_equal(view.num_members, 1);
    for (uint32_t id = 100; id < 100 + VIEW_MAX_MEMBERS - 1; id++)
        assert_int_equal(view_add_member(&view, id, "h", 1, NULL), 0);
    assert_int_equal(view_add_member(&view, 1000, "h", 1, NULL), SPINDLE_EINVAL);
    assert_int_equal(view.num_members, VIEW_MAX_MEMBERS);
    view_clear(&view);
}

static void test_rank_of_names_the_unknown_id(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 3);
    add_members(&view, (uint32_t[]){30, 10, 20}, 3);
    assert_int_equal(view_rank_of(&view, 30), 0);
    assert_int_equal(view_rank_of(&view, 10), 1);
    assert_int_equal(view_rank_of(&view, 20), 2);
    assert_int_equal(view_rank_of(&view, 99), SPINDLE_ENOENT);
    assert_non_null(strstr(spindle_errmsg(), "99"));
    view_clear(&view);
}

static void test_default_layout_is_one_shard_of_all_senders(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){4, 2, 9}, 3);
    assert_int_equal(view_apply_layout(&view, NULL, NULL, NULL), 0);
    assert_int_equal(view.num_subgroups, 1);
    assert_int_equal(view.num_shards, 1);
    const struct view_shard *shard = view_shard_get(&view, 0, 0);
    assert_non_null(shard);
    assert_int_equal(shard->num_members, 3);
    assert_int_equal(shard->num_senders, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(shard->members[i], view.members[i].id);
        assert_int_equal(shard->senders[i], view.members[i].id);
    }
    assert_int_equal(view_shard_sender_rank(shard, 9), 2);
    assert_int_equal(view_shard_member_rank(shard, 2), 1);
    assert_int_equal(view_shard_sender_rank(shard, 77), -1);
    assert_null(view_shard_get(&view, 0, 1));
    assert_null(view_shard_get(&view, 1, 0));
    struct view empty;
    view_init(&empty, 1);
    assert_int_equal(view_apply_layout(&empty, NULL, NULL, NULL), SPINDLE_EAGAIN);
    view_clear(&view);
}

static void test_sharded_layout_deals_ranks_round_robin(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){10, 11, 12, 13, 14, 15, 16}, 7);
    struct view_sharding sharding = {.num_shards = 2, .shard_size = 3, .num_senders = 2};
    assert_int_equal(view_apply_layout(&view, NULL, view_layout_sharded, &sharding), 0);
    assert_int_equal(view.num_shards, 2);
    const struct view_shard *s0 = view_shard_get(&view, 0, 0);
    const struct view_shard *s1 = view_shard_get(&view, 0, 1);
    uint32_t expect0[] = {10, 12, 14}, expect1[] = {11, 13, 15};
    assert_memory_equal(s0->members, expect0, sizeof expect0);
    assert_memory_equal(s1->members, expect1, sizeof expect1);
    assert_int_equal(s0->num_senders, 2);
    assert_int_equal(s0->senders[1], 12);
    /* Member 16 is a spare in no shard. */
    assert_int_equal(view_shard_member_rank(s0, 16), -1);
    assert_int_equal(view_shard_member_rank(s1, 16), -1);
    /* Too few members: inadequate, and the layout is left empty. */
    struct view_sharding big = {.num_shards = 3, .shard_size = 3};
    assert_int_equal(view_apply_layout(&view, NULL, view_layout_sharded, &big), SPINDLE_EAGAIN);
    assert_int_equal(view.num_shards, 0);
    struct view_sharding bad = {.num_shards = 0, .shard_size = 3};
    assert_int_equal(view_apply_layout(&view, NULL, view_layout_sharded, &bad), SPINDLE_EINVAL);
    view_clear(&view);
}

static void test_sharded_layout_keeps_survivors_in_their_shards(void **state)
{
    (void)state;
    struct view prev, next;
    view_init(&prev, 7);
    view_init(&next, 0);
    add_members(&prev, (uint32_t[]){1, 2, 3, 4, 5, 6, 7}, 7);
    struct view_sharding sharding = {.num_shards = 2, .shard_size = 3};
    assert_int_equal(view_apply_layout(&prev, NULL, view_layout_sharded, &sharding), 0);
    /* shard0 = {1,3,5}, shard1 = {2,4,6}, spare 7. Member 3 (rank 2) fails. */
    struct view_member joiner = {.id = 50, .port = 1};
    strcpy(joiner.host, "new");
    assert_int_equal(
        view_make_next(&prev, 1ull << 2, &joiner, 1, view_layout_sharded, &sharding, &next), 0);
    assert_int_equal(next.id, 8);
    const struct view_shard *s0 = view_shard_get(&next, 0, 0);
    const struct view_shard *s1 = view_shard_get(&next, 0, 1);
    /* Survivors stay; the vacancy goes to the spare (lowest unassigned rank). */
    uint32_t expect0[] = {1, 5, 7}, expect1[] = {2, 4, 6};
    assert_memory_equal(s0->members, expect0, sizeof expect0);
    assert_memory_equal(s1->members, expect1, sizeof expect1);
    view_clear(&prev);
    view_clear(&next);
}

static void test_add_shard_rejects_inconsistent_lists(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){1, 2, 3}, 3);
    uint32_t members[] = {1, 2, 3};
    assert_int_equal(view_add_shard(&view, members, 3, members, 3), SPINDLE_EINVAL);
    assert_int_equal(view_add_subgroup(&view), 0);
    assert_int_equal(view_add_shard(&view, members, 0, NULL, 0), SPINDLE_EINVAL);
    assert_int_equal(view_add_shard(&view, (uint32_t[]){1, 9}, 2, NULL, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "9"));
    assert_int_equal(view_add_shard(&view, (uint32_t[]){1, 1}, 2, NULL, 0), SPINDLE_EINVAL);
    /* Sender not a member, repeated, or out of member order. */
    assert_int_equal(view_add_shard(&view, members, 2, (uint32_t[]){3}, 1), SPINDLE_EINVAL);
    assert_int_equal(view_add_shard(&view, members, 3, (uint32_t[]){2, 2}, 2), SPINDLE_EINVAL);
    assert_int_equal(view_add_shard(&view, members, 3, (uint32_t[]){3, 1}, 2), SPINDLE_EINVAL);
    assert_int_equal(view_add_shard(&view, members, 2, members, 3), SPINDLE_EINVAL);
    assert_int_equal(view.num_shards, 0);
    /* Valid: two shards, then a subgroup with none, then one more. */
    assert_int_equal(view_add_shard(&view, members, 2, (uint32_t[]){2}, 1), 0);
    assert_int_equal(view_add_shard(&view, (uint32_t[]){3}, 1, NULL, 0), 1);
    assert_int_equal(view_add_subgroup(&view), 1);
    assert_int_equal(view_add_subgroup(&view), 2);
    assert_int_equal(view_add_shard(&view, (uint32_t[]){3, 1}, 2, (uint32_t[]){3, 1}, 2), 0);
    assert_int_equal(view_validate(&view), 0);
    uint32_t first, count;
    assert_int_equal(view_subgroup_shards(&view, 1, &first, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(view_subgroup_shards(&view, 2, &first, &count), 0);
    assert_int_equal(first, 2);
    assert_int_equal(count, 1);
    assert_int_equal(view_subgroup_shards(&view, 3, &first, &count), SPINDLE_ENOENT);
    view_clear(&view);
}

static void test_validate_catches_corruption(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){1, 2, 3}, 3);
    assert_int_equal(view_apply_layout(&view, NULL, NULL, NULL), 0);
    assert_int_equal(view_validate(&view), 0);
    view.members[2].id = 1;
    assert_int_equal(view_validate(&view), SPINDLE_EINVAL);
    view.members[2].id = 3;
    view.shards[0].senders[0] = 3; /* senders 3,2,3: out of order */
    assert_int_equal(view_validate(&view), SPINDLE_EINVAL);
    view.shards[0].senders[0] = 1;
    view.shards[0].shard_index = 1;
    assert_int_equal(view_validate(&view), SPINDLE_EINVAL);
    view.shards[0].shard_index = 0;
    memset(view.members[0].host, 'x', VIEW_HOST_MAX);
    assert_int_equal(view_validate(&view), SPINDLE_EINVAL);
    view_clear(&view);
}

static void test_copy_is_deep(void **state)
{
    (void)state;
    struct view a, b;
    view_init(&a, 4);
    view_init(&b, 0);
    add_members(&a, (uint32_t[]){1, 2}, 2);
    assert_int_equal(view_apply_layout(&a, NULL, NULL, NULL), 0);
    assert_int_equal(view_copy(&b, &a), 0);
    assert_ptr_not_equal(a.shards, b.shards);
    a.shards[0].members[0] = 2;
    assert_int_equal(b.shards[0].members[0], 1);
    assert_int_equal(b.id, 4);
    assert_int_equal(view_validate(&b), 0);
    view_clear(&a);
    view_clear(&b);
}

static void test_diff_reports_joined_and_left(void **state)
{
    (void)state;
    struct view prev, next;
    view_init(&prev, 1);
    view_init(&next, 2);
    add_members(&prev, (uint32_t[]){1, 2, 3, 4}, 4);
    add_members(&next, (uint32_t[]){1, 3, 8, 9}, 4);
    uint32_t joined[VIEW_MAX_MEMBERS], left[VIEW_MAX_MEMBERS], nj = 99, nl = 99;
    view_diff(&prev, &next, joined, &nj, left, &nl);
    assert_int_equal(nj, 2);
    assert_int_equal(joined[0], 8);
    assert_int_equal(joined[1], 9);
    assert_int_equal(nl, 2);
    assert_int_equal(left[0], 2);
    assert_int_equal(left[1], 4);
    view_diff(&prev, &prev, NULL, &nj, NULL, &nl);
    assert_int_equal(nj, 0);
    assert_int_equal(nl, 0);
    view_clear(&prev);
    view_clear(&next);
}

static void test_leader_is_lowest_unsuspected_rank(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){9, 8, 7, 6}, 4);
    assert_int_equal(view_leader(&view, 0), 0);
    assert_int_equal(view_leader(&view, 0x1), 1);
    assert_int_equal(view_leader(&view, 0x3), 2);
    assert_int_equal(view_leader(&view, 0x5), 1);
    assert_int_equal(view_leader(&view, 0xF), SPINDLE_ENOENT);
    /* Bits beyond the member count do not matter. */
    assert_int_equal(view_leader(&view, ~0ull << 4), 0);
    view_clear(&view);
}

static void test_majority_rule(void **state)
{
    (void)state;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){1, 2, 3}, 3);
    assert_int_equal(view_check_majority(&view, 0), 0);
    assert_int_equal(view_check_majority(&view, 0x4), 0);
    assert_int_equal(view_check_majority(&view, 0x6), SPINDLE_EMINORITY);
    assert_non_null(strstr(spindle_errmsg(), "1 of 3"));
    add_members(&view, (uint32_t[]){4}, 1);
    /* 2 of 4 is not more than half: a 2/2 split must not make progress. */
    assert_int_equal(view_check_majority(&view, 0x3), SPINDLE_EMINORITY);
    assert_int_equal(view_check_majority(&view, 0x1), 0);
    assert_true(view_is_majority(&view, 0x7));
    assert_false(view_is_majority(&view, 0x3));
    /* Bits beyond the member count are not members. */
    assert_false(view_is_majority(&view, 0x30));
    struct view one;
    view_init(&one, 1);
    add_members(&one, (uint32_t[]){1}, 1);
    assert_int_equal(view_check_majority(&one, 0), 0);
    assert_int_equal(view_check_majority(&one, 1), SPINDLE_EMINORITY);
    view_clear(&view);
    view_clear(&one);
}

static void test_make_next_orders_survivors_then_joiners(void **state)
{
    (void)state;
    struct view prev, next;
    view_init(&prev, 41);
    view_init(&next, 0);
    add_members(&prev, (uint32_t[]){5, 6, 7, 8, 9}, 5);
    assert_int_equal(view_apply_layout(&prev, NULL, NULL, NULL), 0);
    struct view_member joiners[2] = {{.id = 20, .port = 3}, {.id = 21, .port = 4}};
    strcpy(joiners[0].host, "j20");
    strcpy(joiners[1].host, "j21");
    assert_int_equal(view_make_next(&prev, 0x12, joiners, 2, NULL, NULL, &next), 0);
    assert_int_equal(next.id, 42);
    uint32_t expect[] = {5, 7, 8, 20, 21};
    assert_int_equal(next.num_members, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(next.members[i].id, expect[i]);
    assert_string_equal(next.members[4].host, "j21");
    assert_int_equal(next.members[1].port, 7007);
    assert_int_equal(next.shards[0].num_senders, 5);
    /* Leadership passes to the lowest surviving rank. */
    assert_int_equal(next.members[view_leader(&next, 0)].id, 5);
    /* Three of five removed: minority. */
    assert_int_equal(view_make_next(&prev, 0x13, NULL, 0, NULL, NULL, &next), SPINDLE_EMINORITY);
    assert_int_equal(next.num_members, 0);
    /* A joiner reusing a live id is refused. */
    joiners[1].id = 8;
    assert_int_equal(view_make_next(&prev, 0, joiners, 2, NULL, NULL, &next), SPINDLE_EINVAL);
    assert_null(next.shards);
    view_clear(&prev);
}

/* A user layout: subgroup 0 = everyone (only rank 0 sends), subgroup 1 =
 * the last two members. */
static int two_subgroups(void *ctx, const struct view *prev, struct view *next)
{
    (void)prev;
    int *calls = ctx;
    (*calls)++;
    if (next->num_members < 2)
        return SPINDLE_EAGAIN;
    uint32_t ids[VIEW_MAX_MEMBERS];
    for (uint32_t i = 0; i < next->num_members; i++)
        ids[i] = next->members[i].id;
    int rc = view_add_subgroup(next);
    if (rc >= 0)
        rc = view_add_shard(next, ids, next->num_members, ids, 1);
    if (rc >= 0)
        rc = view_add_subgroup(next);
    if (rc >= 0)
        rc = view_add_shard(next, ids + next->num_members - 2, 2, ids + next->num_members - 2, 2);
    return rc < 0 ? rc : 0;
}

static void test_custom_layout_function(void **state)
{
    (void)state;
    int calls = 0;
    struct view view;
    view_init(&view, 1);
    add_members(&view, (uint32_t[]){1}, 1);
    assert_int_equal(view_apply_layout(&view, NULL, two_subgroups, &calls), SPINDLE_EAGAIN);
    add_members(&view, (uint32_t[]){2, 3}, 2);
    assert_int_equal(view_apply_layout(&view, NULL, two_subgroups, &calls), 0);
    assert_int_equal(calls, 2);
    assert_int_equal(view.num_subgroups, 2);
    const struct view_shard *shard = view_shard_get(&view, 1, 0);
    assert_int_equal(shard->members[0], 2);
    assert_int_equal(shard->senders[1], 3);
    assert_int_equal(view_shard_get(&view, 0, 0)->num_senders, 1);
    view_clear(&view);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_member_rejects_duplicates_and_bad_hosts),
        cmocka_unit_test(test_rank_of_names_the_unknown_id),
        cmocka_unit_test(test_default_layout_is_one_shard_of_all_senders),
        cmocka_unit_test(test_sharded_layout_deals_ranks_round_robin),
        cmocka_unit_test(test_sharded_layout_keeps_survivors_in_their_shards),
        cmocka_unit_test(test_add_shard_rejects_inconsistent_lists),
        cmocka_unit_test(test_validate_catches_corruption),
        cmocka_unit_test(test_copy_is_deep),
        cmocka_unit_test(test_diff_reports_joined_and_left),
        cmocka_unit_test(test_leader_is_lowest_unsuspected_rank),
        cmocka_unit_test(test_majority_rule),
        cmocka_unit_test(test_make_next_orders_survivors_then_joiners),
        cmocka_unit_test(test_custom_layout_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
