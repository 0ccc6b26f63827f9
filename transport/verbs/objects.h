// The verbs provider's objects: each ibex object of transport/provider.h wrapping the
// libibverbs object it stands for, with the counts that keep a parent alive while its
// children are.
#pragma once

#include <cstdint>
#include <mutex>

#include <infiniband/verbs.h>

#include "transport/provider.h"
#include "transport/verbs/gpu_reg.h"
#include "transport/verbs/qp_attr.h"

namespace ibex::verbs {

using Lock = std::lock_guard<std::mutex>;

constexpr int kBacklog = 64; // completions req_notify/cq_wait may take ahead

struct VerbsContext : ibex_context {
    ibv_context *ibv = nullptr;
    PortFacts port;
    uint64_t max_msg_size = 0; // the port's max_msg_sz
    uint8_t traffic_class = 0; // IBEX_TRAFFIC_CLASS default for new QPs
    ibv_gid gid{};
    bool peermem = false;
    GpuRegMode gpu_mode = GpuRegMode::kAuto;
    std::mutex mutex;
    int live = 0; // PDs and CQs
};

struct VerbsPd : ibex_pd {
    VerbsContext *vctx = nullptr;
    ibv_pd *ibv = nullptr;
    int users = 0; // MRs and QPs, under vctx->mutex
};

struct VerbsMr : ibex_mr {
    ibv_mr *ibv = nullptr;
    RegPath path = RegPath::kHost;
};

struct VerbsCq : ibex_cq {
    VerbsContext *vctx = nullptr;
    ibv_cq *ibv = nullptr;
    ibv_comp_channel *channel = nullptr;
    int event_fd = -1; // readable when the backlog holds completions
    int epoll_fd = -1; // what ibex_cq_fd hands out: channel fd + event_fd
    std::mutex mutex;  // the backlog
    ibex_wc_t backlog[kBacklog];
    int backlog_head = 0;
    int backlog_count = 0;
    int users = 0;
};

struct VerbsQp : ibex_qp {
    VerbsContext *vctx = nullptr;
    ibv_qp *ibv = nullptr;
    std::mutex mutex;
    QpMemory mem;
};

inline VerbsContext *vctx_of(ibex_context *c) { return static_cast<VerbsContext *>(c); }
inline VerbsPd *pd_of(ibex_pd *p) { return static_cast<VerbsPd *>(p); }
inline VerbsCq *cq_of(ibex_cq *c) { return static_cast<VerbsCq *>(c); }
inline VerbsQp *qp_of(ibex_qp *q) { return static_cast<VerbsQp *>(q); }

} // namespace ibex::verbs
