// The verbs provider's ops table: ibex objects over libibverbs objects on a real RNIC.
// The hardware does RoCE v2, retransmission and DCQCN; the provider translates (through
// the pure pieces: qp_attr, work_map, gid_select, gpu_reg) and owns the objects' lifetime.
// The table's functions live by job: device_ops.cpp, memory_ops.cpp, cq_ops.cpp, qp_ops.cpp.
#include "transport/provider.h"
#include "transport/verbs/ops.h"

namespace ibex {

const ProviderOps kVerbsProviderOps = {
    .name = "verbs",
    .list_devices = verbs::list_devices,
    .claims = verbs::claims,
    .open_device = verbs::open_device,
    .close_device = verbs::close_device,
    .set_faults = nullptr,
    .query_counters = verbs::query_counters,
    .query_device = verbs::query_device,
    .progress = verbs::progress,
    .alloc_pd = verbs::alloc_pd,
    .dealloc_pd = verbs::dealloc_pd,
    .reg_mr = verbs::reg_mr,
    .dereg_mr = verbs::dereg_mr,
    .create_cq = verbs::create_cq,
    .destroy_cq = verbs::destroy_cq,
    .poll_cq = verbs::poll_cq,
    .cq_fd = verbs::cq_fd,
    .req_notify_cq = verbs::req_notify_cq,
    .cq_wait = verbs::cq_wait,
    .create_qp = verbs::create_qp,
    .destroy_qp = verbs::destroy_qp,
    .modify_qp = verbs::modify_qp,
    .query_qp = verbs::query_qp,
    .qp_local_addr = verbs::qp_local_addr,
    .post_send = verbs::post_send,
    .post_recv = verbs::post_recv,
};

} // namespace ibex
