/*
 * libfabric backend: endpoint setup, regions, connections and the ops table.
 *
 * Why writes never land directly in the memory readers poll (T1/T2):
 * socket-based providers (tcp, sockets, net) recv() a write's payload into
 * the target buffer in pieces, so a reader polling that buffer can see a torn
 * 8-byte word, and a guard in the same write can appear before its data.
 * This backend therefore never exposes a region as an RMA target. Every
 * write is copied, behind a record header, into a per-connection staging
 * ring and posted, with the records of its batch that lie back to back, as
 * one RMA write with remote CQ data into the same position of a per-writer
 * landing ring at the target. The target's FI_REMOTE_CQ_DATA completion is
 * generated only after the whole write has arrived; the progress thread
 * then copies the payload into the real region with aligned 8-byte release
 * stores (T1: each aligned word is one store), and it applies records in
 * ring order, which is posting order (T2: a guard is a later write, so it is
 * a later record and is stored after the data it guards). A record that
 * arrives out of ring order is a provider ordering violation and fails the
 * connection rather than being applied.
 *
 * Flow control: the landing ring is the credit pool. A writer may have at
 * most FAB_RING_SIZE bytes of records outstanding; the target reports the
 * ring position it has applied with a small message (at once when a quarter
 * ring is due, else from its 10 ms timer), so memory stays bounded
 * when a peer goes silent, and a peer that holds credits longer than
 * failure_timeout_ms is declared failed (T4).
 *
 * Connections are unidirectional for data: connect() creates an outgoing
 * libfabric endpoint to the peer's passive endpoint; the peer's progress
 * thread accepts it as an incoming connection with its own landing ring.
 * Two members that write to each other each connect once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/wire.h"

#define FAB_FI_VERSION FI_VERSION(1, 17)
#define FAB_MR_MODES                                                                               \
    (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT)

/* ---- address descriptor ------------------------------------------------ */

/* Layout (FAB_ADDR_WIRE bytes, then the host), little-endian through the
 * wire codec (util/wire.h): u32 magic, u8 version, u8 host length, u16
 * port, u32 member id, u64 nonce, host bytes (no NUL). */
int fab_addr_encode(const char *host, uint16_t port, uint64_t nonce, uint32_t id,
                    struct tp_desc *out)
{
    size_t host_len = strlen(host);
    if (host_len == 0 || host_len >= FAB_HOST_MAX || FAB_ADDR_WIRE + host_len > TP_DESC_MAX)
        return sp_error(SPINDLE_EINVAL, "fabric: host name '%s' is empty or too long", host);
    struct wire_writer w;
    wire_writer_init(&w, out->bytes, sizeof out->bytes);
    wire_put_u32(&w, FAB_ADDR_MAGIC);
    wire_put_u8(&w, 1);
    wire_put_u8(&w, (uint8_t)host_len);
    wire_put_u16(&w, port);
    wire_put_u32(&w, id);
    wire_put_u64(&w, nonce);
    wire_put_bytes(&w, host, host_len);
    out->len = (uint32_t)w.pos;
    return 0;
}

int fab_addr_decode(const struct tp_desc *desc, char *host, size_t host_len, uint16_t *port,
                    uint64_t *nonce, uint32_t *id)
{
    if (desc->len < FAB_ADDR_WIRE || desc->len > TP_DESC_MAX)
        return sp_error(SPINDLE_EINVAL, "fabric: address descriptor of %u bytes is malformed",
                        desc->len);
    struct wire_reader r;
    wire_reader_init(&r, desc->bytes, desc->len, "fabric address descriptor");
    uint32_t magic = wire_get_u32(&r, "magic");
    uint8_t version = wire_get_u8(&r, "version");
    uint8_t name_len = wire_get_u8(&r, "host length");
    uint16_t wire_port = wire_get_u16(&r, "port");
    uint32_t wire_id = wire_get_u32(&r, "member id");
    uint64_t wire_nonce = wire_get_u64(&r, "nonce");
    if (magic != FAB_ADDR_MAGIC || version != 1 || name_len == 0 ||
        FAB_ADDR_WIRE + name_len != desc->len || name_len >= host_len)
        return sp_error(SPINDLE_EINVAL, "fabric: address descriptor is not a fabric address");
    /* A NUL would cut the host short of host_len (and re-encode shorter). */
    const uint8_t *nul = memchr(desc->bytes + FAB_ADDR_WIRE, '\0', name_len);
    if (nul != NULL)
        return sp_error(SPINDLE_EPROTO,
                        "fabric: address descriptor: host of %u bytes holds a NUL byte at "
                        "offset %zu",
                        name_len, (size_t)(nul - desc->bytes));
    memcpy(host, desc->bytes + FAB_ADDR_WIRE, name_len);
    host[name_len] = '\0';
    *port = wire_port;
    *nonce = wire_nonce;
    *id = wire_id;
    return 0;
}

/* ---- endpoint setup ---------------------------------------------------- */

static struct fi_info *fab_hints(const char *provider)
{
    struct fi_info *hints = fi_allocinfo();
    if (hints == NULL)
        return NULL;
    hints->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
    hints->ep_attr->type = FI_EP_MSG;
    hints->domain_attr->mr_mode = FAB_MR_MODES;
    hints->domain_attr->threading = FI_THREAD_SAFE;
    if (provider != NULL) {
        hints->fabric_attr->prov_name = strdup(provider);
        if (hints->fabric_attr->prov_name == NULL) {
            fi_freeinfo(hints);
            return NULL;
        }
    }
    return hints;
}

/* Names every provider fi_getinfo offers for our capabilities. */
static void fab_list_providers(char *out, size_t len)
{
    out[0] = '\0';
    struct fi_info *hints = fab_hints(NULL), *all = NULL;
    if (hints == NULL || fi_getinfo(FAB_FI_VERSION, NULL, NULL, 0, hints, &all) != 0 ||
        all == NULL) {
        snprintf(out, len, "none");
        fi_freeinfo(hints);
        return;
    }
    for (struct fi_info *i = all; i != NULL; i = i->next) {
        const char *name = i->fabric_attr->prov_name;
        if (strstr(out, name) != NULL)
            continue;
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s", used ? ", " : "", name);
    }
    fi_freeinfo(all);
    fi_freeinfo(hints);
}

static int fab_getinfo(struct fab_ep *ep, const char *provider)
{
    struct fi_info *hints = fab_hints(provider);
    if (hints == NULL)
        return sp_error(SPINDLE_ENOMEM, "fabric: out of memory for fi_getinfo hints");
    char service[8];
    snprintf(service, sizeof service, "%u", ep->port);
    int rc = fi_getinfo(FAB_FI_VERSION, ep->host, service, FI_SOURCE, hints, &ep->info);
    fi_freeinfo(hints);
    if (rc == 0 && ep->info != NULL)
        return 0;
    ep->info = NULL;
    char found[256];
    fab_list_providers(found, sizeof found);
    if (strstr(found, provider) != NULL)
        return sp_error(SPINDLE_ENODEV,
                        "fabric provider '%s' cannot serve %s:%u with RMA write over "
                        "FI_EP_MSG: %s",
                        provider, ep->host, ep->port, fi_strerror(-rc));
    return sp_error(SPINDLE_ENODEV, "fabric provider '%s' not found (fi_getinfo found: %s)",
                    provider, found);
}

/* Some providers (sockets) report a taken port as a generic error: find
 * out with a plain bind whether that is what happened. */
static int fab_port_taken(const char *host, uint16_t port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    if (port == 0 || getaddrinfo(host, service, &hints, &res) != 0 || res == NULL)
        return 0;
    int taken = 0;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        taken = bind(fd, res->ai_addr, res->ai_addrlen) != 0 && errno == EADDRINUSE;
        close(fd);
    }
    freeaddrinfo(res);
    return taken;
}

static int fab_listen(struct fab_ep *ep)
{
    int rc = fi_passive_ep(ep->fabric, ep->info, &ep->pep, ep);
    if (rc == 0)
        rc = fi_pep_bind(ep->pep, &ep->eq->fid, 0);
    if (rc == 0)
        rc = fi_listen(ep->pep);
    if (rc == -FI_EADDRINUSE || (rc != 0 && fab_port_taken(ep->host, ep->port)))
        return sp_error(SPINDLE_EADDRINUSE, "fabric: %s:%u is already in use", ep->host, ep->port);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "fabric: cannot listen on %s:%u: %s", ep->host, ep->port,
                        fi_strerror(-rc));
    struct sockaddr_storage addr;
    size_t addr_len = sizeof addr;
    rc = fi_getname(&ep->pep->fid, &addr, &addr_len);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "fabric: fi_getname on %s: %s", ep->host, fi_strerror(-rc));
    if (addr.ss_family == AF_INET)
        ep->port = ntohs(((struct sockaddr_in *)&addr)->sin_port);
    else if (addr.ss_family == AF_INET6)
        ep->port = ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
    return 0;
}

static int fab_open_objects(struct fab_ep *ep)
{
    int rc = fi_fabric(ep->info->fabric_attr, &ep->fabric, ep);
    if (rc == 0)
        rc = fi_domain(ep->fabric, ep->info, &ep->domain, ep);
    if (rc != 0)
        return sp_error(SPINDLE_ENODEV, "fabric: cannot open provider '%s' domain: %s",
                        ep->info->fabric_attr->prov_name, fi_strerror(-rc));
    struct fi_eq_attr eq_attr = {.size = 256, .wait_obj = FI_WAIT_NONE};
    rc = fi_eq_open(ep->fabric, &eq_attr, &ep->eq, ep);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "fabric: fi_eq_open: %s", fi_strerror(-rc));
    struct fi_cq_attr cq_attr = {
        .size = 16384, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_UNSPEC};
    rc = fi_cq_open(ep->domain, &cq_attr, &ep->cq, ep);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "fabric: fi_cq_open (blocking wait): %s", fi_strerror(-rc));
    return 0;
}

static void fab_close_objects(struct fab_ep *ep);

static int fab_open(const struct tp_config *config, struct tp_endpoint **out)
{
    if (config == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric open: null argument");
    struct fab_ep *ep = calloc(1, sizeof *ep);
    if (ep == NULL)
        return sp_error(SPINDLE_ENOMEM, "fabric open: out of memory");
    ep->base.ops = &tp_fabric_ops;
    ep->config = *config;
    const char *host = config->host != NULL && config->host[0] ? config->host : "127.0.0.1";
    if (strlen(host) >= FAB_HOST_MAX) {
        free(ep);
        return sp_error(SPINDLE_EINVAL, "fabric: host name '%s' is too long", host);
    }
    snprintf(ep->host, sizeof ep->host, "%s", host);
    ep->port = config->port;
    ep->failure_timeout_ms =
        config->failure_timeout_ms > 0 ? config->failure_timeout_ms : FAB_DEFAULT_FAIL_MS;
    if (getrandom(&ep->nonce, sizeof ep->nonce, 0) != (ssize_t)sizeof ep->nonce)
        ep->nonce = sp_now_ns() ^ ((uint64_t)getpid() << 32);
    ep->next_key = 1;
    ep->next_region = 1;
    pthread_mutex_init(&ep->cm_lock, NULL);
    pthread_mutex_init(&ep->auth_lock, NULL);
    pthread_cond_init(&ep->cm_cond, NULL);
    pthread_mutex_init(&ep->region_lock, NULL);
    pthread_mutex_init(&ep->eventq.lock, NULL);
    pthread_mutex_init(&ep->arrival_lock, NULL);

    const char *provider =
        config->provider != NULL && config->provider[0] ? config->provider : "tcp";
    int rc = fab_auth_init(ep, config);
    if (rc == 0)
        rc = fab_getinfo(ep, provider);
    if (rc == 0 && ep->info->domain_attr->cq_data_size < 4)
        rc = sp_error(SPINDLE_ENODEV,
                      "fabric provider '%s' carries only %zu bytes of remote CQ data (need 4)",
                      provider, ep->info->domain_attr->cq_data_size);
    if (rc == 0)
        rc = fab_open_objects(ep);
    if (rc == 0)
        rc = fab_listen(ep);
    if (rc == 0) {
        rc = pthread_create(&ep->progress, NULL, fab_progress_main, ep);
        if (rc != 0)
            rc = sp_error(SPINDLE_EIO, "fabric: cannot start progress thread: %s", strerror(rc));
        else
            ep->progress_started = 1;
    }
    if (rc != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", spindle_errmsg());
        fab_close_objects(ep);
        free(ep);
        return sp_error(rc, "%s", msg);
    }
    SP_LOG_DBG("fabric", "member %u listening on %s:%u via %s (mr_mode 0x%x), %u group keys",
               config->self_id, ep->host, ep->port, ep->info->fabric_attr->prov_name,
               ep->info->domain_attr->mr_mode, ep->num_auth_keys);
    *out = &ep->base;
    return 0;
}

static void fab_close_objects(struct fab_ep *ep)
{
    if (ep->progress_started) {
        atomic_store(&ep->stop, 1);
        if (ep->cq != NULL)
            fi_cq_signal(ep->cq);
        pthread_join(ep->progress, NULL);
        ep->progress_started = 0;
    }
    for (struct fab_conn *c = ep->peers, *next; c != NULL; c = next) {
        next = c->next_peer;
        fab_conn_teardown(c);
        free(c);
    }
    ep->peers = NULL;
    for (uint32_t i = 0; i < ep->num_incoming; i++) {
        fab_conn_teardown(ep->incoming[i]);
        free(ep->incoming[i]);
    }
    ep->num_incoming = 0;
    if (ep->pep != NULL)
        fi_close(&ep->pep->fid);
    if (ep->cq != NULL)
        fi_close(&ep->cq->fid);
    if (ep->eq != NULL)
        fi_close(&ep->eq->fid);
    if (ep->domain != NULL)
        fi_close(&ep->domain->fid);
    if (ep->fabric != NULL)
        fi_close(&ep->fabric->fid);
    if (ep->info != NULL)
        fi_freeinfo(ep->info);
    for (struct fab_region *r = ep->regions, *next; r != NULL; r = next) {
        next = r->next;
        fab_region_grants_free(r);
        free(r->addr);
        free((char *)r - offsetof(struct fab_mr, region)); /* regions live in their fab_mr */
    }
    free(ep->eventq.events);
    fab_auth_clear(ep);
    free(ep->members);
    pthread_mutex_destroy(&ep->auth_lock);
    pthread_mutex_destroy(&ep->cm_lock);
    pthread_cond_destroy(&ep->cm_cond);
    pthread_mutex_destroy(&ep->region_lock);
    pthread_mutex_destroy(&ep->eventq.lock);
    pthread_mutex_destroy(&ep->arrival_lock);
}

static void fab_close(struct tp_endpoint *tep)
{
    if (tep == NULL)
        return;
    struct fab_ep *ep = fab_ep_of(tep);
    /* Say goodbye first so peers do not mistake our departure for a crash
     * of the connections they write through. */
    pthread_mutex_lock(&ep->cm_lock);
    for (struct fab_conn *c = ep->peers; c != NULL; c = c->next_peer)
        if (atomic_load(&c->state) == FAB_CONN_CONNECTED)
            fab_send_msg(c, FAB_MSG_BYE, 0);
    pthread_mutex_unlock(&ep->cm_lock);
    fab_close_objects(ep);
    free(ep);
}

static int fab_address(struct tp_endpoint *tep, struct tp_desc *out)
{
    if (tep == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric address: null argument");
    struct fab_ep *ep = fab_ep_of(tep);
    return fab_addr_encode(ep->host, ep->port, ep->nonce, ep->config.self_id, out);
}

/* ---- regions ------------------------------------------------------------ */

/* Layout (FAB_MR_WIRE bytes), little-endian through the wire codec: u32
 * magic, u32 zero, u64 region id, u64 length. */
void fab_region_encode(uint64_t region, uint64_t length, struct tp_desc *out)
{
    struct wire_writer w;
    wire_writer_init(&w, out->bytes, sizeof out->bytes);
    wire_put_u32(&w, FAB_MR_MAGIC);
    wire_put_u32(&w, 0);
    wire_put_u64(&w, region);
    wire_put_u64(&w, length);
    out->len = (uint32_t)w.pos;
}

int fab_region_decode(const struct tp_desc *desc, uint64_t *region, uint64_t *length)
{
    if (desc->len != FAB_MR_WIRE)
        return sp_error(SPINDLE_EINVAL,
                        "fabric rmr_import: descriptor of %u bytes is not a "
                        "fabric region",
                        desc->len);
    struct wire_reader r;
    wire_reader_init(&r, desc->bytes, desc->len, "fabric rmr_import: region descriptor");
    uint32_t magic = wire_get_u32(&r, "magic");
    size_t pad_at = r.pos;
    uint32_t pad = wire_get_u32(&r, "pad");
    uint64_t wire_region = wire_get_u64(&r, "region");
    uint64_t wire_length = wire_get_u64(&r, "length");
    if (magic != FAB_MR_MAGIC || wire_region == 0 || wire_length == 0)
        return sp_error(SPINDLE_EINVAL, "fabric rmr_import: descriptor is not a fabric region");
    if (pad != 0)
        return sp_error(SPINDLE_EPROTO,
                        "fabric rmr_import: region descriptor: pad is 0x%x, not 0, at offset %zu",
                        pad, pad_at);
    *region = wire_region;
    *length = wire_length;
    return 0;
}

static int fab_mr_alloc(struct tp_endpoint *tep, size_t length, unsigned flags, void **addr,
                        struct tp_mr **out)
{
    if (tep == NULL || addr == NULL || out == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "fabric mr_alloc: null argument or zero length");
    struct fab_ep *ep = fab_ep_of(tep);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t rounded = (length + page - 1) / page * page;
    struct fab_mr *mr = calloc(1, sizeof *mr);
    void *mem = aligned_alloc(page, rounded);
    if (mr == NULL || mem == NULL) {
        free(mr);
        free(mem);
        return sp_error(SPINDLE_ENOMEM, "fabric mr_alloc: cannot allocate %zu bytes", length);
    }
    memset(mem, 0, rounded);
    mr->base.ops = &tp_fabric_ops;
    mr->ep = ep;
    mr->region.addr = mem;
    mr->region.length = length;
    pthread_mutex_lock(&ep->region_lock);
    mr->region.id = ep->next_region++;
    mr->region.next = ep->regions;
    ep->regions = &mr->region;
    pthread_mutex_unlock(&ep->region_lock);
    *addr = mem;
    *out = &mr->base;
    return 0;
}

static void fab_mr_free(struct tp_endpoint *tep, struct tp_mr *tmr)
{
    if (tep == NULL || tmr == NULL)
        return;
    struct fab_mr *mr = fab_mr_of(tmr);
    struct fab_ep *ep = fab_ep_of(tep);
    pthread_mutex_lock(&ep->region_lock);
    for (struct fab_region **p = &ep->regions; *p != NULL; p = &(*p)->next) {
        if (*p == &mr->region) {
            *p = mr->region.next;
            break;
        }
    }
    pthread_mutex_unlock(&ep->region_lock);
    fab_region_grants_free(&mr->region);
    free(mr->region.addr);
    free(mr);
}

/* A region is named by its id: the connection a record arrives on already
 * identifies the endpoint that owns it, and an unknown id fails that
 * connection instead of being applied. */
static int fab_mr_export(struct tp_mr *tmr, struct tp_desc *out)
{
    if (tmr == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric mr_export: null argument");
    const struct fab_mr *mr = fab_mr_of(tmr);
    fab_region_encode(mr->region.id, mr->region.length, out);
    return 0;
}

static int fab_rmr_import(struct tp_peer *peer, const struct tp_desc *desc, struct tp_rmr **out)
{
    if (peer == NULL || desc == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric rmr_import: null argument");
    uint64_t region, length;
    int rc = fab_region_decode(desc, &region, &length);
    if (rc != 0)
        return rc;
    struct fab_rmr *rmr = calloc(1, sizeof *rmr);
    if (rmr == NULL)
        return sp_error(SPINDLE_ENOMEM, "fabric rmr_import: out of memory");
    rmr->base.ops = &tp_fabric_ops;
    rmr->region = region;
    rmr->length = length;
    *out = &rmr->base;
    return 0;
}

/* The whole region is imported: a record names only a region id and an
 * offset, and the owner applies it anywhere in the region (slice_align 0). */
static int fab_rmr_import_slice(struct tp_peer *peer, const struct tp_desc *desc, uint64_t offset,
                                uint64_t length, struct tp_rmr **out)
{
    uint64_t region, region_length;
    int rc = desc == NULL ? SPINDLE_EINVAL : fab_region_decode(desc, &region, &region_length);
    if (rc == 0)
        rc = tp_slice_check("fabric rmr_import", offset, length, region_length, 0);
    return rc != 0 ? rc : fab_rmr_import(peer, desc, out);
}

static void fab_rmr_release(struct tp_peer *peer, struct tp_rmr *rmr)
{
    free(rmr == NULL ? NULL : fab_rmr_of(rmr));
}

/* ---- connections -------------------------------------------------------- */

static int fab_resolve(struct fab_ep *ep, const char *host, uint16_t port, struct fi_info **out)
{
    struct fi_info *hints = fab_hints(ep->info->fabric_attr->prov_name);
    if (hints == NULL)
        return sp_error(SPINDLE_ENOMEM, "fabric connect: out of memory");
    hints->addr_format = ep->info->addr_format;
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    int rc = fi_getinfo(FAB_FI_VERSION, host, service, 0, hints, out);
    fi_freeinfo(hints);
    if (rc != 0 || *out == NULL)
        return sp_error(SPINDLE_EUNREACH,
                        "fabric peer %s:%u is unreachable: cannot resolve "
                        "'%s' (%s)",
                        host, port, host, fi_strerror(-rc));
    return 0;
}

/* Waits for the progress thread to move conn out of CONNECTING. */
static int fab_wait_connected(struct fab_ep *ep, struct fab_conn *conn, int timeout_ms)
{
    struct timespec deadline = sp_deadline_in(CLOCK_REALTIME, timeout_ms);
    pthread_mutex_lock(&ep->cm_lock);
    int rc = 0;
    while (atomic_load(&conn->state) == FAB_CONN_CONNECTING && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&ep->cm_cond, &ep->cm_lock, &deadline);
    pthread_mutex_unlock(&ep->cm_lock);
    int state = atomic_load(&conn->state);
    if (state == FAB_CONN_CONNECTED)
        return 0;
    if (state == FAB_CONN_CONNECTING) {
        fab_conn_fail(conn, SPINDLE_EUNREACH, "no answer");
        return sp_error(SPINDLE_EUNREACH,
                        "fabric peer %s is unreachable: no answer within "
                        "%d ms",
                        conn->name, timeout_ms);
    }
    return sp_error(SPINDLE_EUNREACH, "fabric peer %s is unreachable: %s", conn->name, conn->why);
}

static int fab_connect(struct tp_endpoint *tep, const struct tp_desc *peer_addr, int timeout_ms,
                       struct tp_peer **out)
{
    if (tep == NULL || peer_addr == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric connect: null argument");
    struct fab_ep *ep = fab_ep_of(tep);
    char host[FAB_HOST_MAX];
    uint16_t port;
    uint64_t nonce;
    uint32_t id;
    int rc = fab_addr_decode(peer_addr, host, sizeof host, &port, &nonce, &id);
    if (rc != 0)
        return rc;
    struct fi_info *info = NULL;
    rc = fab_resolve(ep, host, port, &info);
    if (rc != 0)
        return rc;
    struct fab_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL) {
        fi_freeinfo(info);
        return sp_error(SPINDLE_ENOMEM, "fabric connect: out of memory");
    }
    conn->base.ops = &tp_fabric_ops;
    snprintf(conn->name, sizeof conn->name, "%s:%u", host, port);
    conn->remote_id = id;
    conn->remote_nonce = nonce;
    rc = fab_conn_setup(ep, conn, info, 0);
    if (rc == 0) {
        /* Listed before fi_connect: the progress thread may report on it. */
        pthread_mutex_lock(&ep->cm_lock);
        conn->next_peer = ep->peers;
        ep->peers = conn;
        pthread_mutex_unlock(&ep->cm_lock);
        struct fab_req_data req = {.magic = FAB_REQ_MAGIC,
                                   .src_id = ep->config.self_id,
                                   .dst_nonce = nonce,
                                   .src_nonce = ep->nonce};
        if (getrandom(&req.conn_nonce, sizeof req.conn_nonce, 0) != (ssize_t)sizeof req.conn_nonce)
            req.conn_nonce = sp_now_ns() ^ ((uint64_t)getpid() << 32);
        conn->conn_nonce = req.conn_nonce;
        fab_req_encode(&req, conn->req_wire);
        uint8_t keys[FAB_KEYS_MAX][FAB_MAC_BYTES];
        if (fab_auth_snapshot(ep, keys) > 0) {
            /* A connector proves with the first key. */
            memcpy(conn->req_key, keys[0], sizeof conn->req_key);
            conn->req_sealed = 1;
            fab_req_seal(conn->req_key, conn->req_wire);
        }
        fab_auth_wipe(keys, sizeof keys);
        int frc = fi_connect(conn->fep, info->dest_addr, conn->req_wire, sizeof conn->req_wire);
        if (frc != 0) {
            fab_conn_fail(conn, SPINDLE_EUNREACH, fi_strerror(-frc));
            rc = sp_error(SPINDLE_EUNREACH, "fabric peer %s is unreachable: %s", conn->name,
                          fi_strerror(-frc));
        } else {
            rc = fab_wait_connected(ep, conn, timeout_ms > 0 ? timeout_ms : 10000);
        }
        fi_freeinfo(info);
        /* A failed connection stays listed until close: stale events may
         * still name it. */
        if (rc != 0)
            return rc;
        *out = &conn->base;
        return 0;
    }
    fi_freeinfo(info);
    fab_conn_teardown(conn);
    free(conn);
    return rc;
}

static void fab_disconnect(struct tp_endpoint *tep, struct tp_peer *peer)
{
    if (tep == NULL || peer == NULL)
        return;
    struct fab_conn *conn = fab_conn_of(peer);
    /* Closed first, so the cancellations shutdown causes are not failures.
     * Resources are released at close: completions may still name it.
     * The connection itself also ends at close: shutting it down right
     * after the goodbye could drop the goodbye still queued in the provider,
     * and the peer would take our departure for a crash. */
    atomic_store(&conn->failure_reported, 1);
    int state = atomic_exchange(&conn->state, FAB_CONN_CLOSED);
    if (state == FAB_CONN_CONNECTED)
        fab_send_msg(conn, FAB_MSG_BYE, 0);
}

/* ---- events, state, stats ------------------------------------------------ */

static int fab_poll(struct tp_endpoint *tep, struct tp_event *events, int max)
{
    if (tep == NULL || events == NULL || max < 0)
        return sp_error(SPINDLE_EINVAL, "fabric poll: null argument");
    struct fab_event_queue *q = &fab_ep_of(tep)->eventq;
    pthread_mutex_lock(&q->lock);
    size_t n = q->count < (size_t)max ? q->count : (size_t)max;
    if (n > 0) {
        memcpy(events, q->events, n * sizeof *events);
        memmove(q->events, q->events + n, (q->count - n) * sizeof *events);
        q->count -= n;
    }
    pthread_mutex_unlock(&q->lock);
    return (int)n;
}

static int fab_peer_state(struct tp_peer *peer)
{
    if (peer == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric peer_state: null peer");
    struct fab_conn *conn = fab_conn_of(peer);
    if (atomic_load(&conn->state) == FAB_CONN_FAILED)
        return sp_error(SPINDLE_EPEERFAILED, "fabric peer %s (member %u) failed: %s", conn->name,
                        conn->remote_id, conn->why);
    return 0;
}

static void fab_stats(struct tp_endpoint *tep, struct tp_stats *out)
{
    if (tep == NULL || out == NULL)
        return;
    struct fab_ep *ep = fab_ep_of(tep);
    out->writes_posted = atomic_load(&ep->st_writes);
    out->batches_posted = atomic_load(&ep->st_batches);
    out->doorbells = atomic_load(&ep->st_doorbells);
    out->bytes_written = atomic_load(&ep->st_bytes);
    out->wakeups_sent = atomic_load(&ep->st_wakeups);
    out->sleeps = atomic_load(&ep->st_sleeps);
    out->pinned_bytes = atomic_load(&ep->st_pinned);
    out->signaled = atomic_load(&ep->st_signaled);
}

extern const struct tp_attr tp_fabric_attr;

const struct tp_ops tp_fabric_ops = {
    .name = "fabric",
    .attr = &tp_fabric_attr,
    .open = fab_open,
    .close = fab_close,
    .address = fab_address,
    .mr_alloc = fab_mr_alloc,
    .mr_free = fab_mr_free,
    .mr_export = fab_mr_export,
    .connect = fab_connect,
    .disconnect = fab_disconnect,
    .rmr_import = fab_rmr_import,
    .rmr_import_slice = fab_rmr_import_slice,
    .rmr_release = fab_rmr_release,
    .post_writes = fab_post_writes,
    .poll = fab_poll,
    .peer_state = fab_peer_state,
    .doorbell_ring = fab_doorbell_ring,
    .doorbell_ring_self = fab_doorbell_ring_self,
    .doorbell_arm = fab_doorbell_arm,
    .doorbell_wait = fab_doorbell_wait,
    .stats = fab_stats,
    .mr_grant = fab_mr_grant,
    .set_keys = fab_set_keys,
    .set_members = fab_set_members,
    .set_arrival = fab_set_arrival,
};
