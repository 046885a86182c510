/*
 * Shared-memory backend, what only it does (the contract itself, T1-T4 and
 * the doorbell, is tests/transport/conformance): a ring reaches a peer
 * blocked in futex(2) and counts as a wake-up, a killed peer's pidfd is
 * noticed within the failure timeout, and descriptors are checked, the
 * objects they name too (sealed memory objects of the claimed size).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "transport/shm/shm_impl.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/error.h"

#define REGION_SIZE 4096

static struct tp_endpoint *open_ep(int failure_timeout_ms)
{
    struct tp_config config = {.backend = "shm", .failure_timeout_ms = failure_timeout_ms};
    struct tp_endpoint *ep = NULL;
    assert_int_equal(tp_open(&config, &ep), 0);
    return ep;
}

/* True when process pid's main thread is blocked in futex(2). */
static bool blocked_in_futex(pid_t pid)
{
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool in_futex = fgets(line, sizeof line, f) != NULL && strncmp(line, "202 ", 4) == 0;
    fclose(f);
    return in_futex;
}

/* Child: publishes its address on a pipe, then sleeps on its doorbell and
 * reports 1 if woken, 0 on timeout, followed by the wait duration in us. */
static void test_ring_wakes_sleeping_peer(void **state)
{
    (void)state;
    int to_parent[2];
    assert_int_equal(pipe(to_parent), 0);
    pid_t child = fork();
    if (child == 0) {
        struct tp_endpoint *ep = open_ep(60000);
        struct tp_desc address;
        tp_address(ep, &address);
        uint64_t token = tp_doorbell_arm(ep);
        if (write(to_parent[1], &address, sizeof address) != sizeof address)
            _exit(2);
        int rc = tp_doorbell_wait(ep, token, 20000);
        /* A ring between arm and wait must not be lost: ring self, wait. */
        uint64_t token2 = tp_doorbell_arm(ep);
        tp_doorbell_ring_self(ep);
        uint64_t start = sp_now_ns();
        int rc2 = tp_doorbell_wait(ep, token2, 20000);
        bool immediate = rc2 == 0 && sp_now_ns() - start < 1000000000ull;
        _exit(rc == 0 && immediate ? 0 : 1);
    }
    struct tp_desc address;
    assert_int_equal(read(to_parent[0], &address, sizeof address), (ssize_t)sizeof address);
    struct tp_endpoint *ep = open_ep(60000);
    struct tp_peer *peer;
    assert_int_equal(tp_connect(ep, &address, 1000, &peer), 0);
    /* Ring only once the child is blocked in futex(2) (syscall 202 on
     * x86_64, read from /proc): a ring before it sleeps would end its wait
     * without a wake-up and prove nothing. Then one ring must wake it. */
    uint64_t start = sp_now_ns();
    while (!blocked_in_futex(child)) {
        assert_true(sp_now_ns() - start < 15ull * 1000000000ull);
        sched_yield();
    }
    struct tp_stats stats = {0};
    assert_int_equal(tp_doorbell_ring(peer), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    tp_stats(ep, &stats);
    assert_true(stats.wakeups_sent >= 1);
    tp_close(ep);
}

static void test_killed_peer_is_reported(void **state)
{
    (void)state;
    const int timeout_ms = 300;
    int to_parent[2];
    assert_int_equal(pipe(to_parent), 0);
    pid_t child = fork();
    if (child == 0) {
        struct tp_endpoint *ep = open_ep(timeout_ms);
        void *addr;
        struct tp_mr *mr;
        struct tp_desc descs[2];
        tp_mr_alloc(ep, REGION_SIZE, TP_MR_REMOTE_WRITE, &addr, &mr);
        tp_address(ep, &descs[0]);
        tp_mr_export(mr, &descs[1]);
        if (write(to_parent[1], descs, sizeof descs) != sizeof descs)
            _exit(2);
        for (;;)
            pause();
    }
    struct tp_desc descs[2];
    assert_int_equal(read(to_parent[0], descs, sizeof descs), (ssize_t)sizeof descs);
    struct tp_endpoint *ep = open_ep(timeout_ms);
    struct tp_peer *peer;
    struct tp_rmr *rmr;
    assert_int_equal(tp_connect(ep, &descs[0], 1000, &peer), 0);
    assert_int_equal(tp_rmr_import(peer, &descs[1], &rmr), 0);
    assert_int_equal(tp_peer_state(peer), 0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    uint64_t killed = sp_now_ns();
    struct tp_event event = {0};
    int got = 0;
    while (got == 0 && sp_now_ns() - killed < (uint64_t)(timeout_ms + 2000) * 1000000ull) {
        got = tp_poll(ep, &event, 1);
        if (got == 0)
            tp_doorbell_wait(ep, tp_doorbell_arm(ep), 10);
    }
    uint64_t elapsed_ms = (sp_now_ns() - killed) / 1000000ull;
    print_message("killed peer reported after %llu ms\n", (unsigned long long)elapsed_ms);
    assert_int_equal(got, 1);
    assert_int_equal(event.type, TP_EVENT_PEER_FAILED);
    assert_ptr_equal(event.peer, peer);
    assert_true(elapsed_ms <= (uint64_t)timeout_ms);
    assert_int_equal(tp_peer_state(peer), SPINDLE_EPEERFAILED);
    uint64_t word = 7;
    void *addr;
    struct tp_mr *mr;
    assert_int_equal(tp_mr_alloc(ep, REGION_SIZE, 0, &addr, &mr), 0);
    memcpy(addr, &word, sizeof word);
    struct tp_write write_one = {addr, mr, rmr, 0, 8};
    assert_int_equal(tp_post_writes(peer, &write_one, 1, 0, 0), SPINDLE_EPEERFAILED);
    assert_int_equal(tp_poll(ep, &event, 1), 0); /* reported once */
    tp_rmr_release(peer, rmr);
    tp_mr_free(ep, mr);
    tp_close(ep);
}

static void test_bad_descriptors_and_ranges_are_rejected(void **state)
{
    (void)state;
    struct tp_endpoint *ep = open_ep(1000);
    struct tp_peer *peer;
    struct tp_desc garbage = {.len = 5, .bytes = "junk"};
    assert_int_equal(tp_connect(ep, &garbage, 100, &peer), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "length 5"));

    struct tp_desc address;
    assert_int_equal(tp_address(ep, &address), 0);
    struct tp_desc wrong_magic = address;
    wrong_magic.bytes[0] ^= 0xff;
    assert_int_equal(tp_connect(ep, &wrong_magic, 100, &peer), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "magic"));

    struct tp_desc no_such_pid = address;
    int32_t pid = 0x3ffffe; /* above the default pid_max */
    memcpy(no_such_pid.bytes + 16, &pid, sizeof pid);
    assert_int_equal(tp_connect(ep, &no_such_pid, 100, &peer), SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "4194302"));

    /* Loopback connection to ourselves: writes beyond the region fail. */
    void *addr;
    struct tp_mr *mr;
    struct tp_rmr *rmr;
    struct tp_desc region;
    assert_int_equal(tp_mr_alloc(ep, REGION_SIZE, TP_MR_REMOTE_WRITE, &addr, &mr), 0);
    assert_int_equal(tp_mr_export(mr, &region), 0);
    assert_int_equal(tp_connect(ep, &address, 100, &peer), 0);
    assert_int_equal(tp_rmr_import(peer, &region, &rmr), 0);
    struct tp_write too_far = {addr, mr, rmr, REGION_SIZE - 4, 8};
    assert_int_equal(tp_post_writes(peer, &too_far, 1, 0, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "offset 4092"));
    struct tp_write fine = {addr, mr, rmr, REGION_SIZE - 8, 8};
    assert_int_equal(tp_post_writes(peer, &fine, 1, TP_POST_SIGNALED, 42), 0);
    struct tp_event event;
    assert_int_equal(tp_poll(ep, &event, 1), 1);
    assert_int_equal(event.type, TP_EVENT_WRITE_DONE);
    assert_int_equal(event.cookie, 42);
    tp_rmr_release(peer, rmr);
    tp_mr_free(ep, mr);
    tp_close(ep);
}

/* What a peer can and cannot do to the objects it maps: a region and the
 * control page are sealed (the importer cannot shrink them under their
 * owner), and an import refuses what is not one of this backend's sealed
 * objects of exactly the claimed size, naming what it found. */
static void test_objects_are_sealed_and_checked_on_import(void **state)
{
    (void)state;
    struct tp_endpoint *ep = open_ep(1000);
    struct tp_desc address, region;
    struct tp_peer *peer;
    void *addr;
    struct tp_mr *mr;
    struct tp_rmr *rmr;
    assert_int_equal(tp_address(ep, &address), 0);
    assert_int_equal(tp_connect(ep, &address, 100, &peer), 0);
    assert_int_equal(tp_mr_alloc(ep, REGION_SIZE, TP_MR_REMOTE_WRITE, &addr, &mr), 0);
    assert_int_equal(tp_mr_export(mr, &region), 0);
    assert_int_equal(tp_rmr_import(peer, &region, &rmr), 0);

    /* As a peer would open it: it cannot be shrunk or grown. */
    struct shm_wire wire;
    assert_int_equal(shm_desc_decode(&region, SHM_KIND_REGION, &wire), 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", wire.pid, wire.fd);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 0), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(ftruncate(fd, 2 * REGION_SIZE), -1);
    assert_int_equal(errno, EPERM);
    close(fd);

    /* A descriptor naming an unsealed memfd of the same process, named as
     * the endpoint's regions are... */
    char name[48];
    snprintf(name, sizeof name, "spindle-region-%016llx", (unsigned long long)wire.nonce);
    int unsealed = memfd_create(name, MFD_CLOEXEC);
    assert_true(unsealed >= 0);
    assert_int_equal(ftruncate(unsealed, REGION_SIZE), 0);
    struct shm_wire forged = wire;
    forged.fd = unsealed;
    struct tp_desc desc;
    shm_desc_encode(&forged, &desc);
    struct tp_rmr *other;
    assert_int_equal(tp_rmr_import(peer, &desc, &other), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "is not sealed"));
    close(unsealed);
    /* ...a file that is no memory object at all... */
    int file = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    assert_true(file >= 0);
    forged.fd = file;
    shm_desc_encode(&forged, &desc);
    assert_int_equal(tp_rmr_import(peer, &desc, &other), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "not the memory object spindle-region-"));
    close(file);
    /* ...a sealed region of the same size but of another endpoint (another
     * nonce in its name), claimed with the peer's nonce... */
    struct tp_endpoint *stranger = open_ep(1000);
    void *stranger_addr;
    struct tp_mr *stranger_mr;
    struct tp_desc stranger_region;
    assert_int_equal(
        tp_mr_alloc(stranger, REGION_SIZE, TP_MR_REMOTE_WRITE, &stranger_addr, &stranger_mr), 0);
    assert_int_equal(tp_mr_export(stranger_mr, &stranger_region), 0);
    struct shm_wire stranger_wire;
    assert_int_equal(shm_desc_decode(&stranger_region, SHM_KIND_REGION, &stranger_wire), 0);
    assert_int_equal(tp_rmr_import(peer, &stranger_region, &other), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "not its endpoint's"));
    forged = wire;
    forged.fd = stranger_wire.fd;
    shm_desc_encode(&forged, &desc);
    assert_int_equal(tp_rmr_import(peer, &desc, &other), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "not the memory object spindle-region-"));
    tp_mr_free(stranger, stranger_mr);
    tp_close(stranger);
    /* ...and the real region claimed larger than it is. */
    forged = wire;
    forged.length = 2 * REGION_SIZE;
    shm_desc_encode(&forged, &desc);
    assert_int_equal(tp_rmr_import(peer, &desc, &other), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "holds 4096 bytes, not the 8192"));

    tp_rmr_release(peer, rmr);
    tp_mr_free(ep, mr);
    tp_close(ep);
}

/* A peer that imported one slice of a region (its row of our table) maps
 * nothing else of it, and a post outside that slice, before it or after it
 * or straddling its end, is refused with nothing written: the owner's other
 * slices keep their bytes. */
static void test_write_outside_imported_slice_is_refused(void **state)
{
    (void)state;
    enum { SLICES = 3, SLICE = 4096 };
    struct tp_endpoint *owner = open_ep(1000), *writer = open_ep(1000);
    uint8_t *table;
    struct tp_mr *mr;
    struct tp_desc owner_address, region;
    assert_int_equal(tp_mr_alloc(owner, SLICES * SLICE, TP_MR_REMOTE_WRITE, (void **)&table, &mr),
                     0);
    memset(table, 0xee, SLICES * SLICE);
    assert_int_equal(tp_address(owner, &owner_address), 0);
    assert_int_equal(tp_mr_export(mr, &region), 0);
    struct tp_peer *peer;
    struct tp_rmr *slice;
    assert_int_equal(tp_connect(writer, &owner_address, 100, &peer), 0);
    /* Not a slice: unaligned, empty, or past the region. */
    assert_int_equal(tp_rmr_import_slice(peer, &region, 64, SLICE, &slice), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "at offset 64"));
    assert_int_equal(tp_rmr_import_slice(peer, &region, SLICE, 0, &slice), SPINDLE_EINVAL);
    assert_int_equal(tp_rmr_import_slice(peer, &region, 3 * SLICE, SLICE, &slice), SPINDLE_EINVAL);
    assert_int_equal(tp_rmr_import_slice(peer, &region, SLICE, SLICE, &slice), 0);

    uint8_t source[2 * SLICE];
    memset(source, 0x5a, sizeof source);
    void *source_mr_addr;
    struct tp_mr *source_mr;
    assert_int_equal(tp_mr_alloc(writer, sizeof source, 0, &source_mr_addr, &source_mr), 0);
    memcpy(source_mr_addr, source, sizeof source);
    const struct tp_write outside[] = {
        {source_mr_addr, source_mr, slice, 0, 8},              /* the slice before */
        {source_mr_addr, source_mr, slice, SLICE - 8, 16},     /* straddles its start */
        {source_mr_addr, source_mr, slice, 2 * SLICE - 8, 16}, /* straddles its end */
        {source_mr_addr, source_mr, slice, 2 * SLICE, 8},      /* the slice after */
        {source_mr_addr, source_mr, slice, UINT64_MAX - 3, 8}, /* wraps around */
    };
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        /* A good write first in the batch: nothing of a refused batch lands. */
        struct tp_write batch[2] = {{source_mr_addr, source_mr, slice, SLICE, 8}, outside[i]};
        assert_int_equal(tp_post_writes(peer, batch, 2, 0, 0), SPINDLE_EINVAL);
        assert_non_null(strstr(spindle_errmsg(), "outside the slice [4096, 8192)"));
    }
    for (size_t i = 0; i < SLICES * SLICE; i++)
        assert_int_equal(table[i], 0xee);
    /* The whole slice, and nothing more, is ours to write. */
    struct tp_write whole = {source_mr_addr, source_mr, slice, SLICE, SLICE};
    assert_int_equal(tp_post_writes(peer, &whole, 1, 0, 0), 0);
    for (size_t i = 0; i < SLICES * SLICE; i++)
        assert_int_equal(table[i], i >= SLICE && i < 2 * SLICE ? 0x5a : 0xee);
    /* The writer maps only the slice's pages of the object: beside the
     * owner's mapping of all of it, one of one page from offset SLICE. */
    struct shm_wire wire;
    assert_int_equal(shm_desc_decode(&region, SHM_KIND_REGION, &wire), 0);
    char name[64];
    snprintf(name, sizeof name, "memfd:spindle-region-%016llx", (unsigned long long)wire.nonce);
    char maps_line[512];
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    unsigned whole_maps = 0, slice_maps = 0;
    while (fgets(maps_line, sizeof maps_line, maps) != NULL) {
        unsigned long start, end, offset;
        if (strstr(maps_line, name) == NULL ||
            sscanf(maps_line, "%lx-%lx %*s %lx", &start, &end, &offset) != 3)
            continue;
        if (end - start == SLICES * SLICE && offset == 0)
            whole_maps++;
        else if (end - start == SLICE && offset == SLICE)
            slice_maps++;
        else
            fail_msg("unexpected mapping of the region: %s", maps_line);
    }
    fclose(maps);
    assert_int_equal(whole_maps, 1);
    assert_int_equal(slice_maps, 1);

    tp_rmr_release(peer, slice);
    tp_mr_free(writer, source_mr);
    tp_disconnect(writer, peer);
    tp_mr_free(owner, mr);
    tp_close(writer);
    tp_close(owner);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_wakes_sleeping_peer),
        cmocka_unit_test(test_killed_peer_is_reported),
        cmocka_unit_test(test_bad_descriptors_and_ranges_are_rejected),
        cmocka_unit_test(test_objects_are_sealed_and_checked_on_import),
        cmocka_unit_test(test_write_outside_imported_slice_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
