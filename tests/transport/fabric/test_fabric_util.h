/*
 * Helpers shared by the fabric backend tests: opening an endpoint on
 * loopback, exchanging descriptors between forked processes through pipes,
 * and checking that the providers the tests need are present (a missing
 * provider fails the test loudly instead of skipping it).
 */
#ifndef TEST_FABRIC_UTIL_H
#define TEST_FABRIC_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include <spindle/error.h>

#include "transport/transport.h"
#include "util/clock.h"

/* Two ThreadSanitizer reports come from inside libfabric 1.17 itself, in
 * uninstrumented code we do not own: the sockets provider closes
 * descriptors its progress thread is still polling (fi_close vs.
 * epoll_ctl), and the library's destructor unlocks a global mutex it has
 * already destroyed. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "called_from_lib:libfabric.so.1\nmutex:_dl_call_fini\n";
}

static inline void tf_require_provider(const char *provider)
{
    struct fi_info *hints = fi_allocinfo(), *info = NULL;
    hints->ep_attr->type = FI_EP_MSG;
    hints->caps = FI_RMA | FI_MSG;
    hints->fabric_attr->prov_name = strdup(provider);
    int rc = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &info);
    fi_freeinfo(hints);
    if (rc != 0 || info == NULL) {
        fprintf(stderr,
                "FATAL: libfabric provider '%s' is not available in this build "
                "(check `fi_info -l`); the fabric tests require it\n",
                provider);
        exit(1);
    }
    fi_freeinfo(info);
}

/* Opens a fabric endpoint on loopback with key_count group keys
 * (docs/SECURITY.md; 0: none); port 0 is ephemeral. */
static inline int tf_open_keyed(const char *provider, uint32_t id, uint16_t port, int fail_ms,
                                const uint8_t (*keys)[TP_KEY_BYTES], uint32_t key_count,
                                struct tp_endpoint **out)
{
    struct tp_config cfg = {.backend = "fabric",
                            .group_name = "test",
                            .self_id = id,
                            .provider = provider,
                            .host = "127.0.0.1",
                            .port = port,
                            .failure_timeout_ms = fail_ms,
                            .keys = keys,
                            .key_count = key_count};
    return tp_open(&cfg, out);
}

static inline int tf_open(const char *provider, uint32_t id, uint16_t port, int fail_ms,
                          struct tp_endpoint **out)
{
    return tf_open_keyed(provider, id, port, fail_ms, NULL, 0, out);
}

/* Waits (at most ms) until the aligned 8-byte word at addr, written by
 * peers into ep's memory, reads value: 1, or 0 on timeout. */
static inline int tf_wait_word(struct tp_endpoint *ep, const void *addr, uint64_t value, int ms)
{
    const uint64_t *word = (const uint64_t *)addr;
    uint64_t deadline = sp_now_ns() + (uint64_t)ms * 1000000ull;
    while (sp_now_ns() < deadline) {
        uint64_t token = tp_doorbell_arm(ep);
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) == value)
            return 1;
        tp_doorbell_wait(ep, token, 50);
    }
    return __atomic_load_n(word, __ATOMIC_ACQUIRE) == value;
}

static inline int tf_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static inline int tf_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

#endif
