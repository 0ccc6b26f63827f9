// The soft provider: verbs objects on top of the soft RC engine. The ops live in
// context_ops.cpp, memory_ops.cpp, cq_ops.cpp, qp_ops.cpp and post_ops.cpp (soft_ops.h);
// the DCQCN query in engine/congestion_control.cpp, the retransmission counters in
// engine/retransmit_query.cpp.
#include "transport/provider.h"
#include "transport/soft/engine/congestion_control.h"
#include "transport/soft/engine/qp_logic.h"
#include "transport/soft/soft_ops.h"

namespace ibex {

const ProviderOps kSoftProviderOps = {
    .name = "soft",
    .list_devices = soft::ops::list_devices,
    .claims = soft::ops::claims,
    .open_device = soft::ops::open_device,
    .close_device = soft::ops::close_device,
    .set_faults = soft::ops::set_faults,
    .query_counters = soft::ops::query_counters,
    .query_device = soft::ops::query_device,
    .progress = soft::ops::progress,
    .alloc_pd = soft::ops::alloc_pd,
    .dealloc_pd = soft::ops::dealloc_pd,
    .reg_mr = soft::ops::reg_mr,
    .dereg_mr = soft::ops::dereg_mr,
    .create_cq = soft::ops::create_cq,
    .destroy_cq = soft::ops::destroy_cq,
    .poll_cq = soft::ops::poll_cq,
    .cq_fd = soft::ops::cq_fd,
    .req_notify_cq = soft::ops::req_notify_cq,
    .cq_wait = soft::ops::cq_wait,
    .create_qp = soft::ops::create_qp,
    .destroy_qp = soft::ops::destroy_qp,
    .modify_qp = soft::ops::modify_qp,
    .query_qp = soft::ops::query_qp,
    .qp_local_addr = soft::ops::qp_local_addr,
    .post_send = soft::ops::post_send,
    .post_recv = soft::ops::post_recv,
    .query_qp_cc = soft::query_qp_cc,
    .query_qp_retransmit = soft::query_qp_retransmit,
};

} // namespace ibex
