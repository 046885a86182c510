/*
 * fabric backend, connection set-up with a group key (docs/SECURITY.md):
 * members holding the key connect and write; a member holding another key,
 * or none, is refused either way; a listener holding two keys (a rotation)
 * takes either, and one whose keys are replaced while it runs
 * (tp_set_keys) takes the new ones only. A raw libfabric client sends
 * hand-made requests: a wrong MAC, no MAC, a replayed request and a second
 * live connection from the same endpoint are refused, the listener keeps accepting good ones, and
 * the accept it gets back is authenticated over its request. A listener
 * told its view's member ids (tp_set_members) refuses a key holder that
 * claims another id, and logs the id. Runs for the provider given as argv[1].
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <spindle/log.h>

#include "test_fabric_util.h"
#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"

static const char *provider = "tcp";

static const uint8_t key_a[1][TP_KEY_BYTES] = {{0x11, 0x22, 0x33}};
static const uint8_t key_b[1][TP_KEY_BYTES] = {{0x44, 0x55, 0x66}};
static const uint8_t rotating[2][TP_KEY_BYTES] = {{0x44, 0x55, 0x66}, {0x11, 0x22, 0x33}};

static void address_of(struct tp_endpoint *ep, uint16_t *port, uint64_t *nonce)
{
    struct tp_desc desc;
    assert_int_equal(tp_address(ep, &desc), 0);
    char host[FAB_HOST_MAX];
    uint32_t id;
    assert_int_equal(fab_addr_decode(&desc, host, sizeof host, port, nonce, &id), 0);
}

/* Connects from to `to` and checks that a write lands. */
static void connect_and_write(struct tp_endpoint *from, struct tp_endpoint *to)
{
    struct tp_desc addr, rdesc;
    struct tp_peer *peer = NULL;
    struct tp_mr *region = NULL, *src_mr = NULL;
    struct tp_rmr *rmr = NULL;
    void *mem, *src;
    assert_int_equal(tp_address(to, &addr), 0);
    assert_int_equal(tp_connect(from, &addr, 5000, &peer), 0);
    assert_int_equal(tp_mr_alloc(to, 4096, TP_MR_REMOTE_WRITE, &mem, &region), 0);
    assert_int_equal(tp_mr_alloc(from, 4096, 0, &src, &src_mr), 0);
    assert_int_equal(tp_mr_export(region, &rdesc), 0);
    assert_int_equal(tp_rmr_import(peer, &rdesc, &rmr), 0);
    uint64_t value = 0x5eed5eed5eed5eedull;
    memcpy(src, &value, 8);
    struct tp_write w = {src, src_mr, rmr, 64, 8};
    assert_int_equal(tp_post_writes(peer, &w, 1, 0, 0), 0);
    assert_true(tf_wait_word(to, (uint8_t *)mem + 64, value, 5000));
    tp_rmr_release(peer, rmr);
    tp_disconnect(from, peer);
    tp_mr_free(from, src_mr);
    tp_mr_free(to, region);
}

static void assert_refused(struct tp_endpoint *from, struct tp_endpoint *to)
{
    struct tp_desc addr;
    struct tp_peer *peer = NULL;
    assert_int_equal(tp_address(to, &addr), 0);
    assert_int_equal(tp_connect(from, &addr, 5000, &peer), SPINDLE_EUNREACH);
    assert_null(peer);
}

static void test_members_with_the_key_connect_and_others_are_refused(void **state)
{
    (void)state;
    struct tp_endpoint *a = NULL, *b = NULL, *other = NULL, *none = NULL;
    assert_int_equal(tf_open_keyed(provider, 1, 0, 2000, key_a, 1, &a), 0);
    assert_int_equal(tf_open_keyed(provider, 2, 0, 2000, key_a, 1, &b), 0);
    assert_int_equal(tf_open_keyed(provider, 3, 0, 2000, key_b, 1, &other), 0);
    assert_int_equal(tf_open(provider, 4, 0, 2000, &none), 0);
    connect_and_write(b, a);
    assert_refused(other, a); /* another key: its MAC does not verify */
    print_message("refused: %s\n", spindle_errmsg());
    assert_non_null(strstr(spindle_errmsg(), "127.0.0.1")); /* names the peer */
    assert_refused(none, a);                                /* no key: no MAC */
    assert_refused(a, none);  /* a keyed request to an unkeyed listener */
    assert_refused(a, other); /* nor does a's MAC verify at other */
    connect_and_write(b, a);  /* a still accepts its own */
    tp_close(none);
    tp_close(other);
    tp_close(b);
    tp_close(a);
}

/* The listener's log lines that contain `want` (its progress thread
 * writes them). */
struct log_watch {
    pthread_mutex_t lock;
    const char *want;
    int seen;
};

static void watch_log(void *ctx, enum spindle_log_level level, const char *module,
                      const char *message)
{
    (void)level;
    struct log_watch *watch = ctx;
    pthread_mutex_lock(&watch->lock);
    if (strcmp(module, "fabric") == 0 && strstr(message, watch->want) != NULL)
        watch->seen++;
    pthread_mutex_unlock(&watch->lock);
}

static void test_a_key_holder_claiming_an_id_outside_the_view_is_refused(void **state)
{
    (void)state;
    struct tp_endpoint *a = NULL, *b = NULL;
    assert_int_equal(tf_open_keyed(provider, 1, 0, 2000, key_a, 1, &a), 0);
    assert_int_equal(tf_open_keyed(provider, 7, 0, 2000, key_a, 1, &b), 0);
    const uint32_t view[] = {1, 2, 3};
    assert_int_equal(tp_set_members(a, view, 3), 0);
    struct log_watch watch = {PTHREAD_MUTEX_INITIALIZER,
                              "request claims member 7, which is not in this member's view", 0};
    spindle_log_set_sink(watch_log, &watch);
    assert_refused(b, a);
    spindle_log_set_sink(NULL, NULL);
    pthread_mutex_lock(&watch.lock);
    assert_int_equal(watch.seen, 1);
    pthread_mutex_unlock(&watch.lock);
    /* Once 7 is in the view (a joiner admitted), the same endpoint connects. */
    const uint32_t next[] = {1, 2, 3, 7};
    assert_int_equal(tp_set_members(a, next, 4), 0);
    connect_and_write(b, a);
    assert_int_equal(tp_set_members(a, NULL, 0), SPINDLE_EINVAL);
    tp_close(b);
    tp_close(a);
}

static void test_a_listener_with_two_keys_takes_either(void **state)
{
    (void)state;
    struct tp_endpoint *listener = NULL, *old_key = NULL, *new_key = NULL;
    assert_int_equal(tf_open_keyed(provider, 1, 0, 2000, rotating, 2, &listener), 0);
    assert_int_equal(tf_open_keyed(provider, 2, 0, 2000, key_a, 1, &old_key), 0);
    assert_int_equal(tf_open_keyed(provider, 3, 0, 2000, key_b, 1, &new_key), 0);
    connect_and_write(old_key, listener);
    connect_and_write(new_key, listener);
    connect_and_write(listener, new_key); /* it proves with its first key */
    assert_refused(listener, old_key);
    tp_close(new_key);
    tp_close(old_key);
    tp_close(listener);

    struct tp_endpoint *too_many = NULL;
    static const uint8_t three[3][TP_KEY_BYTES] = {{1}, {2}, {3}};
    assert_int_equal(tf_open_keyed(provider, 1, 0, 2000, three, 3, &too_many), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "3 group keys"));
}

/* A running endpoint's keys replaced in place (tp_set_keys, the rotation
 * steps of docs/SECURITY.md): given (old, new) it takes requests made with
 * either and proves with old; given (new) alone it refuses old-key
 * requests and proves with new. */
static void test_a_listener_rotates_its_keys_in_place(void **state)
{
    (void)state;
    static const uint8_t old_then_new[2][TP_KEY_BYTES] = {{0x11, 0x22, 0x33}, {0x44, 0x55, 0x66}};
    struct tp_endpoint *listener = NULL, *old_key = NULL, *new_key = NULL, *none = NULL;
    assert_int_equal(tf_open_keyed(provider, 1, 0, 2000, key_a, 1, &listener), 0);
    assert_int_equal(tf_open_keyed(provider, 2, 0, 2000, key_a, 1, &old_key), 0);
    assert_int_equal(tf_open_keyed(provider, 3, 0, 2000, key_b, 1, &new_key), 0);
    connect_and_write(old_key, listener);
    assert_refused(new_key, listener);

    assert_int_equal(tp_set_keys(listener, old_then_new, 2), 0);
    connect_and_write(new_key, listener);
    connect_and_write(old_key, listener);
    assert_refused(listener, new_key); /* it still proves with old */

    assert_int_equal(tp_set_keys(listener, key_b, 1), 0);
    connect_and_write(new_key, listener);
    assert_refused(old_key, listener);
    connect_and_write(listener, new_key); /* now it proves with new */
    assert_refused(listener, old_key);

    assert_int_equal(tp_set_keys(listener, key_a, 0), SPINDLE_EINVAL);
    static const uint8_t three[3][TP_KEY_BYTES] = {{1}, {2}, {3}};
    assert_int_equal(tp_set_keys(listener, three, 3), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "3 group keys"));
    connect_and_write(new_key, listener); /* a refused change leaves the keys */
    assert_int_equal(tf_open(provider, 4, 0, 2000, &none), 0);
    assert_int_equal(tp_set_keys(none, key_a, 1), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "without a group key"));
    tp_close(none);
    tp_close(new_key);
    tp_close(old_key);
    tp_close(listener);
}

/* A bare libfabric client: sends one connection request with the given
 * private data. */
struct raw_client {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_eq *eq;
    struct fid_cq *cq;
    struct fid_ep *ep;
};

static void raw_close(struct raw_client *c)
{
    if (c->ep != NULL)
        fi_close(&c->ep->fid);
    if (c->cq != NULL)
        fi_close(&c->cq->fid);
    if (c->eq != NULL)
        fi_close(&c->eq->fid);
    if (c->domain != NULL)
        fi_close(&c->domain->fid);
    if (c->fabric != NULL)
        fi_close(&c->fabric->fid);
    if (c->info != NULL)
        fi_freeinfo(c->info);
    memset(c, 0, sizeof *c);
}

/* 1 when the listener on port accepted the request (its accept's private
 * data in acc), 0 when it refused it. The connection stays open until
 * raw_close. */
static int raw_connect(struct raw_client *c, uint16_t port, const uint8_t req[FAB_REQ_WIRE],
                       uint8_t acc[FAB_ACC_WIRE])
{
    memset(c, 0, sizeof *c);
    struct fi_info *hints = fi_allocinfo();
    /* What the backend asks for (fabric.c fab_hints): the sockets provider
     * refuses a connection between endpoints of other attributes. */
    hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
    hints->ep_attr->type = FI_EP_MSG;
    hints->domain_attr->mr_mode =
        FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->fabric_attr->prov_name = strdup(provider);
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    assert_int_equal(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", service, 0, hints, &c->info), 0);
    fi_freeinfo(hints);
    struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE};
    assert_int_equal(fi_fabric(c->info->fabric_attr, &c->fabric, NULL), 0);
    assert_int_equal(fi_eq_open(c->fabric, &eq_attr, &c->eq, NULL), 0);
    assert_int_equal(fi_domain(c->fabric, c->info, &c->domain, NULL), 0);
    assert_int_equal(fi_cq_open(c->domain, &cq_attr, &c->cq, NULL), 0);
    assert_int_equal(fi_endpoint(c->domain, c->info, &c->ep, NULL), 0);
    assert_int_equal(fi_ep_bind(c->ep, &c->eq->fid, 0), 0);
    assert_int_equal(fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV), 0);
    assert_int_equal(fi_enable(c->ep), 0);
    assert_int_equal(fi_connect(c->ep, c->info->dest_addr, req, FAB_REQ_WIRE), 0);
    struct {
        struct fi_eq_cm_entry entry;
        uint8_t data[FAB_CM_DATA_MAX];
    } buf;
    uint32_t event = 0;
    ssize_t n = fi_eq_sread(c->eq, &event, &buf, sizeof buf, 10000, 0);
    if (n == -FI_EAVAIL) {
        struct fi_eq_err_entry err = {0};
        fi_eq_readerr(c->eq, &err, 0);
        return 0;
    }
    assert_true(n >= (ssize_t)(sizeof buf.entry + FAB_ACC_WIRE));
    assert_int_equal(event, FI_CONNECTED);
    memcpy(acc, buf.entry.data, FAB_ACC_WIRE);
    return 1;
}

/* A request from member 9 to the listener with nonce dst, sealed with the
 * fabric subkey of key unless mac_key is NULL. */
static void make_request(uint8_t wire[FAB_REQ_WIRE], uint64_t dst, uint64_t src,
                         uint64_t conn_nonce, const uint8_t *mac_key)
{
    struct fab_req_data req = {FAB_REQ_MAGIC, 9, dst, src, conn_nonce, {0}};
    fab_req_encode(&req, wire);
    if (mac_key != NULL)
        fab_req_seal(mac_key, wire);
}

static void test_forged_replayed_and_duplicate_requests_are_refused(void **state)
{
    (void)state;
    struct tp_endpoint *a = NULL, *b = NULL;
    assert_int_equal(tf_open_keyed(provider, 1, 0, 2000, key_a, 1, &a), 0);
    assert_int_equal(tf_open_keyed(provider, 2, 0, 2000, key_a, 1, &b), 0);
    uint16_t port;
    uint64_t nonce;
    address_of(a, &port, &nonce);
    /* The subkeys an endpoint derives from each key (fab_auth_init). */
    static struct fab_ep holder, wrong;
    struct tp_config keyed = {.keys = key_a, .key_count = 1};
    struct tp_config other = {.keys = key_b, .key_count = 1};
    assert_int_equal(fab_auth_init(&holder, &keyed), 0);
    assert_int_equal(fab_auth_init(&wrong, &other), 0);
    const uint8_t *subkey = holder.auth_keys[0];

    struct raw_client first, again;
    uint8_t req[FAB_REQ_WIRE], acc[FAB_ACC_WIRE];
    make_request(req, nonce, 0xabc, 1, wrong.auth_keys[0]);
    assert_int_equal(raw_connect(&again, port, req, acc), 0); /* wrong key */
    raw_close(&again);
    make_request(req, nonce, 0xabc, 2, NULL);
    assert_int_equal(raw_connect(&again, port, req, acc), 0); /* no MAC */
    raw_close(&again);
    make_request(req, nonce, 0xabc, 3, subkey);
    req[4] ^= 1; /* another member id under the same MAC */
    assert_int_equal(raw_connect(&again, port, req, acc), 0);
    raw_close(&again);

    make_request(req, nonce, 0xabc, 4, subkey);
    assert_int_equal(raw_connect(&first, port, req, acc), 1);
    assert_int_equal(fab_acc_check(subkey, req, acc), 0); /* the accept answers this request */
    uint8_t other_req[FAB_REQ_WIRE];
    make_request(other_req, nonce, 0xabc, 5, subkey);
    assert_int_equal(fab_acc_check(subkey, other_req, acc), SPINDLE_EAUTH);
    assert_int_equal(fab_acc_check(wrong.auth_keys[0], req, acc), SPINDLE_EAUTH);

    assert_int_equal(raw_connect(&again, port, req, acc), 0); /* replayed while live */
    raw_close(&again);
    assert_int_equal(raw_connect(&again, port, other_req, acc), 0); /* second live connection */
    raw_close(&again);
    raw_close(&first);
    assert_int_equal(raw_connect(&again, port, req, acc), 0); /* replayed after it closed */
    raw_close(&again);

    make_request(req, nonce, 0xdef, 6, subkey); /* a fresh one from another endpoint */
    assert_int_equal(raw_connect(&again, port, req, acc), 1);
    raw_close(&again);
    connect_and_write(b, a);
    fab_auth_clear(&holder);
    fab_auth_clear(&wrong);
    tp_close(b);
    tp_close(a);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    tf_require_provider(provider);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_with_the_key_connect_and_others_are_refused),
        cmocka_unit_test(test_a_listener_with_two_keys_takes_either),
        cmocka_unit_test(test_a_listener_rotates_its_keys_in_place),
        cmocka_unit_test(test_forged_replayed_and_duplicate_requests_are_refused),
        cmocka_unit_test(test_a_key_holder_claiming_an_id_outside_the_view_is_refused),
    };
    return cmocka_run_group_tests_name(provider, tests, NULL, NULL);
}
