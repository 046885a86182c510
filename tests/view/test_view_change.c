/*
 * Failure-driven view changes with real processes over shm: members stream
 * messages, the parent kill -9s one (or two) of them mid-stream, and the
 * survivors must wedge, agree on the ragged-edge trim, install the next
 * view and resend. Each survivor writes its delivery log to a file; the
 * parent checks virtual synchrony on the logs:
 *   - per view, every survivor delivered the identical sequence;
 *   - every message of a surviving sender was delivered exactly once, in
 *     sender order, across the views (resends included);
 *   - the killed sender's delivered messages are a gap-free prefix;
 *   - the view upcall named view 1 without the killed member.
 * A member stopped with SIGSTOP is found by its silent heartbeat and
 * removed like a killed one; once the others are done, SIGCONT lets it
 * run again, and its next call must fail with SPINDLE_EREMOVED saying
 * that it was removed.
 * A member that fails inside the view change, after every survivor's blob
 * is out but before its own commitment, while the others have committed
 * (a test hook kills it at exactly that step): the others install view 1
 * with it, find it failed there and remove it in view 2.
 * A member that is already in spindle_group_shutdown (flushed, waiting at
 * its barrier) when another is killed takes part in the view change: the
 * others finish in view 1, and its shutdown completes in view 1 with them.
 * A slow member (its delivery upcall takes 400 ms once it has delivered a
 * quarter of the stream) in a group with slow_member_ms = 200 holds the
 * senders' windows full: a sender suspects it and the others remove it in
 * view 1; its own next call says that it was removed.
 * An unordered subgroup (delivery on receipt) through a kill and a leave:
 * every survivor must deliver every message of every surviving sender
 * exactly once and in its order (resends from the survivors' edge, taken
 * again without delivery where already delivered), and a prefix of the
 * killed sender's.
 * With tie_breaker, a group of two survives the failure of the member that
 * is not the leader (half of the view, holding the leader, goes on), and
 * the leader's partner stops when the leader fails.
 * A member that lies in its view blob (it claims to have received nothing,
 * which its acknowledgements contradict) is removed by the others, who go
 * on, and its own next call says that it was removed. So is a member
 * patched to write a ring slot length past max_payload: the others fail it
 * at that slot, remove it, agree and shut down, and its own shutdown
 * returns within its timeout.
 * And the majority rule: a lone survivor of three stops with
 * SPINDLE_EMINORITY instead of installing a view. A graceful leave is
 * checked the same way: the leaver's messages must all be delivered, by
 * every member that stays, before the view without it. A layout function
 * is checked by moving a subgroup: subgroup 1 starts with members 0 and 1,
 * and the function puts every member of view 1 in it, which it must hear
 * about with the right view; members that were never in subgroup 1 must
 * then deliver what member 0 sends there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "control/ctl.h"
#include "smc/smc.h"
#include "smc/smc_slot_wire.h"
#include "view/view_impl.h"

#define MAX_MEMBERS 8
#define MESSAGES    1500

struct record {
    uint64_t view_id;
    uint64_t app_index;
    uint32_t sender;
    uint32_t pad;
};

struct child {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct record *records;
    size_t count;
    uint64_t per_sender[MAX_MEMBERS];
    uint64_t view_id;
    uint32_t view_members;
    uint32_t left_mask;
    int bad;
    uint64_t moved;      /* messages delivered in subgroup 1 (the moved one) */
    int slow_upcalls;    /* a slow member: upcalls left that take SLOW_UPCALL_MS */
    int layout_calls;    /* atomic: calls of the layout function */
    int layout_mismatch; /* atomic: a call saw a view it should not have */
};

#define MOVED_MESSAGES 100
#define SLOW_UPCALL_MS 400
#define SLOW_MEMBER_MS 200

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    struct child *c = ctx;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < count; i++) {
        uint64_t index = 0;
        if (m[i].subgroup == 1) {
            c->moved += m[i].sender_id == 0 && m[i].length == 8;
            c->bad |= m[i].sender_id != 0 || m[i].length != 8;
            continue;
        }
        if (m[i].length != 16 || m[i].sender_id >= MAX_MEMBERS) {
            c->bad = 1;
            continue;
        }
        memcpy(&index, m[i].data, 8);
        struct record r = {m[i].view_id, index, m[i].sender_id, 0};
        c->records[c->count++] = r;
        c->per_sender[m[i].sender_id]++;
    }
    bool slow = c->slow_upcalls > 0 && c->count > MESSAGES / 4;
    c->slow_upcalls -= slow;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    if (slow) {
        struct timespec pause = {0, SLOW_UPCALL_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct child *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->view_id = view->view_id;
    c->view_members = view->num_members;
    for (uint32_t i = 0; i < view->num_left; i++)
        c->left_mask |= 1u << view->left[i];
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* True once the view without gone_mask is installed and every sender
 * outside dead_mask delivered all its messages. */
static int complete(struct child *c, uint32_t members, uint32_t dead_mask, uint32_t gone_mask)
{
    if (c->left_mask != gone_mask)
        return 0;
    for (uint32_t s = 0; s < members; s++)
        if (((dead_mask >> s) & 1) == 0 && c->per_sender[s] < MESSAGES)
            return 0;
    return 1;
}

static int wait_complete(struct child *c, uint32_t members, uint32_t dead_mask, uint32_t gone_mask,
                         int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    int ok = 1;
    pthread_mutex_lock(&c->lock);
    while (!complete(c, members, dead_mask, gone_mask) && ok)
        ok = pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0;
    ok = complete(c, members, dead_mask, gone_mask);
    pthread_mutex_unlock(&c->lock);
    return ok;
}

/* View 1 (member 2 of 4 killed): subgroup 1 gets every member of the view,
 * with the lowest-ranked one (member 0) as its only sender. */
static int move_subgroup(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                         struct spindle_subgroup_layout *subgroups)
{
    struct child *c = ctx;
    __atomic_add_fetch(&c->layout_calls, 1, __ATOMIC_RELAXED);
    if (view->view_id != 1 || view->num_members != 3 || view->my_rank != SPINDLE_RANK_ANY ||
        view->detected_ns != 0 || view->installed_ns != 0 || view->num_left != 1 ||
        view->left[0] != 2 || num_subgroups != 2 || subgroups[0].num_members != 3 ||
        subgroups[1].num_members != 2)
        __atomic_store_n(&c->layout_mismatch, 1, __ATOMIC_RELAXED);
    subgroups[1].num_members = view->num_members;
    for (uint32_t r = 0; r < view->num_members; r++)
        subgroups[1].members[r] = r;
    subgroups[1].num_senders = 1;
    subgroups[1].senders[0] = 0;
    return 0;
}

struct scenario {
    bool move;               /* a second subgroup that the layout function moves */
    uint32_t self_kill_mask; /* these members kill themselves before their
                                commitment in the first view change */
    uint32_t early_mask;     /* these members are in spindle_group_shutdown
                                when the victims are killed */
    int go[2];               /* with victims or early_mask (holds_halfway):
                                the others wait half-way until EOF here
                                (the kill or stop has landed) */
    uint32_t members;
    uint32_t dead_mask;
    uint32_t stop_mask;          /* these members are stopped (SIGSTOP), resumed at the end */
    uint32_t slow_mask;          /* these members deliver slowly (slow_member_ms is on) */
    uint32_t liar_mask;          /* these members claim in their view blob to have
                                    received nothing */
    uint32_t protocol_liar_mask; /* these members write a slot length past
                                    max_payload a quarter into their stream
                                    (or, with ack_liar, acknowledge more of
                                    sender 0's positions than it published) */
    bool ack_liar;
    bool tie_breaker;    /* spindle_group_options.tie_breaker */
    bool unordered;      /* subgroup 0 is unordered */
    uint32_t leave_mask; /* these members leave gracefully after sending */
    const char *dir;
    int progress_fd; /* victims write one byte here once streaming */
    int release[2];  /* leavers stay alive until EOF here: the others must
                        learn of the leave from the SST, not from an exit */
};

static int create_group(const struct scenario *s, uint32_t self, struct child *c,
                        spindle_group_t **group)
{
    static uint32_t ids[MAX_MEMBERS] = {0, 1, 2, 3, 4, 5, 6, 7};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = s->members;
    o.bootstrap = s->dir;
    o.failure_timeout_ms = 1500;
    o.slow_member_ms = s->slow_mask != 0 ? SLOW_MEMBER_MS : 0;
    o.tie_breaker = s->tie_breaker;
    o.tolerate_failures = true;
    o.deliver = on_deliver;
    o.deliver_ctx = c;
    o.view_changed = on_view;
    o.view_ctx = c;
    struct spindle_subgroup_config sg[2] = {
        {ids, s->members, ids, s->members, 16, 64,
         s->unordered ? SPINDLE_MODE_UNORDERED : SPINDLE_MODE_ATOMIC},
        {ids, 2, ids, 1, 16, 64, SPINDLE_MODE_ATOMIC}, /* members 0 and 1, sender 0 */
    };
    if (s->move) {
        o.layout = move_subgroup;
        o.layout_ctx = c;
    }
    return spindle_group_create(&o, sg, s->move ? 2 : 1, group);
}

/* Test hook of a self_kill member: its blob is out (every survivor's blob
 * names the set); it waits until every other survivor has committed, so
 * that none of them can follow it to a larger set, and dies without
 * committing. */
static void die_before_commit(struct view_membership *m, const struct view_next *next)
{
    uint64_t others = next->how.survivors & ~(1ull << m->config.self);
    uint32_t tag = view_change_tag(next->epoch->view.id, STEP_COMMIT);
    static uint8_t all[SPINDLE_MAX_MEMBERS * VIEW_WIRE_COMMIT_SIZE];
    uint64_t have = 0;
    for (int round = 0; round < 1500 && have != others; round++)
        (void)ctl_collect(m->ctl, tag, others, all, VIEW_WIRE_COMMIT_SIZE, 20, &have);
    raise(SIGKILL);
}

/* Test hook of a liar: its blob claims it received nothing, which the
 * others, having seen its acknowledgements, know to be false. */
static void lie_in_blob(struct view_blob *mine)
{
    memset(mine->counts, 0, (size_t)mine->num_subgroups * SST_MAX_ROWS * sizeof *mine->counts);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Test hooks of a slot liar (a member patched to lie in its ring slots):
 * its message a quarter into its stream (MESSAGES / 4) gets a length of
 * max_payload + 1 in its header, pushed as such (the bytes it pushes, up
 * to that length, stay inside its ring). From then on it takes nothing
 * from its own ring (it would find its own lie), so only the others read
 * it. Both hooks run under the engine lock. */
#define SLOT_LIAR_MAX_PAYLOAD 64u /* subgroup 0's max_payload (create_group) */
static uint32_t slot_liar_row;
static bool slot_lied;

static uint64_t long_slot(uint32_t subgroup, uint64_t position, uint64_t header)
{
    (void)position;
    static uint64_t committed; /* messages of subgroup 0 before this one */
    if (subgroup != 0 || __atomic_load_n(&slot_lied, __ATOMIC_ACQUIRE) ||
        committed++ < MESSAGES / 4)
        return header;
    __atomic_store_n(&slot_lied, true, __ATOMIC_RELEASE);
    return (header & ~(uint64_t)SMC_LENGTH_MASK) | (SLOT_LIAR_MAX_PAYLOAD + 1);
}

/* Test hook of an acknowledgement liar (a member patched to lie in its
 * received_num counters): once it holds a quarter of sender 0's stream it
 * claims to have received far more of sender 0's positions than sender 0
 * published (still below SMC_COUNTER_MAX, so only sender 0 can tell). */
static uint64_t inflated_ack(uint32_t subgroup, uint32_t sender_rank, uint64_t received)
{
    if (subgroup != 0 || sender_rank != 0 || received < MESSAGES / 4)
        return received;
    return received + SMC_COUNTER_MAX / 2;
}

static bool hold_own_ring(uint32_t subgroup, uint32_t sender_row)
{
    (void)subgroup;
    return sender_row == slot_liar_row && __atomic_load_n(&slot_lied, __ATOMIC_ACQUIRE);
}

/* Members that leave the group in the scenario, one way or another. */
static uint32_t gone_of(const struct scenario *s)
{
    return s->dead_mask | s->stop_mask | s->slow_mask | s->self_kill_mask | s->leave_mask |
           s->liar_mask | s->protocol_liar_mask;
}

/* Whether the members that are not killed are a quorum of view 0: more than
 * half, or with tie_breaker half including the leader (member 0). */
static bool survivors_go_on(const struct scenario *s)
{
    uint32_t survivors = s->members - (uint32_t)__builtin_popcount(s->dead_mask);
    return 2 * survivors > s->members ||
           (s->tie_breaker && 2 * survivors == s->members && (s->dead_mask & 1) == 0);
}

/* Whether the members that stay wait half-way through their streams until
 * the victims are killed or stopped (or the early ones are in shutdown). */
static bool holds_halfway(const struct scenario *s)
{
    return (s->dead_mask | s->stop_mask | s->early_mask) != 0;
}

/* Polls (up to 30 s) until this member has stopped; returns why (0 if it
 * still takes part in the group). */
static int wait_stopped(spindle_group_t *group)
{
    int rc = 0;
    for (uint64_t start = now_ms(); rc == 0 && now_ms() - start < 30000;) {
        rc = spindle_group_status(group);
        if (rc == 0)
            usleep(1000);
    }
    return rc;
}

/* Child body; returns the exit status. */
static int member_main(const struct scenario *s, uint32_t self)
{
    struct child c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.lock, NULL);
    pthread_cond_init(&c.cond, NULL);
    c.records = calloc((size_t)s->members * MESSAGES * 2, sizeof *c.records);
    spindle_group_t *group = NULL;
    if ((s->self_kill_mask >> self) & 1)
        view_test_before_commit(die_before_commit);
    if ((s->slow_mask >> self) & 1)
        c.slow_upcalls = 10;
    if ((s->liar_mask >> self) & 1)
        view_test_blob(lie_in_blob);
    if ((s->protocol_liar_mask >> self) & 1) {
        if (s->ack_liar) {
            smc_test_ack_value(inflated_ack);
        } else {
            slot_liar_row = self;
            smc_test_hold_receive(hold_own_ring);
            smc_test_send_header(long_slot);
        }
    }
    if (c.records == NULL || create_group(s, self, &c, &group) != 0)
        return 10;
    int rc = 0;
    uint32_t victims = s->dead_mask | s->stop_mask;
    uint32_t failed =
        victims | s->slow_mask | s->self_kill_mask | s->liar_mask | s->protocol_liar_mask;
    bool early = (s->early_mask >> self) & 1;
    bool hold = holds_halfway(s) && !early && ((victims >> self) & 1) == 0;
    if (holds_halfway(s))
        close(s->go[1]); /* EOF on go once the parent closes its end */
    for (uint64_t i = 0; i < MESSAGES && rc == 0; i++) {
        uint64_t payload[2] = {i, self};
        rc = spindle_send(group, 0, payload, sizeof payload, 0);
        if (i == MESSAGES / 4 && ((victims >> self) & 1) && write(s->progress_fd, "x", 1) != 1)
            return 11;
        /* A victim to be killed stops itself here, its predicate thread
         * too: it could otherwise send the rest of the stream before the
         * kill lands. That alone does not hold the others back: while its
         * sending thread waits for the CPU, its predicate thread null-sends
         * up to their round (Spindle 3.3), so on a loaded machine they can
         * be far ahead, even done. So the others wait half-way for the
         * kill (or stop): the second half of their streams is delivered in
         * view 1, and a member that must take part in the change (a liar)
         * is still there for it. */
        if (i == MESSAGES / 4 && ((s->dead_mask >> self) & 1))
            raise(SIGSTOP);
        if (i == MESSAGES / 2 && hold) {
            char byte;
            while (read(s->go[0], &byte, 1) > 0)
                ;
        }
    }
    if (rc == 0 && ((s->dead_mask >> self) & 1)) {
        /* A victim that got this far before the parent's kill landed (a
         * loaded machine) waits for it: it must not finish. */
        for (;;)
            pause();
    }
    if (early) {
        /* Every own message is stable: tell the parent, then shut down
         * while the others still stream (they wait for the kill). */
        if (rc == 0)
            rc = spindle_flush(group, 30000);
        if (rc == 0 && write(s->progress_fd, "s", 1) != 1)
            return 11;
        if (rc == 0)
            rc = spindle_group_shutdown(group, 60000);
        if (rc != 0)
            fprintf(stderr, "member %u: shutdown: %d (%s)\n", self, rc, spindle_errmsg());
        pthread_mutex_lock(&c.lock);
        uint32_t gone = (uint32_t)__builtin_popcount(failed);
        bool in_next = c.view_id == 1 && c.view_members == s->members - gone;
        pthread_mutex_unlock(&c.lock);
        spindle_group_destroy(group);
        return rc == 0 && in_next && !c.bad ? 0 : 21;
    }
    if ((s->protocol_liar_mask >> self) & 1) {
        /* Failed by the others at its bad slot: its sends, or else its
         * shutdown, say that it is out of the group (removed, or, when it
         * saw the others drop it before it heard of the new view, in a
         * minority of one), and its shutdown returns within its timeout
         * (10 s) all the same. */
        int sent_rc = rc;
        uint64_t start = now_ms();
        int shut = spindle_group_shutdown(group, 10000);
        uint64_t took = now_ms() - start;
        int out = sent_rc != 0 ? sent_rc : shut;
        int removed = out == SPINDLE_EREMOVED || out == SPINDLE_EMINORITY;
        if (!removed || took > 12000)
            fprintf(stderr, "protocol liar %u: sending %d, shutdown %d (%s) after %llu ms\n", self,
                    sent_rc, shut, spindle_errmsg(), (unsigned long long)took);
        spindle_group_destroy(group);
        return removed && took <= 12000 ? 0 : 22;
    }
    if (((s->stop_mask | s->slow_mask | s->liar_mask) >> self) & 1) {
        /* Resumed (or back from its slow upcall, or found lying) after the
         * others removed it: a send or the flush after them says so. */
        if (rc == 0)
            rc = spindle_flush(group, 30000);
        /* Or it got through its stream and flush before it was found out
         * (on a loaded machine the parent's stop can land that late): it
         * stays until it is removed, or the others would find it failed
         * (exited) rather than stopped, slow or lying. */
        if (rc == 0)
            rc = wait_stopped(group);
        int removed =
            rc == SPINDLE_EREMOVED && strstr(spindle_errmsg(), "removed from the group") != NULL;
        if (!removed)
            fprintf(stderr, "stopped member %u: %d (%s)\n", self, rc, spindle_errmsg());
        spindle_group_destroy(group);
        return removed ? 0 : 20;
    }
    if (((s->dead_mask >> self) & 1) || !survivors_go_on(s)) {
        /* A member that cannot go on learns so once the kill lands,
         * however far its own stream got before it. */
        while (rc == 0 && (rc = spindle_group_status(group)) == 0)
            usleep(1000);
        spindle_group_destroy(group);
        return rc == SPINDLE_EMINORITY ? 0 : (rc == 0 ? 12 : 13);
    }
    if (rc == 0 && ((s->leave_mask >> self) & 1)) {
        rc = spindle_group_leave(group, 30000);
        int after = spindle_send(group, 0, &rc, sizeof rc, 0);
        char byte;
        close(s->release[1]);
        while (read(s->release[0], &byte, 1) > 0)
            ;
        spindle_group_destroy(group);
        return rc == 0 && after == SPINDLE_ESHUTDOWN ? 0 : 18;
    }
    if (rc != 0 || !wait_complete(&c, s->members, failed, failed | s->leave_mask, 30)) {
        fprintf(stderr, "member %u: sending: %d (%s), view %llu of %u members\n", self, rc,
                rc != 0 ? spindle_errmsg() : "incomplete", (unsigned long long)c.view_id,
                c.view_members);
        return 14;
    }
    if (s->move) {
        /* In view 1 every survivor is in subgroup 1, member 0 its sender. */
        for (uint64_t i = 0; i < MOVED_MESSAGES && rc == 0 && self == 0; i++)
            rc = spindle_send(group, 1, &i, sizeof i, 0);
        uint64_t none = 0;
        int refused = self == 0 ? SPINDLE_EPERM : spindle_send(group, 1, &none, sizeof none, 0);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 30;
        pthread_mutex_lock(&c.lock);
        while (c.moved < MOVED_MESSAGES && pthread_cond_timedwait(&c.cond, &c.lock, &ts) == 0)
            ;
        int moved_ok = c.moved == MOVED_MESSAGES;
        pthread_mutex_unlock(&c.lock);
        if (rc != 0 || refused != SPINDLE_EPERM || !moved_ok ||
            __atomic_load_n(&c.layout_calls, __ATOMIC_RELAXED) != 1 ||
            __atomic_load_n(&c.layout_mismatch, __ATOMIC_RELAXED))
            return 19;
    }
    if (spindle_group_shutdown(group, 10000) != 0) {
        fprintf(stderr, "member %u: shutdown: %s\n", self, spindle_errmsg());
        return 15;
    }
    spindle_group_destroy(group);
    char path[4200];
    snprintf(path, sizeof path, "%s/log-%u", s->dir, self);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(c.records, sizeof *c.records, c.count, f) != c.count || c.bad)
        return 16;
    fclose(f);
    /* A member that failed inside the first change is removed by a second. */
    uint64_t final_view = s->self_kill_mask != 0 ? 2 : 1;
    uint32_t gone = (uint32_t)__builtin_popcount(gone_of(s));
    return c.view_id == final_view && c.view_members == s->members - gone ? 0 : 17;
}

static struct record *load_log(const char *dir, uint32_t id, size_t *count)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/log-%u", dir, id);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    struct record *r = calloc((size_t)MAX_MEMBERS * MESSAGES * 2, sizeof *r);
    assert_non_null(r);
    *count = fread(r, sizeof *r, (size_t)MAX_MEMBERS * MESSAGES * 2, f);
    fclose(f);
    return r;
}

/* Virtual synchrony over the survivors' logs (see the file header). */
/* An unordered subgroup's logs: each survivor delivered every message of
 * every surviving sender once, in sender order, across the views, and a
 * gap-free prefix of each killed sender's (any length: not all-or-none). */
static void check_unordered_logs(struct record **logs, const size_t *counts, uint32_t members,
                                 uint32_t dead_mask)
{
    for (uint32_t m = 0; m < members; m++) {
        if (logs[m] == NULL)
            continue;
        uint64_t next[MAX_MEMBERS] = {0};
        for (size_t i = 0; i < counts[m]; i++) {
            const struct record *r = &logs[m][i];
            if (r->app_index != next[r->sender])
                fail_msg("member %u: message %llu of sender %u after %llu of its messages", m,
                         (unsigned long long)r->app_index, r->sender,
                         (unsigned long long)next[r->sender]);
            next[r->sender]++;
        }
        for (uint32_t s = 0; s < members; s++)
            if (((dead_mask >> s) & 1) == 0 && next[s] != MESSAGES)
                fail_msg("member %u delivered %llu of sender %u's %u messages", m,
                         (unsigned long long)next[s], s, MESSAGES);
    }
}

static void check_logs(const char *dir, uint32_t members, uint32_t dead_mask, uint32_t leave_mask,
                       uint64_t final_view, bool unordered)
{
    struct record *logs[MAX_MEMBERS] = {0};
    size_t counts[MAX_MEMBERS] = {0};
    uint32_t gone_mask = dead_mask | leave_mask;
    uint32_t first = 0;
    while ((gone_mask >> first) & 1)
        first++;
    for (uint32_t m = 0; m < members; m++)
        if (((gone_mask >> m) & 1) == 0)
            logs[m] = load_log(dir, m, &counts[m]);
    if (unordered) {
        check_unordered_logs(logs, counts, members, dead_mask);
        for (uint32_t m = 0; m < members; m++)
            free(logs[m]);
        return;
    }
    for (uint32_t m = 0; m < members; m++) {
        if (logs[m] == NULL)
            continue;
        assert_int_equal(counts[m], counts[first]);
        assert_memory_equal(logs[m], logs[first], counts[m] * sizeof(struct record));
    }
    uint64_t next[MAX_MEMBERS] = {0}, in_view1 = 0;
    for (size_t i = 0; i < counts[first]; i++) {
        const struct record *r = &logs[first][i];
        assert_true(r->view_id <= final_view);
        in_view1 += r->view_id >= 1;
        assert_int_equal(r->app_index, next[r->sender]); /* once each, in order */
        next[r->sender]++;
    }
    for (uint32_t s = 0; s < members; s++)
        if (((dead_mask >> s) & 1) == 0)
            assert_int_equal(next[s], MESSAGES);
    if (dead_mask != 0) /* the victims die a quarter in: the others go on in view 1 */
        assert_true(in_view1 > 0);
    for (uint32_t m = 0; m < members; m++)
        free(logs[m]);
}

/* Forks the members of s, kills the victims once they stream, checks the
 * survivors' exit statuses and (expect_logs) their logs. */
static void run_scenario(struct scenario *s, int expect_logs)
{
    char dir[] = "/tmp/spindle-view-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    uint32_t members = s->members, dead_mask = s->dead_mask, stop_mask = s->stop_mask;
    uint32_t leave_mask = s->leave_mask, self_kill_mask = s->self_kill_mask;
    s->dir = dir;
    s->progress_fd = fds[1];
    assert_int_equal(pipe(s->release), 0);
    if (holds_halfway(s))
        assert_int_equal(pipe(s->go), 0);
    pid_t pids[MAX_MEMBERS];
    for (uint32_t i = 0; i < members; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            _exit(member_main(s, i));
        }
    }
    close(fds[1]);
    close(s->release[0]);
    int signals = __builtin_popcount(dead_mask | stop_mask) + __builtin_popcount(s->early_mask);
    for (int v = 0; v < signals; v++) {
        char byte;
        assert_int_equal(read(fds[0], &byte, 1), 1);
    }
    for (uint32_t i = 0; i < members; i++) {
        if ((dead_mask >> i) & 1)
            kill(pids[i], SIGKILL);
        if ((stop_mask >> i) & 1)
            kill(pids[i], SIGSTOP);
    }
    if (holds_halfway(s)) {
        close(s->go[0]);
        close(s->go[1]); /* the others go on sending, now in view 1 */
    }
    close(fds[0]);
    /* Members that stay first (they end only after the view without the
     * leavers), then release and reap the leavers. */
    for (uint32_t k = 0; k < 2 * members; k++) {
        uint32_t i = k % members;
        if (k == members)
            close(s->release[1]);
        if ((k < members) == (((leave_mask >> i) & 1) != 0) || ((stop_mask >> i) & 1))
            continue;
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (((dead_mask | self_kill_mask) >> i) & 1) {
            if (!WIFSIGNALED(status))
                fail_msg("member %u: status 0x%x, not killed", i, status);
            continue;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status %d", i, status);
    }
    /* The others are done: the stopped members run again and must learn
     * that they were removed. */
    for (uint32_t i = 0; i < members; i++) {
        if (((stop_mask >> i) & 1) == 0)
            continue;
        kill(pids[i], SIGCONT);
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("stopped member %u: status 0x%x", i, status);
    }
    /* Members in shutdown early keep no log; all their messages must be
     * delivered, as a leaver's. */
    if (expect_logs)
        check_logs(dir, members,
                   dead_mask | stop_mask | s->slow_mask | self_kill_mask | s->liar_mask |
                       s->protocol_liar_mask,
                   leave_mask | s->early_mask, self_kill_mask != 0 ? 2 : 1, s->unordered);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void run_stopping(uint32_t members, uint32_t dead_mask, uint32_t stop_mask,
                         uint32_t leave_mask, int expect_logs, bool move)
{
    struct scenario s = {.move = move,
                         .members = members,
                         .dead_mask = dead_mask,
                         .stop_mask = stop_mask,
                         .leave_mask = leave_mask,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&s, expect_logs);
}

static void run(uint32_t members, uint32_t dead_mask, uint32_t leave_mask, int expect_logs,
                bool move)
{
    run_stopping(members, dead_mask, 0, leave_mask, expect_logs, move);
}

static void test_kill_one_of_four(void **state)
{
    (void)state;
    run(4, 1u << 2, 0, 1, false);
}

static void test_kill_leader_of_three(void **state)
{
    (void)state;
    run(3, 1u << 0, 0, 1, false);
}

static void test_minority_stops(void **state)
{
    (void)state;
    run(3, (1u << 1) | (1u << 2), 0, 0, false);
}

static void test_graceful_leave(void **state)
{
    (void)state;
    run(4, 0, 1u << 3, 1, false);
}

static void test_stopped_member_is_removed_and_told_on_resume(void **state)
{
    (void)state;
    run_stopping(4, 0, 1u << 3, 0, 1, false);
}

static void test_slow_member_is_removed_when_asked(void **state)
{
    (void)state;
    struct scenario s = {.members = 4, .slow_mask = 1u << 3, .release = {-1, -1}, .go = {-1, -1}};
    run_scenario(&s, 1);
}

static void test_unordered_survivors_miss_nothing_of_surviving_senders(void **state)
{
    (void)state;
    for (int run = 0; run < 3; run++) {
        struct scenario s = {.members = 4,
                             .dead_mask = 1u << (uint32_t)(1 + run),
                             .unordered = true,
                             .release = {-1, -1},
                             .go = {-1, -1}};
        run_scenario(&s, 1);
    }
    struct scenario leave = {.members = 4,
                             .leave_mask = 1u << 3,
                             .unordered = true,
                             .release = {-1, -1},
                             .go = {-1, -1}};
    run_scenario(&leave, 1);
}

static void test_tie_breaker_keeps_the_leaders_side_of_two(void **state)
{
    (void)state;
    struct scenario s = {.members = 2,
                         .dead_mask = 1u << 1,
                         .tie_breaker = true,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&s, 1); /* the leader goes on alone, with every message */
    struct scenario t = {.members = 2,
                         .dead_mask = 1u << 0,
                         .tie_breaker = true,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&t, 0); /* its partner stops: SPINDLE_EMINORITY */
}

static void test_member_failing_before_its_commitment_leaves_in_the_next_view(void **state)
{
    (void)state;
    /* Five members: member 4 is killed, member 3 dies inside the change to
     * view 1 once the others (0, 1, 2: a majority of five) committed. */
    struct scenario s = {.members = 5,
                         .dead_mask = 1u << 4,
                         .self_kill_mask = 1u << 3,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&s, 1);
}

static void test_member_lying_in_its_blob_is_removed(void **state)
{
    (void)state;
    /* Five members: member 4 is killed; in the change member 3 claims to
     * have received nothing. The others (a majority of five) remove it
     * too rather than stop or trim below what they delivered. */
    struct scenario s = {.members = 5,
                         .dead_mask = 1u << 4,
                         .liar_mask = 1u << 3,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&s, 1);
}

static void test_member_lying_in_a_ring_slot_is_removed(void **state)
{
    (void)state;
    /* Four members: member 2 writes a slot length past max_payload. The
     * others fail it (SPINDLE_EPROTO) without reading the slot, remove it
     * in view 1, deliver the same sequence and shut down; its own shutdown
     * returns within its timeout. */
    struct scenario s = {
        .members = 4, .protocol_liar_mask = 1u << 2, .release = {-1, -1}, .go = {-1, -1}};
    run_scenario(&s, 1);
}

static void test_member_lying_in_its_acknowledgements_is_removed(void **state)
{
    (void)state;
    /* Four members: member 2 acknowledges positions of member 0 (sender
     * rank 0) that member 0 never published. Member 0 fails it, the view
     * change removes it, the others deliver the same sequence and shut
     * down; its own shutdown returns within its timeout. */
    struct scenario s = {.members = 4,
                         .protocol_liar_mask = 1u << 2,
                         .ack_liar = true,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&s, 1);
}

static void test_member_in_shutdown_takes_part_in_a_view_change(void **state)
{
    (void)state;
    /* Member 0 is in its shutdown barrier when member 3 is killed. */
    struct scenario s = {.members = 4,
                         .dead_mask = 1u << 3,
                         .early_mask = 1u << 0,
                         .release = {-1, -1},
                         .go = {-1, -1}};
    run_scenario(&s, 1);
}

static void test_layout_function_moves_a_subgroup(void **state)
{
    (void)state;
    run(4, 1u << 2, 0, 1, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_one_of_four),
        cmocka_unit_test(test_kill_leader_of_three),
        cmocka_unit_test(test_minority_stops),
        cmocka_unit_test(test_graceful_leave),
        cmocka_unit_test(test_stopped_member_is_removed_and_told_on_resume),
        cmocka_unit_test(test_slow_member_is_removed_when_asked),
        cmocka_unit_test(test_tie_breaker_keeps_the_leaders_side_of_two),
        cmocka_unit_test(test_unordered_survivors_miss_nothing_of_surviving_senders),
        cmocka_unit_test(test_member_failing_before_its_commitment_leaves_in_the_next_view),
        cmocka_unit_test(test_member_lying_in_its_blob_is_removed),
        cmocka_unit_test(test_member_lying_in_a_ring_slot_is_removed),
        cmocka_unit_test(test_member_lying_in_its_acknowledgements_is_removed),
        cmocka_unit_test(test_member_in_shutdown_takes_part_in_a_view_change),
        cmocka_unit_test(test_layout_function_moves_a_subgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
