/*
 * spindle-demo: a local group of member processes multicasting over shared
 * memory, using only the public API. Every member sends --messages short
 * text messages in one atomic subgroup; each prints how many messages it
 * delivered and a CRC-32 digest over the delivered sequence (sender,
 * sender index, payload). Atomic multicast means the digests agree.
 *
 *   spindle-demo [--members N] [--messages M]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/spindle.h>

struct digest {
    uint64_t delivered;
    uint32_t crc;
};

/* Bitwise CRC-32 (IEEE); small and dependency-free. */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct digest *d = ctx;
    for (size_t i = 0; i < count; i++) {
        const struct spindle_message *m = &messages[i];
        d->crc = crc32_update(d->crc, &m->sender_id, sizeof m->sender_id);
        d->crc = crc32_update(d->crc, &m->sender_index, sizeof m->sender_index);
        d->crc = crc32_update(d->crc, m->data, m->length);
    }
    __atomic_add_fetch(&d->delivered, count, __ATOMIC_RELEASE);
}

static int fail(unsigned self, const char *what, int rc)
{
    fprintf(stderr, "member %u: %s failed: %s: %s\n", self, what, spindle_strerror(rc),
            spindle_errmsg());
    return 1;
}

static int run_member(const char *dir, unsigned self, unsigned members, unsigned messages,
                      int report_fd)
{
    uint32_t all[SPINDLE_MAX_MEMBERS];
    for (unsigned i = 0; i < members; i++)
        all[i] = i;
    struct spindle_subgroup_config subgroup = {
        .members = all,
        .num_members = members,
        .senders = all,
        .num_senders = members,
        .window_size = 64,
        .max_payload = 128,
        .mode = SPINDLE_MODE_ATOMIC,
    };
    struct digest digest = {0, 0};
    struct spindle_group_options options;
    spindle_group_options_init(&options);
    options.self = self;
    options.num_members = members;
    options.bootstrap = dir;
    options.deliver = on_deliver;
    options.deliver_ctx = &digest;
    spindle_group_t *group;
    int rc = spindle_group_create(&options, &subgroup, 1, &group);
    if (rc < 0)
        return fail(self, "spindle_group_create", rc);
    for (unsigned i = 0; i < messages && rc == 0; i++) {
        void *slot;
        rc = spindle_reserve(group, 0, 64, 0, &slot);
        if (rc < 0)
            break;
        int len = snprintf(slot, 64, "member %u says hello #%u", self, i);
        memset((char *)slot + len, 0, 64 - (size_t)len);
        rc = spindle_commit(group, 0);
    }
    if (rc < 0)
        return fail(self, "sending", rc);
    /* Everyone's messages: wait until all members x messages arrived. */
    uint64_t expected = (uint64_t)members * messages;
    for (int waited = 0; __atomic_load_n(&digest.delivered, __ATOMIC_ACQUIRE) < expected;
         waited++) {
        if (waited > 60000)
            return fail(self, "waiting for deliveries", SPINDLE_ETIMEDOUT);
        usleep(1000);
    }
    rc = spindle_group_shutdown(group, 30000);
    spindle_group_destroy(group);
    if (rc < 0)
        return fail(self, "spindle_group_shutdown", rc);
    printf("member %u: delivered %llu messages, digest %08x\n", self,
           (unsigned long long)digest.delivered, digest.crc);
    fflush(stdout);
    return write(report_fd, &digest, sizeof digest) == (ssize_t)sizeof digest ? 0 : 1;
}

int main(int argc, char **argv)
{
    unsigned members = 3, messages = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--members") == 0)
            members = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--messages") == 0)
            messages = (unsigned)atoi(argv[i + 1]);
    }
    if (members < 1 || members > 16 || messages < 1) {
        fprintf(stderr, "usage: spindle-demo [--members 1..16] [--messages M>=1]\n");
        return 2;
    }
    char dir[] = "/tmp/spindle-demo-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    printf("spindle demo: %u members over shared memory, %u messages each, atomic order\n", members,
           messages);
    fflush(stdout);
    pid_t pids[16];
    int fds[16][2];
    int failed = 0;
    unsigned started = 0; /* members forked; a failure stops starting more */
    for (; started < members; started++) {
        unsigned i = started;
        if (pipe(fds[i]) < 0) {
            perror("pipe");
            failed = 1;
            break;
        }
        pids[i] = fork();
        if (pids[i] < 0) {
            perror("fork");
            close(fds[i][0]);
            close(fds[i][1]);
            failed = 1;
            break;
        }
        if (pids[i] == 0)
            _exit(run_member(dir, i, members, messages, fds[i][1]));
        close(fds[i][1]);
    }
    struct digest digests[16] = {{0, 0}}; /* compared only when every read succeeded */
    for (unsigned i = 0; i < started; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed = 1;
        if (read(fds[i][0], &digests[i], sizeof digests[i]) != (ssize_t)sizeof digests[i])
            failed = 1;
        close(fds[i][0]);
    }
    for (unsigned i = 1; i < members && !failed; i++)
        if (digests[i].delivered != digests[0].delivered || digests[i].crc != digests[0].crc) {
            fprintf(stderr, "spindle demo: member %u disagrees with member 0\n", i);
            return 1;
        }
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (failed) {
        fprintf(stderr, "spindle demo: a member failed\n");
        return 1;
    }
    printf("all %u members delivered the same %llu messages in the same order (digest %08x)\n",
           members, (unsigned long long)digests[0].delivered, digests[0].crc);
    return 0;
}
