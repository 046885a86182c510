/*
 * Fake verbs objects shared by the verbs backend's unit tests
 * (test_verbs_post.c, test_verbs_conn.c). The data path's header-inline
 * verbs dispatch through struct ibv_context ops and struct ibv_qp_ex /
 * struct mlx5dv_qp_ex function pointers; these fakes record every request
 * in `rec`. Control-path fakes for struct verbs_api record what the backend
 * asks for: registrations, QP state changes (modify_qp) and a device to open.
 * Include once per test program, after cmocka.h and verbs_impl.h.
 */
#ifndef SPINDLE_TESTS_TRANSPORT_VERBS_FAKE_H
#define SPINDLE_TESTS_TRANSPORT_VERBS_FAKE_H

#define VF_UNUSED __attribute__((unused))

#define MAX_RECORDED 1024

/* A peer's DC key in the tests (an endpoint draws its own at random). */
#define FAKE_DC_KEY 0x5350494e444c45ull

struct recorded_wr {
    enum ibv_wr_opcode opcode;
    unsigned flags;
    uint64_t remote_addr;
    uint32_t rkey;
    uint64_t local_addr;
    uint32_t length;
    uint32_t lkey;
    uint64_t wr_id;
    /* DC path */
    void *ah;
    uint32_t dctn;
    uint64_t dc_key;
    uint8_t inline_bytes[16]; /* the first bytes of an inline payload, as posted */
};

static VF_UNUSED struct {
    unsigned post_calls; /* ibv_post_send calls = doorbells rung */
    unsigned chain_lengths[MAX_RECORDED];
    struct recorded_wr wrs[MAX_RECORDED];
    unsigned num_wrs;
    struct ibv_wc pending_wc[64]; /* what the fake send CQ returns next */
    int num_wc;
    unsigned dc_starts, dc_completes;
    int reg_access;
    unsigned cm_channels; /* background RC connection attempts */
} rec;

static VF_UNUSED int fail_mid_chain; /* the next post fails after its first request */

static inline int fake_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
                                 struct ibv_send_wr **bad)
{
    (void)qp;
    if (fail_mid_chain && wr->next != NULL) {
        fail_mid_chain = 0;
        *bad = wr->next;
        return ENOMEM;
    }
    unsigned length = 0;
    for (; wr != NULL; wr = wr->next, length++) {
        struct recorded_wr *r = &rec.wrs[rec.num_wrs++ % MAX_RECORDED];
        *r = (struct recorded_wr){.opcode = wr->opcode,
                                  .flags = wr->send_flags,
                                  .remote_addr = wr->wr.rdma.remote_addr,
                                  .rkey = wr->wr.rdma.rkey,
                                  .wr_id = wr->wr_id};
        if (wr->num_sge > 0) {
            r->local_addr = wr->sg_list->addr;
            r->length = wr->sg_list->length;
            r->lkey = wr->sg_list->lkey;
        }
    }
    rec.chain_lengths[rec.post_calls++ % MAX_RECORDED] = length;
    return 0;
}

static inline int fake_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
    if (cq->cq_context != (void *)1) /* the doorbell CQ: nothing arrives */
        return 0;
    int n = 0;
    while (n < num && rec.num_wc > 0) {
        wc[n++] = rec.pending_wc[0];
        memmove(rec.pending_wc, rec.pending_wc + 1,
                (size_t)--rec.num_wc * sizeof rec.pending_wc[0]);
    }
    return n;
}

static VF_UNUSED struct ibv_context fake_ctx;
static VF_UNUSED struct ibv_qp fake_rc_qp = {.context = &fake_ctx};
static VF_UNUSED struct ibv_cq fake_send_cq = {.context = &fake_ctx, .cq_context = (void *)1};
static VF_UNUSED struct ibv_cq fake_recv_cq = {.context = &fake_ctx, .cq_context = (void *)2};

#ifdef SPINDLE_HAVE_MLX5DV
/* DC initiator through the extended QP interface. */
static VF_UNUSED struct recorded_wr *dc_current;
static inline void fake_wr_start(struct ibv_qp_ex *qp)
{
    (void)qp;
    rec.dc_starts++;
}
static inline void dc_begin(struct ibv_qp_ex *qp, enum ibv_wr_opcode opcode, uint32_t rkey,
                            uint64_t addr)
{
    dc_current = &rec.wrs[rec.num_wrs++ % MAX_RECORDED];
    *dc_current = (struct recorded_wr){.opcode = opcode,
                                       .flags = qp->wr_flags,
                                       .remote_addr = addr,
                                       .rkey = rkey,
                                       .wr_id = qp->wr_id};
}
static inline void fake_wr_rdma_write(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr)
{
    dc_begin(qp, IBV_WR_RDMA_WRITE, rkey, addr);
}
static inline void fake_wr_rdma_write_imm(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t addr,
                                          __be32 imm)
{
    (void)imm;
    dc_begin(qp, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr);
}
static inline void fake_wr_set_sge(struct ibv_qp_ex *qp, uint32_t lkey, uint64_t addr,
                                   uint32_t length)
{
    (void)qp;
    dc_current->lkey = lkey;
    dc_current->local_addr = addr;
    dc_current->length = length;
}
static inline void fake_wr_set_inline_data(struct ibv_qp_ex *qp, void *addr, size_t length)
{
    (void)qp;
    dc_current->local_addr = (uintptr_t)addr;
    dc_current->length = (uint32_t)length;
    /* Inline data is copied at post time, as the NIC's driver does. */
    memcpy(dc_current->inline_bytes, addr,
           length < sizeof dc_current->inline_bytes ? length : sizeof dc_current->inline_bytes);
}
static inline void fake_wr_set_sge_list(struct ibv_qp_ex *qp, size_t num,
                                        const struct ibv_sge *list)
{
    (void)qp;
    (void)num;
    (void)list;
}
static inline int fake_wr_complete(struct ibv_qp_ex *qp)
{
    (void)qp;
    rec.dc_completes++;
    return 0;
}
static inline void fake_set_dc_addr(struct mlx5dv_qp_ex *mqp, struct ibv_ah *ah, uint32_t dctn,
                                    uint64_t key)
{
    (void)mqp;
    dc_current->ah = ah;
    dc_current->dctn = dctn;
    dc_current->dc_key = key;
}

static VF_UNUSED struct ibv_qp_ex fake_dci_ex = {
    .wr_start = fake_wr_start,
    .wr_rdma_write = fake_wr_rdma_write,
    .wr_rdma_write_imm = fake_wr_rdma_write_imm,
    .wr_set_sge = fake_wr_set_sge,
    .wr_set_inline_data = fake_wr_set_inline_data,
    .wr_set_sge_list = fake_wr_set_sge_list,
    .wr_complete = fake_wr_complete,
};
static VF_UNUSED struct mlx5dv_qp_ex fake_dci_mlx = {.wr_set_dc_addr = fake_set_dc_addr};
#endif

/* Control path: registration records its access flags; the RDMA CM fails,
 * so a background RC connection attempt is counted and fails. */
static VF_UNUSED struct ibv_mr fake_mr = {.lkey = 0x1111, .rkey = 0x2222};
static inline struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    (void)pd;
    (void)addr;
    (void)length;
    rec.reg_access = access;
    return &fake_mr;
}
static inline int fake_dereg_mr(struct ibv_mr *mr)
{
    (void)mr;
    return 0;
}
static inline int fake_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
                                 uint32_t flags, struct ibv_sge *sg, uint32_t num)
{
    (void)pd;
    (void)advice;
    (void)flags;
    (void)sg;
    (void)num;
    return 0;
}

static VF_UNUSED struct ibv_device fake_device = {.name = "fake0"};
static VF_UNUSED struct ibv_device *fake_device_list[2] = {&fake_device, NULL};
static VF_UNUSED struct ibv_pd fake_pd;
static VF_UNUSED struct ibv_comp_channel fake_channel = {.fd = -1};

static inline struct ibv_device **fake_get_device_list(int *num)
{
    *num = 1;
    return fake_device_list;
}
static inline void fake_free_device_list(struct ibv_device **list)
{
    (void)list;
}
static inline struct ibv_context *fake_open_device(struct ibv_device *device)
{
    (void)device;
    return &fake_ctx;
}
static inline int fake_close_device(struct ibv_context *context)
{
    (void)context;
    return 0;
}
static inline int fake_query_device_ex(struct ibv_context *context, struct ibv_device_attr_ex *attr)
{
    (void)context;
    memset(attr, 0, sizeof *attr);
    attr->orig_attr.phys_port_cnt = 1;
    return 0;
}
static inline int fake_query_port(struct ibv_context *context, uint8_t port,
                                  struct ibv_port_attr *attr)
{
    (void)context;
    (void)port;
    memset(attr, 0, sizeof *attr);
    attr->state = IBV_PORT_ACTIVE;
    attr->lid = 5;
    attr->active_mtu = IBV_MTU_4096;
    return 0;
}
static inline int fake_query_gid(struct ibv_context *context, uint8_t port, int index,
                                 union ibv_gid *gid)
{
    (void)context;
    (void)port;
    (void)index;
    memset(gid, 0, sizeof *gid);
    return 0;
}
static inline struct ibv_pd *fake_alloc_pd(struct ibv_context *context)
{
    (void)context;
    return &fake_pd;
}
static inline int fake_dealloc_pd(struct ibv_pd *pd)
{
    (void)pd;
    return 0;
}
static inline struct ibv_comp_channel *fake_create_comp_channel(struct ibv_context *context)
{
    (void)context;
    return &fake_channel;
}
static inline int fake_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    (void)channel;
    return 0;
}
static inline struct ibv_cq *fake_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                            struct ibv_comp_channel *channel, int comp_vector)
{
    (void)context;
    (void)cqe;
    (void)cq_context;
    (void)channel;
    (void)comp_vector;
    return &fake_recv_cq;
}
static inline int fake_destroy_cq(struct ibv_cq *cq)
{
    (void)cq;
    return 0;
}

/* QP state changes requested through verbs_api.modify_qp, in order. */
#define MAX_MODIFIES 64
struct recorded_modify {
    struct ibv_qp *qp;
    struct ibv_qp_attr attr;
    int mask;
};
static VF_UNUSED struct {
    struct recorded_modify calls[MAX_MODIFIES];
    unsigned count;
    int fail_state; /* nonzero: a change to this state (+1) fails with EIO */
} modifies;

static inline int fake_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    if (modifies.fail_state != 0 && (int)attr->qp_state + 1 == modifies.fail_state)
        return EIO;
    if (modifies.count < MAX_MODIFIES)
        modifies.calls[modifies.count++] =
            (struct recorded_modify){.qp = qp, .attr = *attr, .mask = mask};
    if (mask & IBV_QP_STATE)
        qp->state = attr->qp_state;
    return 0;
}

/* Asserts that the recorded changes from index first on move qp through
 * the DCI states RESET (when from_reset) then INIT, RTR, RTS with the DCI
 * attributes of verbs_dci.c; returns the index after them. */
static inline unsigned assert_dci_transitions(unsigned first, struct ibv_qp *qp, int from_reset,
                                              uint8_t port_num, enum ibv_mtu mtu)
{
    unsigned i = first;
    if (from_reset) {
        assert_true(i < modifies.count);
        assert_ptr_equal(modifies.calls[i].qp, qp);
        assert_int_equal(modifies.calls[i].attr.qp_state, IBV_QPS_RESET);
        assert_int_equal(modifies.calls[i].mask, IBV_QP_STATE);
        i++;
    }
    assert_true(i + 3 <= modifies.count);
    const struct recorded_modify *init = &modifies.calls[i], *rtr = init + 1, *rts = init + 2;
    assert_ptr_equal(init->qp, qp);
    assert_int_equal(init->attr.qp_state, IBV_QPS_INIT);
    assert_int_equal(init->mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
    assert_int_equal(init->attr.port_num, port_num);
    assert_int_equal(init->attr.pkey_index, 0);
    assert_ptr_equal(rtr->qp, qp);
    assert_int_equal(rtr->attr.qp_state, IBV_QPS_RTR);
    assert_int_equal(rtr->mask, IBV_QP_STATE | IBV_QP_PATH_MTU);
    assert_int_equal(rtr->attr.path_mtu, mtu);
    assert_ptr_equal(rts->qp, qp);
    assert_int_equal(rts->attr.qp_state, IBV_QPS_RTS);
    assert_int_equal(rts->mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    assert_int_equal(rts->attr.timeout, 14);
    assert_int_equal(rts->attr.retry_cnt, 7);
    assert_int_equal(rts->attr.rnr_retry, 7);
    assert_int_equal(rts->attr.max_rd_atomic, 1);
    assert_int_equal(rts->attr.sq_psn, 0);
    return i + 3;
}

/* Points every verbs_api entry that opens a device at the fake device. */
static inline void fake_install_device(struct verbs_api *api)
{
    api->get_device_list = fake_get_device_list;
    api->free_device_list = fake_free_device_list;
    api->open_device = fake_open_device;
    api->close_device = fake_close_device;
    api->query_device_ex = fake_query_device_ex;
    api->query_port = fake_query_port;
    api->query_gid = fake_query_gid;
    api->alloc_pd = fake_alloc_pd;
    api->dealloc_pd = fake_dealloc_pd;
    api->create_comp_channel = fake_create_comp_channel;
    api->destroy_comp_channel = fake_destroy_comp_channel;
    api->create_cq = fake_create_cq;
    api->destroy_cq = fake_destroy_cq;
}

#endif
