/*
 * rdma-core verbs backend: device selection, regions, peers and the ops table.
 *
 * Writes land directly in the target region with IBV_WR_RDMA_WRITE on a
 * reliable connection (RC QP) or through a DC initiator (dct.c). T1 holds
 * because the NIC places each aligned 8-byte word of a write with one PCIe
 * write; T2 holds because an RC QP (and one DCI towards one DCT) executes
 * RDMA writes in posting order, and a peer that moves from DC to RC waits
 * for its DC writes to complete before its first RC write (dct.c).
 *
 * Doorbells are zero-length RDMA writes with immediate; the target keeps
 * receives posted on every incoming QP and sleeps on the completion channel
 * of its doorbell CQ (verbs_post.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "transport/verbs/verbs_impl.h"
#include "util/error.h"
#include "util/log.h"
#include "util/wire.h"

#define VB_PAGE 4096u

/* ---- address descriptor ------------------------------------------------ */

/* Layout (VB_ADDR_WIRE bytes, then the host), little-endian through the
 * wire codec (util/wire.h): u32 magic, u8 version, u8 host length, u16
 * port, u32 member id, u8 has_dct, u8 port number, u16 LID, u64 nonce,
 * u32 DCT number, u32 zero, u64 DC key, 16 GID bytes, host bytes (no NUL). */
int vb_addr_encode(const struct vb_addr *addr, struct tp_desc *out)
{
    size_t host_len = strlen(addr->host);
    if (host_len == 0 || host_len >= VB_HOST_MAX)
        return sp_error(SPINDLE_EINVAL, "verbs: host '%s' is empty or too long", addr->host);
    struct wire_writer w;
    wire_writer_init(&w, out->bytes, sizeof out->bytes);
    wire_put_u32(&w, VB_ADDR_MAGIC);
    wire_put_u8(&w, 1);
    wire_put_u8(&w, (uint8_t)host_len);
    wire_put_u16(&w, addr->port);
    wire_put_u32(&w, addr->id);
    wire_put_u8(&w, addr->has_dct);
    wire_put_u8(&w, addr->port_num);
    wire_put_u16(&w, addr->lid);
    wire_put_u64(&w, addr->nonce);
    wire_put_u32(&w, addr->dctn);
    wire_put_u32(&w, 0);
    wire_put_u64(&w, addr->dc_key);
    wire_put_bytes(&w, addr->gid, sizeof addr->gid);
    wire_put_bytes(&w, addr->host, host_len);
    out->len = (uint32_t)w.pos;
    return 0;
}

int vb_addr_decode(const struct tp_desc *desc, struct vb_addr *out)
{
    if (desc->len < VB_ADDR_WIRE || desc->len > TP_DESC_MAX)
        return sp_error(SPINDLE_EINVAL, "verbs: address descriptor of %u bytes is malformed",
                        desc->len);
    struct vb_addr addr;
    memset(&addr, 0, sizeof addr);
    struct wire_reader r;
    wire_reader_init(&r, desc->bytes, desc->len, "verbs address descriptor");
    uint32_t magic = wire_get_u32(&r, "magic");
    uint8_t version = wire_get_u8(&r, "version");
    uint8_t host_len = wire_get_u8(&r, "host length");
    addr.port = wire_get_u16(&r, "port");
    addr.id = wire_get_u32(&r, "member id");
    addr.has_dct = wire_get_u8(&r, "has_dct");
    addr.port_num = wire_get_u8(&r, "port number");
    addr.lid = wire_get_u16(&r, "LID");
    addr.nonce = wire_get_u64(&r, "nonce");
    addr.dctn = wire_get_u32(&r, "DCT number");
    size_t pad_at = r.pos;
    uint32_t pad = wire_get_u32(&r, "pad");
    addr.dc_key = wire_get_u64(&r, "DC key");
    memcpy(addr.gid, desc->bytes + r.pos, sizeof addr.gid);
    if (magic != VB_ADDR_MAGIC || version != 1 || host_len == 0 || host_len >= VB_HOST_MAX ||
        VB_ADDR_WIRE + host_len != desc->len)
        return sp_error(SPINDLE_EINVAL, "verbs: descriptor is not a verbs address");
    /* What the encoder writes and nothing else: pad is zero, and the host
     * holds no NUL (which would cut it short of host_len). */
    if (pad != 0)
        return sp_error(SPINDLE_EPROTO,
                        "verbs: address descriptor: pad is 0x%x, not 0, at offset %zu", pad,
                        pad_at);
    if (addr.has_dct > 1 || (addr.has_dct && addr.dc_key == 0))
        return sp_error(SPINDLE_EPROTO,
                        "verbs: address descriptor: has_dct %u with DC key %llu (a DCT has a "
                        "nonzero key)",
                        addr.has_dct, (unsigned long long)addr.dc_key);
    const uint8_t *nul = memchr(desc->bytes + VB_ADDR_WIRE, '\0', host_len);
    if (nul != NULL)
        return sp_error(SPINDLE_EPROTO,
                        "verbs: address descriptor: host of %u bytes holds a NUL byte at "
                        "offset %zu",
                        host_len, (size_t)(nul - desc->bytes));
    memcpy(addr.host, desc->bytes + VB_ADDR_WIRE, host_len);
    *out = addr;
    return 0;
}

/* ---- device selection -------------------------------------------------- */

/* Returns the first active port of ctx, 0 when none. */
static uint8_t vb_active_port(const struct verbs_api *api, struct ibv_context *ctx,
                              unsigned port_count, struct ibv_port_attr *attr)
{
    for (unsigned p = 1; p <= port_count && p < 256; p++)
        if (api->query_port(ctx, (uint8_t)p, attr) == 0 && attr->state == IBV_PORT_ACTIVE)
            return (uint8_t)p;
    return 0;
}

/* Opens ctx on one device and finds its active port and ODP support. */
static int vb_try_device(struct vb_ep *ep, struct ibv_device *dev)
{
    const struct verbs_api *api = verbs_api_get();
    ep->ctx = api->open_device(dev);
    if (ep->ctx == NULL)
        return sp_error(SPINDLE_ENODEV, "verbs: cannot open RDMA device '%s': %s", dev->name,
                        strerror(errno));
    snprintf(ep->dev_name, sizeof ep->dev_name, "%s", dev->name);
    struct ibv_device_attr_ex attr;
    memset(&attr, 0, sizeof attr);
    int rc = api->query_device_ex(ep->ctx, &attr);
    if (rc != 0)
        return sp_error(SPINDLE_ENODEV, "verbs: ibv_query_device_ex on '%s' failed: %s", dev->name,
                        strerror(rc > 0 ? rc : errno));
    struct ibv_port_attr port;
    ep->port_num = vb_active_port(api, ep->ctx, attr.orig_attr.phys_port_cnt, &port);
    if (ep->port_num == 0)
        return sp_error(SPINDLE_ENODEV, "verbs: RDMA device '%s' has no active port (%u ports)",
                        dev->name, (unsigned)attr.orig_attr.phys_port_cnt);
    ep->lid = port.lid;
    ep->mtu = port.active_mtu;
    if (api->query_gid(ep->ctx, ep->port_num, 0, &ep->gid) != 0)
        memset(&ep->gid, 0, sizeof ep->gid);
    /* ODP for remotely written regions needs RC responder write support. */
    ep->odp_write = (attr.odp_caps.general_caps & IBV_ODP_SUPPORT) &&
                    (attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
    if (!ep->odp_write)
        sp_log(SP_LOG_INFO, "verbs",
               "on-demand paging not supported by %s; TP_MR_NONPINNED regions are pinned",
               ep->dev_name);
    else /* implicit ODP is reported only: its rkey would cover the whole process */
        sp_log(SP_LOG_INFO, "verbs",
               "%s: RC on-demand paging with remote write for TP_MR_NONPINNED regions "
               "(implicit ODP %s, not used)",
               ep->dev_name,
               (attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) ? "supported" : "absent");
    return 0;
}

static int vb_select_device(struct vb_ep *ep, const char *want)
{
    const struct verbs_api *api = verbs_api_get();
    int count = 0;
    struct ibv_device **list = api->get_device_list(&count);
    if (list == NULL || count <= 0) {
        if (list != NULL)
            api->free_device_list(list);
        if (want != NULL)
            return sp_error(SPINDLE_ENODEV,
                            "RDMA device '%s' not found: no RDMA device found (verbs transport "
                            "needs an RDMA NIC)",
                            want);
        return sp_error(SPINDLE_ENODEV, "no RDMA device found (verbs transport needs an RDMA NIC)");
    }
    char names[256] = "";
    struct ibv_device *chosen = NULL;
    for (int i = 0; i < count; i++) {
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", list[i]->name);
        if (chosen == NULL && (want == NULL || strcmp(list[i]->name, want) == 0))
            chosen = list[i];
    }
    int rc;
    if (chosen == NULL)
        rc = sp_error(SPINDLE_ENODEV, "RDMA device '%s' not found (available: %s)", want, names);
    else
        rc = vb_try_device(ep, chosen);
    api->free_device_list(list);
    return rc;
}

/* ---- endpoint ---------------------------------------------------------- */

static void vb_close(struct tp_endpoint *tep);

static int vb_setup_queues(struct vb_ep *ep)
{
    const struct verbs_api *api = verbs_api_get();
    ep->pd = api->alloc_pd(ep->ctx);
    if (ep->pd == NULL)
        return sp_error(SPINDLE_EIO, "verbs: ibv_alloc_pd on %s failed: %s", ep->dev_name,
                        strerror(errno));
    ep->channel = api->create_comp_channel(ep->ctx);
    if (ep->channel == NULL)
        return sp_error(SPINDLE_EIO, "verbs: ibv_create_comp_channel on %s failed: %s",
                        ep->dev_name, strerror(errno));
    ep->send_cq = api->create_cq(ep->ctx, (int)VB_CQ_DEPTH, ep, ep->channel, 0);
    ep->recv_cq = api->create_cq(ep->ctx, (int)VB_RECV_CQ_DEPTH, ep, ep->channel, 0);
    if (ep->send_cq == NULL || ep->recv_cq == NULL)
        return sp_error(SPINDLE_EIO, "verbs: ibv_create_cq (%u entries) on %s failed: %s",
                        VB_CQ_DEPTH, ep->dev_name, strerror(errno));
    ep->self_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ep->self_fd < 0)
        return sp_error(SPINDLE_EIO, "verbs: eventfd failed: %s", strerror(errno));
    return 0;
}

/* DC is tried by default: the group API leaves tp_config.use_dct 0, and a
 * device without DC costs one log line. SPINDLE_VERBS_DCT=0 turns the
 * default off (a config with use_dct set still asks for DC). Declared in
 * src/config/config_env.c, which a backend may not include:
 * scripts/check-env.sh holds the name to the table. */
static int vb_dct_default(void)
{
    const char *env = getenv("SPINDLE_VERBS_DCT");
    return env == NULL || strcmp(env, "0") != 0;
}

static int vb_open(const struct tp_config *config, struct tp_endpoint **out)
{
    struct vb_ep *ep = calloc(1, sizeof *ep);
    if (ep == NULL)
        return sp_error(SPINDLE_ENOMEM, "verbs: out of memory for endpoint");
    ep->base.ops = &tp_verbs_ops;
    ep->self_fd = -1;
    ep->stop_fd = -1;
    pthread_mutex_init(&ep->conn_lock, NULL);
    pthread_mutex_init(&ep->stats_lock, NULL);
    ep->self_id = config->self_id;
    ep->port = config->port;
    ep->timeout_ms =
        config->failure_timeout_ms > 0 ? config->failure_timeout_ms : VB_DEFAULT_TIMEOUT;
    if (getrandom(&ep->nonce, sizeof ep->nonce, 0) != sizeof ep->nonce)
        ep->nonce = (uint64_t)(uintptr_t)ep ^ (uint64_t)getpid();
    int rc = vb_select_device(ep, config->device);
    if (rc == 0 &&
        (config->host == NULL || config->host[0] == '\0' || strlen(config->host) >= VB_HOST_MAX))
        rc = sp_error(SPINDLE_EINVAL,
                      "verbs: config host '%s' must be the IP address of %s's interface",
                      config->host ? config->host : "(null)", ep->dev_name);
    if (rc == 0) {
        snprintf(ep->host, sizeof ep->host, "%s", config->host);
        rc = vb_setup_queues(ep);
    }
    if (rc == 0)
        rc = vb_dct_open(ep, config->use_dct || vb_dct_default());
    if (rc == 0)
        rc = vb_listen_start(ep);
    if (rc != 0) {
        vb_close(&ep->base);
        return rc;
    }
    *out = &ep->base;
    return 0;
}

static void vb_peer_free(struct vb_ep *ep, struct vb_peer *peer)
{
    if (peer->rc_thread_started)
        pthread_join(peer->rc_thread, NULL);
    vb_rc_destroy(ep, peer);
    vb_dct_peer_fini(peer);
    free(peer);
}

static void vb_close(struct tp_endpoint *tep)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    const struct verbs_api *api = verbs_api_get();
    vb_listen_stop(ep);
    while (ep->peers != NULL) {
        struct vb_peer *next = ep->peers->next;
        vb_peer_free(ep, ep->peers);
        ep->peers = next;
    }
    vb_dct_close(ep);
    if (ep->send_cq != NULL)
        api->destroy_cq(ep->send_cq);
    if (ep->recv_cq != NULL)
        api->destroy_cq(ep->recv_cq);
    if (ep->channel != NULL)
        api->destroy_comp_channel(ep->channel);
    if (ep->pd != NULL)
        api->dealloc_pd(ep->pd);
    if (ep->ctx != NULL)
        api->close_device(ep->ctx);
    if (ep->self_fd >= 0)
        close(ep->self_fd);
    free(ep->members);
    pthread_mutex_destroy(&ep->conn_lock);
    pthread_mutex_destroy(&ep->stats_lock);
    free(ep);
}

static int vb_address(struct tp_endpoint *tep, struct tp_desc *out)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    struct vb_addr addr = {
        .port = ep->port,
        .id = ep->self_id,
        .nonce = ep->nonce,
        .port_num = ep->port_num,
        .lid = ep->lid,
    };
    snprintf(addr.host, sizeof addr.host, "%s", ep->host);
    memcpy(addr.gid, ep->gid.raw, sizeof addr.gid);
    if (ep->dct_enabled && ep->dct != NULL) {
        addr.has_dct = 1;
        addr.dctn = ep->dct->qp_num;
        addr.dc_key = ep->dc_key;
    }
    return vb_addr_encode(&addr, out);
}

/* ---- regions ----------------------------------------------------------- */

/* Layout (VB_MR_WIRE bytes), little-endian through the wire codec: u32
 * magic, u32 rkey, u64 address, u64 length. */
void vb_region_encode(const struct vb_region *region, struct tp_desc *out)
{
    struct wire_writer w;
    wire_writer_init(&w, out->bytes, sizeof out->bytes);
    wire_put_u32(&w, VB_MR_MAGIC);
    wire_put_u32(&w, region->rkey);
    wire_put_u64(&w, region->addr);
    wire_put_u64(&w, region->length);
    out->len = (uint32_t)w.pos;
}

int vb_region_decode(const struct tp_desc *desc, struct vb_region *out)
{
    if (desc->len != VB_MR_WIRE)
        return sp_error(SPINDLE_EINVAL, "verbs: region descriptor of %u bytes is malformed",
                        desc->len);
    struct wire_reader r;
    wire_reader_init(&r, desc->bytes, desc->len, "verbs region descriptor");
    uint32_t magic = wire_get_u32(&r, "magic");
    struct vb_region region;
    region.rkey = wire_get_u32(&r, "rkey");
    region.addr = wire_get_u64(&r, "address");
    region.length = wire_get_u64(&r, "length");
    if (magic != VB_MR_MAGIC)
        return sp_error(SPINDLE_EINVAL, "verbs: descriptor (magic 0x%x) is not a verbs region",
                        magic);
    *out = region;
    return 0;
}

static int vb_mr_alloc(struct tp_endpoint *tep, size_t length, unsigned flags, void **addr,
                       struct tp_mr **out)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    const struct verbs_api *api = verbs_api_get();
    if (length == 0)
        return sp_error(SPINDLE_EINVAL, "verbs: region length 0 is invalid");
    size_t rounded = (length + VB_PAGE - 1) / VB_PAGE * VB_PAGE;
    struct vb_mr *mr = calloc(1, sizeof *mr);
    void *mem = aligned_alloc(VB_PAGE, rounded);
    if (mr == NULL || mem == NULL) {
        free(mr);
        free(mem);
        return sp_error(SPINDLE_ENOMEM, "verbs: out of memory for a %zu-byte region", length);
    }
    memset(mem, 0, rounded);
    mr->base.ops = &tp_verbs_ops;
    /* Relaxed ordering is never requested: it lets the NIC reorder PCIe
     * writes of one RDMA write, which would break T1/T2. */
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    mr->odp = (flags & TP_MR_NONPINNED) && ep->odp_write;
    if (mr->odp)
        access |= IBV_ACCESS_ON_DEMAND;
    mr->mr = api->reg_mr(ep->pd, mem, rounded, access);
    if (mr->mr == NULL) {
        int err = errno;
        free(mem);
        free(mr);
        return sp_error(SPINDLE_EIO, "verbs: ibv_reg_mr of %zu bytes (access 0x%x) failed: %s",
                        rounded, (unsigned)access, strerror(err));
    }
    mr->addr = mem;
    mr->length = rounded;
    if (mr->odp) {
        /* Fault the pages in now so the first remote write does not take a
         * page-fault round trip (NP-RDMA discusses that cost). */
        struct ibv_sge sge = {
            .addr = (uintptr_t)mem, .length = (uint32_t)rounded, .lkey = mr->mr->lkey};
        if (rounded <= UINT32_MAX && api->advise_mr(ep->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
                                                    IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1) != 0)
            sp_log(SP_LOG_DEBUG, "verbs", "ibv_advise_mr prefetch of %zu bytes failed", rounded);
    } else {
        pthread_mutex_lock(&ep->stats_lock);
        ep->stats.pinned_bytes += rounded;
        pthread_mutex_unlock(&ep->stats_lock);
    }
    *addr = mem;
    *out = &mr->base;
    return 0;
}

static void vb_mr_free(struct tp_endpoint *tep, struct tp_mr *tmr)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    struct vb_mr *mr = (struct vb_mr *)tmr;
    if (mr == NULL)
        return;
    verbs_api_get()->dereg_mr(mr->mr);
    if (!mr->odp) {
        pthread_mutex_lock(&ep->stats_lock);
        ep->stats.pinned_bytes -= mr->length;
        pthread_mutex_unlock(&ep->stats_lock);
    }
    free(mr->addr);
    free(mr);
}

static int vb_mr_export(struct tp_mr *tmr, struct tp_desc *out)
{
    struct vb_mr *mr = (struct vb_mr *)tmr;
    struct vb_region region = {(uintptr_t)mr->addr, mr->length, mr->mr->rkey};
    vb_region_encode(&region, out);
    return 0;
}

static int vb_rmr_import(struct tp_peer *peer, const struct tp_desc *desc, struct tp_rmr **out)
{
    struct vb_region region;
    int rc = vb_region_decode(desc, &region);
    if (rc != 0)
        return rc;
    struct vb_rmr *rmr = malloc(sizeof *rmr);
    if (rmr == NULL)
        return sp_error(SPINDLE_ENOMEM, "verbs: out of memory for a remote region");
    *rmr = (struct vb_rmr){
        .base = {&tp_verbs_ops}, .addr = region.addr, .length = region.length, .rkey = region.rkey};
    *out = &rmr->base;
    return 0;
}

/* The whole region is imported: its rkey covers all of it (slice_align 0). */
static int vb_rmr_import_slice(struct tp_peer *peer, const struct tp_desc *desc, uint64_t offset,
                               uint64_t length, struct tp_rmr **out)
{
    struct vb_region region;
    int rc = vb_region_decode(desc, &region);
    if (rc == 0)
        rc = tp_slice_check("verbs", offset, length, region.length, 0);
    return rc != 0 ? rc : vb_rmr_import(peer, desc, out);
}

static void vb_rmr_release(struct tp_peer *peer, struct tp_rmr *rmr)
{
    free(rmr);
}

/* ---- peers ------------------------------------------------------------- */

/* Continues FNV-1a hash over the 8 bytes of value, least significant first
 * (the bytes of a uint64_t in memory on the little-endian hosts verbs runs
 * on, so pinning is unchanged from hashing the bytes in place). */
static uint64_t vb_fnv1a_u64(uint64_t hash, uint64_t value)
{
    for (unsigned i = 0; i < 8; i++)
        hash = (hash ^ ((value >> (8 * i)) & 0xffu)) * 1099511628211ull;
    return hash;
}

static int vb_connect(struct tp_endpoint *tep, const struct tp_desc *peer_addr, int timeout_ms,
                      struct tp_peer **out)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    if (ep->peer_count >= VB_PEERS_MAX)
        return sp_error(SPINDLE_EINVAL, "verbs: peer limit %u reached", VB_PEERS_MAX);
    struct vb_peer *peer = calloc(1, sizeof *peer);
    if (peer == NULL)
        return sp_error(SPINDLE_ENOMEM, "verbs: out of memory for a peer");
    peer->base.ops = &tp_verbs_ops;
    peer->ep = ep;
    int rc = vb_addr_decode(peer_addr, &peer->addr);
    if (rc != 0) {
        free(peer);
        return rc;
    }
    /* FNV-1a of the peer's nonce and id pins it to one DCI. */
    peer->hash =
        vb_fnv1a_u64(vb_fnv1a_u64(1469598103934665603ull, peer->addr.nonce), peer->addr.id);
    if (ep->dct_enabled && peer->addr.has_dct)
        rc = vb_dct_peer_init(ep, peer);
    else
        rc = vb_rc_connect(ep, peer, timeout_ms);
    if (rc != 0) {
        vb_peer_free(ep, peer);
        return rc;
    }
    peer->next = ep->peers;
    __atomic_store_n(&ep->peers, peer, __ATOMIC_RELEASE); /* vb_poll walks the list */
    ep->peer_count++;
    *out = &peer->base;
    return 0;
}

static void vb_disconnect(struct tp_endpoint *tep, struct tp_peer *tpeer)
{
    /* Peer memory stays until close: flushed completions may still name it. */
    struct vb_peer *peer = (struct vb_peer *)tpeer;
    atomic_store(&peer->failed, 1);
    atomic_store(&peer->reported, 1);
}

static int vb_peer_state(struct tp_peer *tpeer)
{
    struct vb_peer *peer = (struct vb_peer *)tpeer;
    if (atomic_load_explicit(&peer->failed, memory_order_acquire))
        return sp_error(SPINDLE_EPEERFAILED, "verbs: peer %u (%s:%u) failed", peer->addr.id,
                        peer->addr.host, peer->addr.port);
    return 0;
}

void vb_stats_add(struct vb_ep *ep, uint64_t writes, uint64_t bytes, uint64_t signaled)
{
    pthread_mutex_lock(&ep->stats_lock);
    ep->stats.writes_posted += writes;
    ep->stats.batches_posted++;
    ep->stats.doorbells++;
    ep->stats.bytes_written += bytes;
    ep->stats.signaled += signaled;
    pthread_mutex_unlock(&ep->stats_lock);
}

static void vb_stats(struct tp_endpoint *tep, struct tp_stats *out)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    pthread_mutex_lock(&ep->stats_lock);
    *out = ep->stats;
    pthread_mutex_unlock(&ep->stats_lock);
}

extern const struct tp_attr tp_verbs_attr;

const struct tp_ops tp_verbs_ops = {
    .name = "verbs",
    .attr = &tp_verbs_attr,
    .open = vb_open,
    .close = vb_close,
    .address = vb_address,
    .mr_alloc = vb_mr_alloc,
    .mr_free = vb_mr_free,
    .mr_export = vb_mr_export,
    .connect = vb_connect,
    .disconnect = vb_disconnect,
    .rmr_import = vb_rmr_import,
    .rmr_import_slice = vb_rmr_import_slice,
    .rmr_release = vb_rmr_release,
    .post_writes = vb_post_writes,
    .poll = vb_poll,
    .peer_state = vb_peer_state,
    .doorbell_ring = vb_doorbell_ring,
    .doorbell_ring_self = vb_doorbell_ring_self,
    .doorbell_arm = vb_doorbell_arm,
    .doorbell_wait = vb_doorbell_wait,
    .stats = vb_stats,
    .set_members = vb_set_members,
};
