/*
 * The table of real rdma-core control-path functions and its test setter.
 * Header-inline verbs get a small wrapper so they have an address.
 */
#include "transport/verbs/verbs_impl.h"

static int api_query_device_ex(struct ibv_context *context, struct ibv_device_attr_ex *attr)
{
    return ibv_query_device_ex(context, NULL, attr);
}

static int api_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
    return ibv_query_port(context, port, attr);
}

static int api_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
                         struct ibv_sge *sg_list, uint32_t num_sge)
{
    return ibv_advise_mr(pd, advice, flags, sg_list, num_sge);
}

static struct ibv_context *api_open_device(struct ibv_device *device)
{
    return ibv_open_device(device);
}

static struct ibv_mr *api_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    /* ibv_reg_mr is a macro choosing ibv_reg_mr_iova2 for some flags. */
    return ibv_reg_mr(pd, addr, length, access);
}

static const struct verbs_api real_api = {
    .get_device_list = ibv_get_device_list,
    .free_device_list = ibv_free_device_list,
    .open_device = api_open_device,
    .close_device = ibv_close_device,
    .query_device_ex = api_query_device_ex,
    .query_port = api_query_port,
    .query_gid = ibv_query_gid,
    .alloc_pd = ibv_alloc_pd,
    .dealloc_pd = ibv_dealloc_pd,
    .create_comp_channel = ibv_create_comp_channel,
    .destroy_comp_channel = ibv_destroy_comp_channel,
    .create_cq = ibv_create_cq,
    .destroy_cq = ibv_destroy_cq,
    .get_cq_event = ibv_get_cq_event,
    .ack_cq_events = ibv_ack_cq_events,
    .reg_mr = api_reg_mr,
    .dereg_mr = ibv_dereg_mr,
    .advise_mr = api_advise_mr,
    .create_qp = ibv_create_qp,
    .modify_qp = ibv_modify_qp,
    .destroy_qp = ibv_destroy_qp,
    .create_srq = ibv_create_srq,
    .destroy_srq = ibv_destroy_srq,
    .create_ah = ibv_create_ah,
    .destroy_ah = ibv_destroy_ah,
    .rdma_create_event_channel = rdma_create_event_channel,
    .rdma_destroy_event_channel = rdma_destroy_event_channel,
    .rdma_create_id = rdma_create_id,
    .rdma_destroy_id = rdma_destroy_id,
    .rdma_bind_addr = rdma_bind_addr,
    .rdma_listen = rdma_listen,
    .rdma_resolve_addr = rdma_resolve_addr,
    .rdma_resolve_route = rdma_resolve_route,
    .rdma_connect = rdma_connect,
    .rdma_accept = rdma_accept,
    .rdma_reject = rdma_reject,
    .rdma_establish = rdma_establish,
    .rdma_disconnect = rdma_disconnect,
    .rdma_init_qp_attr = rdma_init_qp_attr,
    .rdma_get_cm_event = rdma_get_cm_event,
    .rdma_ack_cm_event = rdma_ack_cm_event,
#ifdef SPINDLE_HAVE_MLX5DV
    .mlx5dv_query_device = mlx5dv_query_device,
    .mlx5dv_create_qp = mlx5dv_create_qp,
    .qp_to_qp_ex = ibv_qp_to_qp_ex,
    .mlx5dv_qp_ex_from_ibv_qp_ex = mlx5dv_qp_ex_from_ibv_qp_ex,
#endif
};

static const struct verbs_api *_Atomic current_api = &real_api;

const struct verbs_api *verbs_api_get(void)
{
    return atomic_load_explicit(&current_api, memory_order_acquire);
}

/* The injectable verbs table (verbs_impl.h): the seam through which the unit
 * tests put a fake device under the backend, so hardware code runs without
 * a NIC. Only tests install a table; the library always runs on real_api. */
/* cppcheck-suppress unusedFunction */
void verbs_api_set(const struct verbs_api *api)
{
    atomic_store_explicit(&current_api, api != NULL ? api : &real_api, memory_order_release);
}

/* The other half of that seam: a fake starts from the real table and
 * replaces the entries it fakes. Used by tests only, as above. */
/* cppcheck-suppress unusedFunction */
const struct verbs_api *verbs_api_default(void)
{
    return &real_api;
}
