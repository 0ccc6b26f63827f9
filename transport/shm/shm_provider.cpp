// The shm provider: RC queue pairs between processes of one host (README.md). Fault
// injection and congestion control have no meaning here and answer "not supported".
#include "transport/provider.h"
#include "transport/shm/shm_ops.h"

namespace ibex {

const ProviderOps kShmProviderOps = {
    .name = "shm",
    .list_devices = shm::list_devices,
    .claims = shm::claims,
    .open_device = shm::open_device,
    .close_device = shm::close_device,
    .set_faults = nullptr,
    .query_counters = shm::query_counters,
    .query_device = shm::query_device,
    .progress = shm::progress,
    .alloc_pd = shm::alloc_pd,
    .dealloc_pd = shm::dealloc_pd,
    .reg_mr = shm::reg_mr,
    .dereg_mr = shm::dereg_mr,
    .create_cq = shm::create_cq,
    .destroy_cq = shm::destroy_cq,
    .poll_cq = shm::poll_cq,
    .cq_fd = shm::cq_fd,
    .req_notify_cq = shm::req_notify_cq,
    .cq_wait = shm::cq_wait,
    .create_qp = shm::create_qp,
    .destroy_qp = shm::destroy_qp,
    .modify_qp = shm::modify_qp,
    .query_qp = shm::query_qp,
    .qp_local_addr = shm::qp_local_addr,
    .post_send = shm::post_send,
    .post_recv = shm::post_recv,
    .query_qp_cc = nullptr,
    .mem_alloc = shm::mem_alloc,
    .mem_free = shm::mem_free,
    .rkey_ptr = shm::rkey_ptr,
};

} // namespace ibex
