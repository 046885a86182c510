/*
 * Test helper: loopback TCP ports that no other test can be handed.
 *
 * Ports come in blocks of TEST_PORT_BLOCK below the kernel's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range), so no outgoing connection takes
 * one as its source port. A process reserves a block with flock(2) on
 * ${TMPDIR:-/tmp}/spindle-test-ports/<first port of the block>, held until
 * it exits: two concurrent tests never share a block. tests/test_ports.py
 * and tests/test_ports.sh reserve blocks through the same files, so C,
 * Python and shell tests running side by side (ctest -j) do not meet either.
 *
 * A process hands out the ports of its block in order and reserves a
 * further block when one runs out; a forked child reserves its own. A
 * block whose ports are not all free (something outside the tests listens
 * there) is passed over. Not thread-safe: call from one thread at a time.
 * Failure (no free block, no lock directory) aborts the test with a message.
 */
#ifndef SPINDLE_TEST_PORTS_H
#define SPINDLE_TEST_PORTS_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_PORT_BLOCK 32u
#define TEST_PORT_LOW   20480u /* the lowest block: above SPINDLE_SETUP_DEFAULT_BASE_PORT */

/* The first ephemeral port; 32768 (Linux's default) when unknown or when the
 * range leaves no room below it. */
static inline unsigned test_ports_ephemeral_low(void)
{
    unsigned low = 0, high = 0;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f != NULL) {
        if (fscanf(f, "%u %u", &low, &high) != 2)
            low = 0;
        fclose(f);
    }
    return low >= TEST_PORT_LOW + 4 * TEST_PORT_BLOCK ? low : 32768u;
}

/* Whether nothing listens on (or is bound to) any port of base..base+count-1. */
static inline int test_ports_bindable(unsigned base, unsigned count)
{
    for (unsigned port = base; port < base + count; port++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int one = 1; /* as the library's listeners: TIME_WAIT leftovers are no obstacle */
        int ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
                 bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0;
        if (fd >= 0)
            close(fd);
        if (!ok)
            return 0;
    }
    return 1;
}

/* Reserves a free block for this process (the lock stays held: its
 * descriptor is never closed) and returns its first port. */
static inline unsigned test_ports_reserve_block(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/spindle-test-ports", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdir(dir, 01777) != 0 && errno != EEXIST) {
        fprintf(stderr, "test_ports: cannot create %s: %s\n", dir, strerror(errno));
        abort();
    }
    unsigned blocks = (test_ports_ephemeral_low() - TEST_PORT_LOW) / TEST_PORT_BLOCK;
    unsigned start = (unsigned)getpid() % blocks; /* concurrent tests start apart */
    for (unsigned i = 0; i < blocks; i++) {
        unsigned base = TEST_PORT_LOW + ((start + i) % blocks) * TEST_PORT_BLOCK;
        snprintf(path, sizeof path, "%s/%u", dir, base);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && test_ports_bindable(base, TEST_PORT_BLOCK))
            return base; /* fd stays open: the block is ours until we exit */
        close(fd);
    }
    fprintf(stderr, "test_ports: no free block of %u ports in %u..%u (locks in %s)\n",
            TEST_PORT_BLOCK, TEST_PORT_LOW, test_ports_ephemeral_low() - 1, dir);
    abort();
}

/* The first of count (1..TEST_PORT_BLOCK) consecutive ports reserved for
 * this process and not handed out before. */
static inline uint16_t test_port_run(unsigned count)
{
    static pid_t owner;
    static unsigned next, end;
    if (count == 0 || count > TEST_PORT_BLOCK) {
        fprintf(stderr, "test_ports: %u consecutive ports asked, at most %u\n", count,
                TEST_PORT_BLOCK);
        abort();
    }
    if (owner != getpid() || next + count > end) {
        owner = getpid();
        next = test_ports_reserve_block();
        end = next + TEST_PORT_BLOCK;
    }
    unsigned port = next;
    next += count;
    return (uint16_t)port;
}

/* A loopback port reserved for this process and not handed out before. */
static inline uint16_t test_free_port(void)
{
    return test_port_run(1);
}

#endif
