/*
 * A member of a three-member group, built against an installed libspindle
 * as a user builds a program (the installed headers and
 * `pkg-config --cflags --libs libspindle`, nothing of the source tree),
 * started three times by `spindle-run -n 3` and driven by
 * three_members.sh, which also looks at it with spindle-stat and has
 * member 2 removed with spindle-ctl.
 *
 * What it does with the library, each checked:
 *   - its own log sink (spindle_log_set_sink) at level info: every line
 *     goes to standard output as "sink: <level> <module>: <message>";
 *   - its own event loop: dispatch mode, spindle_group_fd() in an epoll
 *     set, spindle_dispatch() when it is readable;
 *   - member 0 multicasts REQUESTS requests; member 1 answers each from
 *     inside the delivery upcall that delivers it (a multicast reply, kept
 *     for send_ready when the window is full); every member delivers every
 *     request and reply, each reply after its request;
 *   - member 0 asks member 1 with a point-to-point query how many replies
 *     it sent, and member 1 answers from inside its p2p upcall (dispatched
 *     from its loop like the deliveries): REQUESTS, since member 0 has
 *     delivered them all;
 *   - it writes <work>/ready-<id> and waits: members 0 and 1 for the view
 *     without member 2, in which member 0 multicasts once more and both
 *     deliver it before they shut down; member 2 for its removal
 *     (SPINDLE_EREMOVED).
 * Exit 0 when all of that happened, 1 naming what did not.
 *
 * Usage: three_members GROUP_NAME ADMIN_DIR WORK_DIR   (under spindle-run)
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#define REQUESTS   10
#define REMOVED    2u    /* the member spindle-ctl removes */
#define TIMEOUT_MS 60000 /* for each wait */

struct member {
    spindle_group_t *group;
    uint32_t self;
    bool request_seen[REQUESTS];
    unsigned requests, replies, after_view;
    unsigned replies_sent, queries_answered;
    unsigned replies_pending; /* replies the window had no room for */
    unsigned next_pending;
    int mistakes;
    char mistake[256];
    uint64_t view_id;
    uint32_t view_members;
    bool removed_seen; /* a view reported member REMOVED as left */
};

static unsigned long sink_lines;

static void on_log(void *ctx, enum spindle_log_level level, const char *module, const char *message)
{
    (void)ctx;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    printf("sink: %s %s: %s\n", level <= SPINDLE_LOG_DEBUG ? names[level] : "?", module, message);
    fflush(stdout);
    sink_lines++; /* the sink is never called concurrently with itself */
}

static void mistake(struct member *m, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    if (m->mistakes++ == 0)
        vsnprintf(m->mistake, sizeof m->mistake, fmt, args);
    va_end(args);
}

/* Sends the reply to request number; false when the window is full. */
static bool send_reply(struct member *m, unsigned number)
{
    char text[32];
    int length = snprintf(text, sizeof text, "reply %u", number);
    int rc = spindle_send(m->group, 0, text, (size_t)length, 0);
    if (rc == SPINDLE_EAGAIN)
        return false;
    if (rc != 0)
        mistake(m, "reply %u from the delivery upcall: %s", number, spindle_errmsg());
    else
        m->replies_sent++;
    return true;
}

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct member *m = ctx;
    for (size_t i = 0; i < count; i++) {
        char text[64];
        size_t length = messages[i].length < sizeof text - 1 ? messages[i].length : sizeof text - 1;
        memcpy(text, messages[i].data, length);
        text[length] = '\0';
        unsigned number;
        if (sscanf(text, "request %u", &number) == 1 && number < REQUESTS) {
            m->request_seen[number] = true;
            m->requests++;
            /* The reply, sent from inside the upcall that delivers the request. */
            if (m->self == 1 && (m->replies_pending > 0 || !send_reply(m, number)))
                m->replies_pending++;
        } else if (sscanf(text, "reply %u", &number) == 1 && number < REQUESTS) {
            if (!m->request_seen[number])
                mistake(m, "reply %u delivered before its request", number);
            m->replies++;
        } else if (strcmp(text, "after the removal") == 0) {
            if (messages[i].view_id != m->view_id || m->view_members != 2)
                mistake(m,
                        "the message after the removal came in view %llu, not in the view "
                        "of two",
                        (unsigned long long)messages[i].view_id);
            m->after_view++;
        } else {
            mistake(m, "delivered an unknown message '%s'", text);
        }
    }
}

/* The window has room again: the replies the upcalls had to keep, in order. */
static void on_send_ready(void *ctx, uint32_t subgroup)
{
    struct member *m = ctx;
    (void)subgroup;
    unsigned first = m->requests - m->replies_pending;
    while (m->replies_pending > 0 && send_reply(m, first))
        first++, m->replies_pending--;
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct member *m = ctx;
    m->view_id = view->view_id;
    m->view_members = view->num_members;
    for (uint32_t i = 0; i < view->num_left; i++)
        if (view->left[i] == REMOVED)
            m->removed_seen = true;
}

static long long now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/*
 * The event loop: dispatches what the group's descriptor says is queued
 * until done(m) holds. Returns 0, the error that stopped the member (e.g.
 * SPINDLE_EREMOVED: the descriptor becomes readable at the stop itself,
 * so no timer is needed to notice it), or SPINDLE_ETIMEDOUT naming what.
 */
static int loop_until(struct member *m, int epoll, bool (*done)(const struct member *),
                      const char *what)
{
    long long deadline = now_ms() + TIMEOUT_MS;
    while (!done(m)) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "member %u: no %s within %d ms\n", m->self, what, TIMEOUT_MS);
            return SPINDLE_ETIMEDOUT;
        }
        struct epoll_event event;
        int ready = epoll_wait(epoll, &event, 1, (int)left);
        if (ready < 0 && errno != EINTR) {
            perror("epoll_wait");
            return SPINDLE_EIO;
        }
        if (ready > 0) {
            int ran = spindle_dispatch(m->group, SPINDLE_DISPATCH_ALL);
            if (ran < 0)
                return ran;
        }
    }
    return 0;
}

static bool round_done(const struct member *m)
{
    return m->requests == REQUESTS && m->replies == REQUESTS;
}

static bool removal_seen(const struct member *m)
{
    return m->removed_seen;
}

static bool after_delivered(const struct member *m)
{
    return m->after_view == 1;
}

/* Member 1's point-to-point upcall: answers a query with the number of
 * replies it sent, from inside the upcall. */
static void on_p2p(void *ctx, const struct spindle_p2p_message *message)
{
    struct member *m = ctx;
    if (message->query_id == 0) {
        mistake(m, "a one-way point-to-point message from member %u", message->sender_id);
        return;
    }
    char text[32];
    int length = snprintf(text, sizeof text, "replies sent %u", m->replies_sent);
    if (spindle_p2p_reply(m->group, message, text, (size_t)length, 0) != 0)
        mistake(m, "p2p reply to member %u: %s", message->sender_id, spindle_errmsg());
    else
        m->queries_answered++;
}

/* Member 0 asks member 1 directly, not through the multicast; its thread
 * waits for the reply, which does not go through its dispatch queue. */
static int point_to_point_query(struct member *m)
{
    if (m->self != 0)
        return 0;
    static const char question[] = "how many replies did you send?";
    char reply[SPINDLE_P2P_MAX_PAYLOAD + 1];
    size_t length = 0;
    int rc = spindle_p2p_query(m->group, 1, question, sizeof question - 1, reply,
                               SPINDLE_P2P_MAX_PAYLOAD, &length, TIMEOUT_MS);
    if (rc != 0) {
        fprintf(stderr, "member 0: point-to-point query to member 1: %s\n", spindle_errmsg());
        return 1;
    }
    reply[length] = '\0';
    unsigned sent = 0;
    if (sscanf(reply, "replies sent %u", &sent) != 1 || sent != REQUESTS) {
        fprintf(stderr, "member 0: member 1 answered '%s', not %u replies\n", reply, REQUESTS);
        return 1;
    }
    printf("member 0: member 1 answered the point-to-point query: %s\n", reply);
    return 0;
}

static int mark_ready(const char *work, uint32_t self)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ready-%u", work, self);
    FILE *file = fopen(path, "w");
    if (file == NULL || fclose(file) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static int run(struct member *m, int epoll, const char *work)
{
    if (m->self == 0)
        for (unsigned i = 0; i < REQUESTS; i++) {
            char text[32];
            int length = snprintf(text, sizeof text, "request %u", i);
            /* Outside any upcall a send waits for room in the window. */
            if (spindle_send(m->group, 0, text, (size_t)length, 0) != 0) {
                fprintf(stderr, "member 0: request %u: %s\n", i, spindle_errmsg());
                return 1;
            }
        }
    int rc = loop_until(m, epoll, round_done, "request/reply round");
    if (rc == 0)
        rc = point_to_point_query(m);
    if (rc != 0 || mark_ready(work, m->self) != 0)
        return 1;
    printf("member %u: delivered %u requests and %u replies\n", m->self, m->requests, m->replies);

    if (m->self == REMOVED) {
        rc = loop_until(m, epoll, removal_seen, "removal");
        if (rc != SPINDLE_EREMOVED) {
            fprintf(stderr, "member %u: expected to be removed, got %d (%s)\n", m->self, rc,
                    rc < 0 ? spindle_errmsg() : "no error");
            return 1;
        }
        printf("member %u: removed (%s)\n", m->self, spindle_errmsg());
        return 0;
    }
    rc = loop_until(m, epoll, removal_seen, "view without member 2");
    if (rc == 0 && m->self == 0 &&
        spindle_send(m->group, 0, "after the removal", strlen("after the removal"), 0) != 0)
        rc = -1;
    if (rc == 0)
        rc = loop_until(m, epoll, after_delivered, "message after the removal");
    if (rc != 0) {
        fprintf(stderr, "member %u: after the removal: %s\n", m->self, spindle_errmsg());
        return 1;
    }
    printf("member %u: view %llu of %u members without member %u\n", m->self,
           (unsigned long long)m->view_id, m->view_members, REMOVED);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s GROUP_NAME ADMIN_DIR WORK_DIR (under spindle-run -n 3)\n",
                argv[0]);
        return 2;
    }
    /* Before anything logs: no line of the library reaches stderr. */
    spindle_log_set_sink(on_log, NULL);
    spindle_log_set_level(SPINDLE_LOG_INFO);

    struct spindle_group_setup setup;
    if (spindle_group_setup_from_env(NULL, &setup) != 0) {
        fprintf(stderr, "setup from spindle-run's environment: %s\n", spindle_errmsg());
        return 1;
    }
    static struct member m;
    m.self = setup.options.self;
    struct spindle_group_options *o = &setup.options;
    o->group_name = argv[1];
    o->admin_dir = argv[2];
    o->tolerate_failures = true;
    o->dispatch = true;
    o->deliver = on_deliver;
    o->deliver_ctx = &m;
    o->view_changed = on_view;
    o->view_ctx = &m;
    o->send_ready = on_send_ready;
    o->send_ready_ctx = &m;
    o->p2p_deliver = on_p2p;
    o->p2p_ctx = &m;
    int rc = spindle_group_create(o, setup.subgroups, setup.num_subgroups, &m.group);
    spindle_group_setup_free(&setup);
    if (rc != 0) {
        fprintf(stderr, "member %u: spindle_group_create: %s\n", m.self, spindle_errmsg());
        return 1;
    }

    int epoll = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN};
    if (epoll < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, spindle_group_fd(m.group), &event) != 0) {
        perror("epoll");
        return 1;
    }
    int failed = run(&m, epoll, argv[3]);
    if (failed == 0 && m.self != REMOVED) {
        /* Collective among the two that stay; in dispatch mode nothing of
         * theirs is queued any more, so it waits for nobody's dispatch. */
        if (spindle_group_shutdown(m.group, 10000) != 0) {
            fprintf(stderr, "member %u: shutdown: %s\n", m.self, spindle_errmsg());
            failed = 1;
        }
    }
    epoll_ctl(epoll, EPOLL_CTL_DEL, spindle_group_fd(m.group), NULL);
    close(epoll);
    spindle_group_destroy(m.group);
    if (m.mistakes > 0) {
        fprintf(stderr, "member %u: %d mistakes, the first: %s\n", m.self, m.mistakes, m.mistake);
        failed = 1;
    }
    if (m.self == 1 && m.queries_answered != 1) {
        fprintf(stderr, "member 1: answered %u point-to-point queries, not 1\n",
                m.queries_answered);
        failed = 1;
    }
    if (sink_lines == 0) {
        fprintf(stderr, "member %u: the log sink received no line\n", m.self);
        failed = 1;
    }
    printf("member %u: %s, %lu log lines through the sink\n", m.self, failed ? "FAILED" : "ok",
           sink_lines);
    return failed;
}
