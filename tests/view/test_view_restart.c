/*
 * The total restart's election rules (view_restart_decide, the rules of
 * models/restart.pml) and its status message on the wire.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "util/crc32c.h"
#include "view/view_impl.h"

/* A status of member id whose log's latest view is view (members 0..n-1)
 * and holds `messages` positions of it. */
static struct view_restart_status status(uint32_t id, uint64_t view, uint32_t n, uint64_t messages)
{
    struct view_restart_status s;
    memset(&s, 0, sizeof s);
    s.id = id;
    s.vote = id;
    snprintf(s.identity.name, sizeof s.identity.name, "m%u", id);
    s.identity.incarnation = 1;
    s.latest_view = view;
    s.messages = messages;
    s.num_members = n;
    for (uint32_t i = 0; i < n; i++)
        s.members[i] = i;
    s.ends.join_view = view + 1;
    s.ends.next_view = view + 1;
    s.ends.count = 1;
    s.ends.ends[0] = (struct view_join_log_end){0, view, messages};
    return s;
}

static void hear(struct view_restart_round *round, const struct view_restart_status *peer)
{
    round->peers[peer->id] = *peer;
    round->heard |= 1ull << peer->id;
}

static void test_the_best_log_is_voted_for_and_starts_with_a_majority(void **unused)
{
    (void)unused;
    struct view_restart_round round;
    memset(&round, 0, sizeof round);
    round.mine = status(0, 4, 3, 100);
    struct view_restart_status one = status(1, 4, 3, 120);
    hear(&round, &one);
    struct view_restart_decision d;
    view_restart_decide(&round, &d);
    /* Member 1 holds more of view 4: member 0 votes for it and waits. */
    assert_int_equal(d.action, VIEW_RESTART_WAIT);
    assert_int_equal(d.vote, 1);
    assert_int_equal(d.latest, 4);
    assert_int_equal(d.missing, 1ull << 2);

    /* Member 1's side: it votes for itself, and with member 0's vote it
     * has two of three. */
    memset(&round, 0, sizeof round);
    round.mine = one;
    struct view_restart_status zero = status(0, 4, 3, 100);
    hear(&round, &zero);
    view_restart_decide(&round, &d);
    assert_int_equal(d.action, VIEW_RESTART_WAIT); /* member 0 has not voted for it yet */
    assert_int_equal(d.voters, 1);
    zero.vote = 1;
    hear(&round, &zero);
    view_restart_decide(&round, &d);
    assert_int_equal(d.action, VIEW_RESTART_START);
    assert_int_equal(d.voters, 2);
}

static void test_a_later_view_beats_more_messages_and_ties_go_to_the_lower_id(void **unused)
{
    (void)unused;
    struct view_restart_status a = status(2, 5, 3, 1), b = status(0, 4, 3, 1000);
    assert_true(view_restart_better(&a, &b));
    assert_false(view_restart_better(&b, &a));
    struct view_restart_status c = status(0, 5, 3, 1), d = status(1, 5, 3, 1);
    assert_true(view_restart_better(&c, &d));
    assert_false(view_restart_better(&d, &c));
}

static void test_a_vote_stays_until_its_member_gives_it_away(void **unused)
{
    (void)unused;
    struct view_restart_round round;
    memset(&round, 0, sizeof round);
    round.mine = status(0, 4, 3, 10);
    round.mine.vote = 1; /* voted for member 1 earlier */
    /* Member 2 is better now, but member 1 was not heard: the vote stays. */
    struct view_restart_status two = status(2, 4, 3, 50);
    hear(&round, &two);
    struct view_restart_decision d;
    view_restart_decide(&round, &d);
    assert_int_equal(d.vote, 1);
    assert_int_equal(d.action, VIEW_RESTART_WAIT);
    /* Member 1 answers, still standing for itself: the vote stays. */
    struct view_restart_status one = status(1, 4, 3, 20);
    hear(&round, &one);
    view_restart_decide(&round, &d);
    assert_int_equal(d.vote, 1);
    /* Member 1 gave its vote to member 2: the vote moves to the best. */
    one.vote = 2;
    hear(&round, &one);
    view_restart_decide(&round, &d);
    assert_int_equal(d.vote, 2);
}

static void test_half_is_not_enough_without_the_tie_breaker(void **unused)
{
    (void)unused;
    struct view_restart_round round;
    memset(&round, 0, sizeof round);
    round.mine = status(0, 7, 4, 10);
    struct view_restart_status one = status(1, 7, 4, 5);
    one.vote = 0;
    hear(&round, &one);
    struct view_restart_decision d;
    view_restart_decide(&round, &d);
    assert_int_equal(d.voters, 2);
    assert_int_equal(d.action, VIEW_RESTART_WAIT);
    assert_int_equal(d.missing, (1ull << 2) | (1ull << 3));
    round.tie_breaker = true; /* two of four holding the first member */
    view_restart_decide(&round, &d);
    assert_int_equal(d.action, VIEW_RESTART_START);
    /* Without the view's first member among them, half is not enough. */
    memset(&round, 0, sizeof round);
    round.tie_breaker = true;
    round.mine = status(2, 7, 4, 10);
    struct view_restart_status three = status(3, 7, 4, 5);
    three.vote = 2;
    hear(&round, &three);
    view_restart_decide(&round, &d);
    assert_int_equal(d.action, VIEW_RESTART_WAIT);
}

static void test_a_running_member_is_followed_and_outsiders_do_not_count(void **unused)
{
    (void)unused;
    struct view_restart_round round;
    memset(&round, 0, sizeof round);
    round.mine = status(0, 3, 2, 10); /* an old member of view 3 */
    /* Members 1, 2 hold view 6 of members {1, 2, 3}: member 0 is not in
     * it and its vote does not count. */
    struct view_restart_status one = status(1, 6, 4, 5), two = status(2, 6, 4, 5);
    one.num_members = two.num_members = 3;
    for (uint32_t i = 0; i < 3; i++)
        one.members[i] = two.members[i] = i + 1;
    one.members[3] = two.members[3] = 0;
    hear(&round, &one);
    hear(&round, &two);
    struct view_restart_decision d;
    view_restart_decide(&round, &d);
    assert_int_equal(d.vote, 1);
    assert_int_equal(d.latest, 6);
    assert_int_equal(d.num_latest, 3);
    assert_int_equal(d.voters, 0);
    assert_int_equal(d.missing, 1ull << 3);
    two.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    hear(&round, &two);
    view_restart_decide(&round, &d);
    assert_int_equal(d.action, VIEW_RESTART_FOLLOW);
    assert_int_equal(d.follow, 2);
}

static void test_a_log_past_the_restart_point_is_told_apart(void **unused)
{
    (void)unused;
    /* The group restarted from view 4, subgroup 0 recovered up to 120. */
    struct view_restart_status point = status(1, 4, 3, 120);
    point.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    struct view_join_log_ends ends = {.join_view = 9, .next_view = 5, .count = 1};
    ends.ends[0] = (struct view_join_log_end){0, 4, 120};
    assert_false(view_restart_ahead(&ends, &point)); /* exactly the point */
    ends.ends[0].seq = 90;
    assert_false(view_restart_ahead(&ends, &point)); /* behind: caught up */
    ends.ends[0] = (struct view_join_log_end){0, 3, 5000};
    assert_false(view_restart_ahead(&ends, &point)); /* an earlier view */
    ends.ends[0] = (struct view_join_log_end){0, 4, 121};
    assert_true(view_restart_ahead(&ends, &point)); /* one message past it */
    ends.ends[0] = (struct view_join_log_end){0, 7, 3};
    assert_false(view_restart_ahead(&ends, &point)); /* a view of the restarted group */
    ends.ends[0] = (struct view_join_log_end){2, 1, 1};
    assert_true(view_restart_ahead(&ends, &point)); /* a subgroup the point lacks */
    point.flags = VIEW_RESTART_RUNNING;             /* no point known: nothing to compare */
    assert_false(view_restart_ahead(&ends, &point));
}

/* The guard with point as the restart point, for member 3's log. */
static int check(const struct view_restart_status *point, const struct view_join_log_ends *ends)
{
    struct view_restart r;
    memset(&r, 0, sizeof r);
    r.running = *point;
    return view_restart_check_subgroups(&r, ends, 3, "the log");
}

static void test_a_subgroup_the_restart_point_holds_nothing_of_is_not_dropped(void **unused)
{
    (void)unused;
    /* The group restarted from view 4 at a member of subgroup 0 only: its
     * log holds subgroup 0 up to 120 and nothing of subgroup 1. */
    struct view_restart_status point = status(0, 4, 6, 120);
    point.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    point.ends.count = 2;
    point.ends.ends[1] = (struct view_join_log_end){1, 0, 0};
    struct view_join_log_ends ends = {.join_view = 9, .next_view = 5, .count = 2};
    ends.ends[0] = (struct view_join_log_end){0, 0, 0};
    ends.ends[1] = (struct view_join_log_end){1, 4, 200};
    /* A member of subgroup 1: its history of it is in no log of the
     * restarted group, and being "ahead" must not start it over. */
    assert_true(view_restart_ahead(&ends, &point));
    assert_int_equal(check(&point, &ends), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "subgroup 1"));
    ends.ends[1] = (struct view_join_log_end){1, 2, 7}; /* behind, in an earlier view: too */
    assert_int_equal(check(&point, &ends), SPINDLE_EINVAL);
    ends.ends[1] = (struct view_join_log_end){1, 6, 3}; /* only views of the restarted group */
    assert_int_equal(check(&point, &ends), 0);
    ends.ends[1] = (struct view_join_log_end){1, 0, 0}; /* nothing of it: a fresh member */
    assert_int_equal(check(&point, &ends), 0);
    ends.ends[0] = (struct view_join_log_end){0, 4, 121}; /* past the point in subgroup 0 */
    assert_int_equal(check(&point, &ends), 0);
    assert_true(view_restart_ahead(&ends, &point)); /* started over, as before */
    point.ends.count = 1; /* a point that does not log subgroup 1 at all */
    ends.ends[1] = (struct view_join_log_end){1, 3, 1};
    assert_int_equal(check(&point, &ends), SPINDLE_EINVAL);
    point.flags = VIEW_RESTART_RUNNING; /* no point known: nothing to compare */
    assert_int_equal(check(&point, &ends), 0);
}

static void test_a_subgroup_the_point_lacks_is_kept_level_with_its_source(void **unused)
{
    (void)unused;
    /* The group restarted from view 4 at a member of subgroup 0 only,
     * which names member 2 the source of subgroup 1, up to (4, 200);
     * subgroup 1's configured members are 2 and 3. */
    struct view_restart r;
    memset(&r, 0, sizeof r);
    struct smc_layout configured[2];
    memset(configured, 0, sizeof configured);
    configured[1].num_members = 2;
    configured[1].members[0] = 2;
    configured[1].members[1] = 3;
    r.configured = configured;
    r.num_subgroups = 2;
    r.running = status(0, 4, 6, 120);
    r.running.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    r.running.ends.count = 2;
    r.running.ends.ends[1] = (struct view_join_log_end){1, 0, 0};
    r.running.num_sources = 1;
    r.running.sources[0] = (struct view_restart_source){1, 2, 4, 200};
    struct view_join_log_ends ends = {.join_view = 9, .next_view = 5, .count = 2};
    ends.ends[0] = (struct view_join_log_end){0, 0, 0};
    ends.ends[1] = (struct view_join_log_end){1, 4, 200};
    uint32_t g = 99;
    /* Level with the source: kept, never "ahead". */
    assert_int_equal(view_restart_check_subgroups(&r, &ends, 3, "the log"), 0);
    assert_true(view_restart_keeps(&r.running, &ends, &g));
    assert_int_equal(g, 1);
    assert_false(view_restart_ahead(&ends, &r.running));
    /* Behind it, or past it: refused, naming the subgroup and the source. */
    ends.ends[1] = (struct view_join_log_end){1, 4, 150};
    assert_int_equal(view_restart_check_subgroups(&r, &ends, 3, "the log"), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "subgroup 1"));
    assert_non_null(strstr(spindle_errmsg(), "member 2's log"));
    ends.ends[1] = (struct view_join_log_end){1, 4, 201};
    assert_int_equal(view_restart_check_subgroups(&r, &ends, 3, "the log"), SPINDLE_EINVAL);
    assert_true(view_restart_ahead(&ends, &r.running));
    /* Nothing of it: fine for a member of subgroup 0 only, not for one of
     * subgroup 1's members (it would start it empty). */
    ends.ends[1] = (struct view_join_log_end){1, 0, 0};
    assert_int_equal(view_restart_check_subgroups(&r, &ends, 1, "the log"), 0);
    assert_false(view_restart_keeps(&r.running, &ends, &g));
    assert_int_equal(view_restart_check_subgroups(&r, &ends, 3, "the log"), SPINDLE_EINVAL);
}

static void test_the_starting_member_names_the_source_of_what_it_lacks(void **unused)
{
    (void)unused;
    /* Member 0 logs subgroup 0 only; members 2 and 3 hold subgroup 1, 3
     * less than 2. */
    struct view_restart_round round;
    memset(&round, 0, sizeof round);
    round.mine = status(0, 4, 5, 120);
    round.mine.ends.count = 2;
    round.mine.ends.ends[1] = (struct view_join_log_end){1, 0, 0};
    round.peers[2] = status(2, 4, 5, 0);
    round.peers[2].ends.count = 2;
    round.peers[2].ends.ends[0] = (struct view_join_log_end){0, 0, 0};
    round.peers[2].ends.ends[1] = (struct view_join_log_end){1, 4, 80};
    round.peers[3] = round.peers[2];
    round.peers[3].id = round.peers[3].vote = 3;
    round.peers[3].ends.ends[1] = (struct view_join_log_end){1, 3, 40};
    round.heard = 1ull << 2 | 1ull << 3;
    struct view_restart_status point = round.mine;
    view_restart_name_sources(&round, &point);
    assert_int_equal(point.num_sources, 1);
    assert_int_equal(point.sources[0].subgroup, 1);
    assert_int_equal(point.sources[0].id, 2);
    assert_int_equal(point.sources[0].view_id, 4);
    assert_int_equal(point.sources[0].seq, 80);
    /* It goes over the wire with the running status. */
    point.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    uint8_t bytes[VIEW_WIRE_RESTART_SIZE(SPINDLE_MAX_SUBGROUPS)];
    size_t len = view_wire_encode_restart(&point, bytes, sizeof bytes);
    assert_int_equal(len, VIEW_WIRE_RESTART_BYTES(2, 1));
    struct view_restart_status again;
    assert_int_equal(view_wire_decode_restart(bytes, len, &again), 0);
    assert_memory_equal(&again, &point, sizeof point);
    /* Not in a status that is not a running restart point. */
    point.flags = 0;
    len = view_wire_encode_restart(&point, bytes, sizeof bytes);
    assert_int_equal(view_wire_decode_restart(bytes, len, &again), SPINDLE_EPROTO);
}

/* A status of member id of view 4 (members 0..4) with ends of subgroups 0
 * and 1 (its messages: the positions of view 4). */
static struct view_restart_status sharded(uint32_t id, struct view_join_log_end end0,
                                          struct view_join_log_end end1)
{
    struct view_restart_status s = status(id, 4, 5, 0);
    s.messages = (end0.view_id == 4 ? end0.seq : 0) + (end1.view_id == 4 ? end1.seq : 0);
    s.ends.count = 2;
    s.ends.ends[0] = end0;
    s.ends.ends[1] = end1;
    return s;
}

static void test_each_logged_subgroup_needs_a_member_heard_before_the_start(void **unused)
{
    (void)unused;
    /* Subgroup 0 is member 0 alone, subgroup 1 members 1-5 (5 is not in
     * view 4). Member 1 is elected: its log holds nothing of subgroup 0. */
    struct smc_layout configured[2];
    memset(configured, 0, sizeof configured);
    configured[0].num_members = 1;
    configured[0].members[0] = 0;
    configured[1].num_members = 5;
    for (uint32_t i = 0; i < 5; i++)
        configured[1].members[i] = i + 1;
    struct view_join_log_end none0 = {0, 0, 0}, none1 = {1, 0, 0};
    struct view_restart_round round;
    memset(&round, 0, sizeof round);
    round.configured = configured;
    round.num_configured = 2;
    round.mine = sharded(1, none0, (struct view_join_log_end){1, 4, 200});
    struct view_restart_status two = sharded(2, none0, (struct view_join_log_end){1, 4, 150});
    struct view_restart_status three = sharded(3, none0, (struct view_join_log_end){1, 3, 900});
    two.vote = three.vote = 1;
    hear(&round, &two);
    hear(&round, &three);
    struct view_restart_decision d;
    view_restart_decide(&round, &d);
    /* Three of five vote for member 1, but no member of subgroup 0 was
     * heard: its history may be in no log heard. */
    assert_int_equal(d.voters, 3);
    assert_int_equal(d.action, VIEW_RESTART_WAIT);
    assert_int_equal(d.num_unsourced, 1);
    assert_int_equal(d.unsourced, 0);
    assert_int_equal(view_restart_source(&round, &round.mine, 0), SPINDLE_MAX_MEMBERS);
    /* Subgroup 1's source: the most of it (a later view beats more
     * positions of an earlier one). */
    assert_int_equal(view_restart_source(&round, &round.mine, 1), 1);

    struct view_restart_status zero = sharded(0, (struct view_join_log_end){0, 4, 30}, none1);
    hear(&round, &zero);
    view_restart_decide(&round, &d);
    assert_int_equal(d.action, VIEW_RESTART_START);
    assert_int_equal(d.num_unsourced, 0);
    assert_int_equal(view_restart_source(&round, &round.mine, 0), 0);

    /* Member 2 holds more of subgroup 1 than the elected member: it is
     * that subgroup's source. Equal ends go by the election's order. */
    two.ends.ends[1] = (struct view_join_log_end){1, 4, 210};
    hear(&round, &two);
    assert_int_equal(view_restart_source(&round, &round.mine, 1), 2);
    two.ends.ends[1] = (struct view_join_log_end){1, 4, 200};
    two.messages = 10; /* fewer messages: the elected member wins the tie */
    hear(&round, &two);
    assert_int_equal(view_restart_source(&round, &round.mine, 1), 1);

    /* Member 5 holds the most but is not in view 4: not a source. */
    struct view_restart_status five = sharded(5, none0, (struct view_join_log_end){1, 4, 999});
    hear(&round, &five);
    assert_int_equal(view_restart_source(&round, &round.mine, 1), 1);

    /* None of a subgroup's configured members in the view: every member
     * of the view is one of it (the restart's default layout). */
    configured[0].members[0] = 7;
    assert_int_equal(view_restart_source(&round, &round.mine, 0), 0);
    round.heard &= ~(1ull << 0);
    assert_int_equal(view_restart_source(&round, &round.mine, 0), 1);
    /* No configured layouts: the same. */
    round.configured = NULL;
    assert_int_equal(view_restart_source(&round, &round.mine, 0), 1);
}

static void test_the_status_round_trips_and_lies_are_refused(void **unused)
{
    (void)unused;
    struct view_restart_status s = status(3, 9, 5, 77), out;
    s.vote = 1;
    s.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    uint8_t buf[VIEW_WIRE_RESTART_SIZE(SPINDLE_MAX_SUBGROUPS)];
    size_t n = view_wire_encode_restart(&s, buf, sizeof buf);
    assert_int_equal(n, VIEW_WIRE_RESTART_BYTES(1, 0));
    assert_int_equal(view_wire_type(buf, n), VIEW_WIRE_RESTART);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), 0);
    assert_memory_equal(&out, &s, sizeof s);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(view_wire_decode_restart(buf, cut, &out), SPINDLE_EPROTO);
    struct view_restart_status bad;
    bad = s;
    bad.vote = 64;
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    bad = s;
    bad.members[1] = bad.members[0]; /* listed twice */
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    bad = s;
    bad.ends.ends[0].view_id = 10; /* an end after its latest view */
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    bad = s;
    bad.flags = 4;
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    bad = s;
    bad.num_members = 0;
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    /* Sources: of a member of the latest view, a point not after it, in
     * subgroup order. */
    bad = s;
    bad.num_sources = 2;
    bad.sources[0] = (struct view_restart_source){1, 2, 9, 4};
    bad.sources[1] = (struct view_restart_source){3, 4, 8, 0};
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(n, VIEW_WIRE_RESTART_BYTES(1, 2));
    assert_int_equal(view_wire_decode_restart(buf, n, &out), 0);
    assert_memory_equal(&out, &bad, sizeof bad);
    bad.sources[1].id = 5; /* not a member of view 9 (members 0..4) */
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    bad.sources[1].id = 4;
    bad.sources[1].view_id = 10; /* after the latest view */
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
    bad.sources[1].view_id = 8;
    bad.sources[1].subgroup = 1; /* not after the one before */
    n = view_wire_encode_restart(&bad, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart(buf, n, &out), SPINDLE_EPROTO);
}

static void test_a_fetch_round_trips_and_lies_are_refused(void **unused)
{
    (void)unused;
    struct view_restart_fetch f = {3, 1, 9, 5, 7, 40, 1u << 20}, out;
    uint8_t buf[VIEW_WIRE_RESTART_FETCH_SIZE];
    size_t n = view_wire_encode_restart_fetch(&f, buf, sizeof buf);
    assert_int_equal(n, VIEW_WIRE_RESTART_FETCH_SIZE);
    assert_int_equal(view_wire_type(buf, n), VIEW_WIRE_RESTART_FETCH);
    assert_int_equal(view_wire_decode_restart_fetch(buf, n, &out), 0);
    assert_memory_equal(&out, &f, sizeof f);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(view_wire_decode_restart_fetch(buf, cut, &out), SPINDLE_EPROTO);
    struct view_restart_fetch bad[] = {
        {64, 1, 9, 5, 7, 40, 0},                    /* asker */
        {3, SPINDLE_MAX_SUBGROUPS, 9, 5, 7, 40, 0}, /* subgroup */
        {3, 1, 9, 11, 7, 40, 0},                    /* next view after latest + 1 */
        {3, 1, 9, 5, 10, 0, 0},                     /* a point after the latest view */
        {3, 1, UINT64_MAX, 5, 7, 40, 0},            /* no view after the latest */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = view_wire_encode_restart_fetch(&bad[i], buf, sizeof buf);
        assert_int_equal(view_wire_decode_restart_fetch(buf, n, &out), SPINDLE_EPROTO);
    }
}

/* A slice of 100 bytes at offset 200 of a 1000-byte stream. */
static uint8_t slice_bytes[1000];

static void put_u32(uint8_t *at, uint32_t value)
{
    for (unsigned i = 0; i < 4; i++)
        at[i] = (uint8_t)(value >> (8 * i));
}

static size_t encode_slice(uint64_t total, uint64_t offset, uint32_t length, uint32_t flags,
                           uint8_t *buf, size_t cap)
{
    struct view_restart_slice slice = {total, offset, length, flags, 0x1234u, slice_bytes};
    return view_wire_encode_restart_slice(&slice, buf, cap);
}

static void test_a_slice_round_trips_and_lies_are_refused(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof slice_bytes; i++)
        slice_bytes[i] = (uint8_t)(i * 13u + 5u);
    uint8_t buf[VIEW_WIRE_RESTART_SLICE_HEADER_SIZE + sizeof slice_bytes + 1];
    struct view_restart_slice out;
    size_t n = encode_slice(1000, 200, 100, 0, buf, sizeof buf);
    assert_int_equal(n, VIEW_WIRE_RESTART_SLICE_HEADER_SIZE + 100);
    assert_int_equal(view_wire_type(buf, n), VIEW_WIRE_RESTART_SLICE);
    assert_int_equal(view_wire_decode_restart_slice(buf, n, &out), 0);
    assert_true(out.total == 1000 && out.offset == 200 && out.length == 100 && out.flags == 0);
    assert_int_equal(out.checksum, 0x1234u);
    assert_memory_equal(out.bytes, slice_bytes, 100);
    for (size_t cut = 0; cut < n; cut++)
        assert_int_equal(view_wire_decode_restart_slice(buf, cut, &out), SPINDLE_EPROTO);
    buf[n] = 0; /* a trailing byte */
    assert_int_equal(view_wire_decode_restart_slice(buf, n + 1, &out), SPINDLE_EPROTO);
    /* The last slice, marked. */
    n = encode_slice(1000, 900, 100, VIEW_RESTART_SLICE_LAST, buf, sizeof buf);
    assert_int_equal(view_wire_decode_restart_slice(buf, n, &out), 0);
    struct {
        uint64_t total, offset;
        uint32_t length, flags;
    } bad[] = {
        {0, 0, 1, 0},                         /* an empty stream */
        {1000, 1000, 1, 0},                   /* offset at the total */
        {1000, 200, 0, 0},                    /* no bytes */
        {1000, 950, 100, 0},                  /* past the total */
        {1000, 950, 100, 1},                  /* past the total, marked last */
        {1000, 200, 100, 2},                  /* unknown flags */
        {1000, 200, 100, 1},                  /* marked last before the end */
        {1000, 900, 100, 0},                  /* the end, not marked */
        {UINT64_MAX, UINT64_MAX - 1, 100, 0}, /* past the total (and 2^64) */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = encode_slice(bad[i].total, bad[i].offset, bad[i].length, bad[i].flags, buf, sizeof buf);
        if (n == 0) /* the length is beyond this buffer: the bytes count is the lie */
            n = encode_slice(bad[i].total, bad[i].offset, 1, bad[i].flags, buf, sizeof buf);
        assert_int_equal(view_wire_decode_restart_slice(buf, n, &out), SPINDLE_EPROTO);
    }
    /* Longer than a slice may be, and a length that the bytes do not match. */
    n = encode_slice(1000, 200, 100, 0, buf, sizeof buf);
    put_u32(buf + WIRE_HEADER_SIZE + 16, VIEW_RESTART_SLICE_MAX + 1u);
    assert_int_equal(view_wire_decode_restart_slice(buf, n, &out), SPINDLE_EPROTO);
    put_u32(buf + WIRE_HEADER_SIZE + 16, 99);
    assert_int_equal(view_wire_decode_restart_slice(buf, n, &out), SPINDLE_EPROTO);
    /* Reserved bytes not zero. */
    n = encode_slice(1000, 200, 100, 0, buf, sizeof buf);
    buf[WIRE_HEADER_SIZE + 28] = 1;
    assert_int_equal(view_wire_decode_restart_slice(buf, n, &out), SPINDLE_EPROTO);
}

/* The slices of a stream of slice_bytes, `size` bytes each. */
static struct view_restart_slice slice_at(uint64_t offset, uint32_t size)
{
    uint64_t total = sizeof slice_bytes;
    uint32_t length = total - offset < size ? (uint32_t)(total - offset) : size;
    struct view_restart_slice slice = {
        total,
        offset,
        length,
        0,
        sp_crc32c(0, slice_bytes, sizeof slice_bytes),
        slice_bytes + offset,
    };
    if (offset + length == total)
        slice.flags = VIEW_RESTART_SLICE_LAST;
    return slice;
}

static int take(struct view_restart_slices *s, struct view_restart_slice slice)
{
    return view_restart_slices_take(s, &slice, "member 2");
}

static void assert_refused(struct view_restart_slices *s, struct view_restart_slice slice,
                           const char *why)
{
    struct view_restart_slices before = *s;
    assert_int_equal(view_restart_slices_take(s, &slice, "member 2"), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), why));
    assert_memory_equal(s, &before, sizeof before); /* nothing of it taken */
}

static void test_an_asker_takes_slices_in_order_and_refuses_the_rest(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof slice_bytes; i++)
        slice_bytes[i] = (uint8_t)(i * 13u + 5u);
    struct view_restart_slices s = {0};
    assert_int_equal(take(&s, slice_at(0, 300)), 0);
    assert_true(s.have == 300 && s.total == 1000 && s.count == 1 && !s.done);
    /* Not at the offset taken: a gap, a repeat, one from before. */
    assert_refused(&s, slice_at(600, 300), "offset 600");
    assert_refused(&s, slice_at(0, 300), "offset 0");
    assert_refused(&s, slice_at(299, 300), "offset 299");
    /* The total changing between slices, or the stream's checksum. */
    struct view_restart_slice other = slice_at(300, 300);
    other.total = 2000;
    assert_refused(&s, other, "another stream");
    other = slice_at(300, 300);
    other.checksum ^= 1;
    assert_refused(&s, other, "another stream");
    /* Past the total, and a last flag that does not match the end. */
    other = slice_at(300, 300);
    other.length = 701;
    assert_refused(&s, other, "past its total");
    other = slice_at(300, 300);
    other.flags = VIEW_RESTART_SLICE_LAST;
    assert_refused(&s, other, "marked last");
    assert_int_equal(take(&s, slice_at(300, 300)), 0);
    other = slice_at(600, 400);
    other.flags = 0;
    assert_refused(&s, other, "not marked last");
    /* Bytes that do not make the stream announced. */
    slice_bytes[999] ^= 0xff;
    assert_refused(&s, slice_at(600, 400), "checksum");
    slice_bytes[999] ^= 0xff;
    assert_int_equal(take(&s, slice_at(600, 400)), 0);
    assert_true(s.done && s.have == 1000 && s.count == 3);
    assert_refused(&s, slice_at(600, 400), "after the last");
}

/* A member of a group restarted from view 7 = {0..5}, member 1 alone: it
 * heard members 2, 3 and 4 in the election, not 0 nor 5 (keep_restart). */
static void restarted_alone(struct view_restart *r, struct view *view)
{
    memset(r, 0, sizeof *r);
    r->self = 1;
    r->reserved = 0x3f;
    for (uint32_t id = 1; id <= 4; id++)
        snprintf(r->names[id], sizeof r->names[id], "m%u", id);
    memset(view, 0, sizeof *view);
    view->id = 8;
    view->num_members = 1;
    view->member_ids[0] = 1;
    snprintf(view->identities[0].name, sizeof view->identities[0].name, "m1");
}

static struct view_join_request joiner(const char *name, bool restarts, uint32_t id)
{
    struct view_join_request req;
    memset(&req, 0, sizeof req);
    snprintf(req.identity.name, sizeof req.identity.name, "%s", name);
    req.identity.incarnation = 2;
    req.flags = restarts ? VIEW_JOIN_RESTART : 0;
    req.restart_id = restarts ? id : 0;
    return req;
}

/* Issue 20: member 5, not heard before member 1 started, was given id 0
 * (the lowest id no name heard held), another member's id. */
static void test_a_restarting_member_gets_the_id_its_log_holds_or_is_refused(void **unused)
{
    (void)unused;
    static struct view_restart r;
    struct view view;
    restarted_alone(&r, &view);
    uint32_t id = SPINDLE_MAX_MEMBERS;
    struct view_join_request req = joiner("m5", true, 5);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 5);
    req = joiner("m0", true, 0); /* not heard: its id was kept with no name */
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 0);
    req = joiner("m3", true, 3);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 3);
    /* An id held for another name, or by a member of the view: refused. */
    id = SPINDLE_MAX_MEMBERS;
    req = joiner("m9", true, 2);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "member id 2, which the log of 'm9' holds, "
                                             "restarted as 'm2'"));
    req = joiner("m9", true, 1);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "is held by 'm1' in view 8"));
    assert_int_equal(id, SPINDLE_MAX_MEMBERS);
    /* The same, asked for by a member whose log holds it: given. */
    req = joiner("m2", true, 2);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 2);
}

static void test_a_new_joiner_never_takes_an_id_held_for_a_restarting_member(void **unused)
{
    (void)unused;
    static struct view_restart r;
    struct view view;
    restarted_alone(&r, &view);
    uint32_t id = SPINDLE_MAX_MEMBERS;
    struct view_join_request req = joiner("new", false, 0);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 6); /* not 0 nor 5: members of the view restarted from */
    req = joiner("m4", false, 0);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 4); /* its name's */
    assert_int_equal(view_restart_id(NULL, &view, &req, &id), 0);
    assert_int_equal(id, 0); /* a group that did not restart */
    /* Every free id held: refused, never one of them. */
    r.reserved = ~0ull;
    id = SPINDLE_MAX_MEMBERS;
    req = joiner("new", false, 0);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), SPINDLE_EINVAL);
    assert_int_equal(id, SPINDLE_MAX_MEMBERS);
    assert_non_null(strstr(spindle_errmsg(), "no member id is free"));
    req = joiner("m5", true, 5);
    assert_int_equal(view_restart_id(&r, &view, &req, &id), 0);
    assert_int_equal(id, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_best_log_is_voted_for_and_starts_with_a_majority),
        cmocka_unit_test(test_a_later_view_beats_more_messages_and_ties_go_to_the_lower_id),
        cmocka_unit_test(test_a_vote_stays_until_its_member_gives_it_away),
        cmocka_unit_test(test_half_is_not_enough_without_the_tie_breaker),
        cmocka_unit_test(test_a_running_member_is_followed_and_outsiders_do_not_count),
        cmocka_unit_test(test_a_log_past_the_restart_point_is_told_apart),
        cmocka_unit_test(test_a_subgroup_the_restart_point_holds_nothing_of_is_not_dropped),
        cmocka_unit_test(test_a_subgroup_the_point_lacks_is_kept_level_with_its_source),
        cmocka_unit_test(test_the_starting_member_names_the_source_of_what_it_lacks),
        cmocka_unit_test(test_a_fetch_round_trips_and_lies_are_refused),
        cmocka_unit_test(test_a_slice_round_trips_and_lies_are_refused),
        cmocka_unit_test(test_an_asker_takes_slices_in_order_and_refuses_the_rest),
        cmocka_unit_test(test_each_logged_subgroup_needs_a_member_heard_before_the_start),
        cmocka_unit_test(test_the_status_round_trips_and_lies_are_refused),
        cmocka_unit_test(test_a_restarting_member_gets_the_id_its_log_holds_or_is_refused),
        cmocka_unit_test(test_a_new_joiner_never_takes_an_id_held_for_a_restarting_member),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
