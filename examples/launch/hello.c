/*
 * spindle-hello: one member of a group its launcher started, using only
 * the public API. Everything about the group comes from the launcher's
 * environment (spindle_group_setup_from_env) and, when given, a
 * configuration file for the rest:
 *
 *   spindle-run -n 3 spindle-hello [--messages M] [--config FILE]
 *   srun -n 8 spindle-hello
 *
 * Every sender of the first subgroup sends M messages in it; each of its
 * members checks that it delivered every sender's M messages, in the order
 * they were sent, prints one line and exits 0, or names what went wrong and
 * exits 1.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spindle/spindle.h>

struct tally {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t delivered;
    uint64_t next_index[SPINDLE_MAX_MEMBERS]; /* per sender: the index expected next */
    int out_of_order;                         /* a sender's message came early or twice */
};

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct tally *t = ctx;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < count; i++) {
        const struct spindle_message *m = &messages[i];
        if (m->subgroup != 0)
            continue;
        if (m->sender_id >= SPINDLE_MAX_MEMBERS || m->sender_index != t->next_index[m->sender_id])
            t->out_of_order = 1;
        else
            t->next_index[m->sender_id]++;
        t->delivered++;
    }
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
}

static int fail(uint32_t self, const char *what, int rc)
{
    fprintf(stderr, "member %u: %s: %s: %s\n", self, what, spindle_strerror(rc), spindle_errmsg());
    return 1;
}

/* Waits until expected messages arrived, at most 60 s. 0 or SPINDLE_ETIMEDOUT. */
static int wait_for(struct tally *t, uint64_t expected)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    while (t->delivered < expected && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&t->changed, &t->lock, &deadline);
    int done = t->delivered >= expected;
    pthread_mutex_unlock(&t->lock);
    return done ? 0 : SPINDLE_ETIMEDOUT;
}

static int send_all(spindle_group_t *group, uint32_t self, uint32_t messages, uint32_t max_payload)
{
    for (uint32_t i = 0; i < messages; i++) {
        void *slot;
        char text[64];
        int len = snprintf(text, sizeof text, "member %u says hello #%u", self, i);
        uint32_t size = (uint32_t)len < max_payload ? (uint32_t)len : max_payload;
        int rc = spindle_reserve(group, 0, size, 0, &slot);
        if (rc < 0)
            return rc;
        memcpy(slot, text, size);
        rc = spindle_commit(group, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int run(struct spindle_group_setup *setup, uint32_t messages)
{
    static struct tally tally = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
    uint32_t self = setup->options.self;
    const struct spindle_subgroup_config *sub = &setup->subgroups[0];
    int sender = 0, member = 0;
    for (uint32_t i = 0; i < sub->num_senders; i++)
        sender |= sub->senders[i] == self;
    for (uint32_t i = 0; i < sub->num_members; i++)
        member |= sub->members[i] == self;
    setup->options.deliver = on_deliver;
    setup->options.deliver_ctx = &tally;
    spindle_group_t *group;
    int rc = spindle_group_create(&setup->options, setup->subgroups, setup->num_subgroups, &group);
    if (rc < 0)
        return fail(self, "spindle_group_create", rc);
    rc = sender ? send_all(group, self, messages, sub->max_payload) : 0;
    if (rc < 0) {
        spindle_group_destroy(group);
        return fail(self, "sending", rc);
    }
    uint64_t expected = member ? (uint64_t)sub->num_senders * messages : 0;
    rc = wait_for(&tally, expected);
    int shutdown_rc = spindle_group_shutdown(group, 30000);
    spindle_group_destroy(group);
    if (rc < 0)
        return fail(self, "waiting for every member's messages", rc);
    if (shutdown_rc < 0)
        return fail(self, "spindle_group_shutdown", shutdown_rc);
    pthread_mutex_lock(&tally.lock);
    int ok = !tally.out_of_order && tally.delivered == expected;
    uint64_t delivered = tally.delivered;
    pthread_mutex_unlock(&tally.lock);
    if (!ok) {
        fprintf(stderr, "member %u: delivered %llu messages, want %llu in each sender's order\n",
                self, (unsigned long long)delivered, (unsigned long long)expected);
        return 1;
    }
    if (member)
        printf("member %u of %u: delivered all %llu messages of %u senders\n", self,
               setup->options.num_members, (unsigned long long)delivered, sub->num_senders);
    else
        printf("member %u of %u: not a member of subgroup 0\n", self, setup->options.num_members);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: spindle-hello [--messages 1..1000000] [--config FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    unsigned long messages = 10;
    const char *config_path = NULL;
    for (int i = 1; i < argc; i += 2) {
        char *end = NULL;
        if (i + 1 < argc && strcmp(argv[i], "--messages") == 0)
            messages = strtoul(argv[i + 1], &end, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--config") == 0)
            config_path = argv[i + 1];
        else
            return usage();
        if (end != NULL && (*end != '\0' || messages < 1 || messages > 1000000))
            return usage();
    }
    struct spindle_config *config = NULL;
    if (config_path != NULL && spindle_config_load(config_path, &config) != 0) {
        fprintf(stderr, "spindle-hello: %s\n", spindle_errmsg());
        return 2;
    }
    struct spindle_group_setup setup;
    int rc = spindle_group_setup_from_env(config, &setup);
    spindle_config_free(config); /* the setup keeps its own copies */
    if (rc != 0) {
        fprintf(stderr, "spindle-hello: %s\n", spindle_errmsg());
        return 2;
    }
    rc = run(&setup, (uint32_t)messages);
    spindle_group_setup_free(&setup);
    return rc;
}
