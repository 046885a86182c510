/*
 * A connect that waits for its peer does not stop the predicate thread.
 * Over libfabric's tcp provider a table connects to an address where a
 * plain TCP socket listens but never accepts: the kernel completes the
 * TCP handshake and the provider then waits for a connection-manager
 * answer that never comes. While that connect waits (its timeout is a
 * minute), the engine's predicate thread must keep evaluating predicates
 * and the engine lock must be free: a membership thread connecting the
 * next view's table must not stop the heartbeats and failure reports of
 * the current one. Closing the listener then resets the connection, and
 * the connect reports that row as failed instead of failing the table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sst/sst.h"
#include "test_fabric_util.h"
#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"

struct connecting {
    struct sst_table *table;
    struct sst_member_desc descs[2];
    uint64_t failed;
    int rc;
    int done; /* atomic */
};

static void *connect_rows(void *arg)
{
    struct connecting *c = arg;
    c->rc = sst_table_connect(c->table, c->descs, 60000, &c->failed);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static bool always(void *ctx)
{
    (void)ctx;
    return true;
}

static void count(void *ctx)
{
    uint64_t *passes = ctx;
    __atomic_add_fetch(passes, 1, __ATOMIC_RELAXED);
}

/* A TCP listener on loopback that never accepts; its port in *port. */
static int silent_listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
    *port = ntohs(addr.sin_port);
    return fd;
}

static void test_predicates_run_while_a_connect_waits(void **state)
{
    (void)state;
    tf_require_provider("tcp");
    struct tp_config config = {.backend = "fabric",
                               .group_name = "connect",
                               .provider = "tcp",
                               .host = "127.0.0.1",
                               .failure_timeout_ms = 1000};
    struct sst_engine *engine = NULL;
    assert_int_equal(sst_engine_create(&config, NULL, &engine), 0);
    struct sst_schema schema;
    sst_schema_init(&schema);
    assert_true(sst_schema_add_counter(&schema) >= 0);
    struct connecting c = {0};
    assert_int_equal(sst_table_create(engine, &schema, 2, 0, &c.table), 0);
    assert_int_equal(sst_table_export(c.table, &c.descs[0]), 0);
    uint64_t passes = 0;
    assert_int_equal(sst_predicate_add(engine, always, count, &passes, SST_PRED_RECURRENT, NULL),
                     0);
    assert_int_equal(sst_engine_start(engine), 0);

    uint16_t port = 0;
    int listener = silent_listener(&port);
    assert_int_equal(fab_addr_encode("127.0.0.1", port, 42, 1, &c.descs[1].address), 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, connect_rows, &c), 0);
    /* The provider's TCP connection is queued at the listener: from here
     * on the connect waits for an answer. */
    struct pollfd pfd = {listener, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 10000), 1);

    /* Predicates keep running, and the engine lock can be taken. */
    uint64_t before = __atomic_load_n(&passes, __ATOMIC_RELAXED);
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (__atomic_load_n(&passes, __ATOMIC_RELAXED) < before + 100 && sp_now_ns() < deadline)
        sched_yield();
    assert_true(__atomic_load_n(&passes, __ATOMIC_RELAXED) >= before + 100);
    sst_engine_lock(engine);
    int waiting = !__atomic_load_n(&c.done, __ATOMIC_ACQUIRE);
    sst_engine_unlock(engine);
    assert_true(waiting);

    /* The reset ends the connect: row 1 failed, the table is usable. */
    close(listener);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(c.rc, 0);
    assert_int_equal(c.failed, 1u << 1);
    assert_true(sst_row_failed(c.table, 1));
    sst_engine_destroy(engine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predicates_run_while_a_connect_waits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
