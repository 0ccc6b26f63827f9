// The soft provider's operations (the ops table in soft_provider.cpp), one file per kind
// of object: context_ops.cpp, memory_ops.cpp (PDs, MRs), cq_ops.cpp, qp_ops.cpp and
// post_ops.cpp. Argument shapes (null handles, struct sizes) are checked by the runtime
// before these run; each op checks what needs the engine's state, takes the context lock
// and calls the engine (transport/soft/engine).
#pragma once

#include <mutex>
#include <vector>

#include <ibex/ibex.h>

#include "transport/provider.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/engine/objects.h"

namespace ibex::soft::ops {

using Lock = std::lock_guard<std::mutex>;

inline SoftContext *ctx_of(ibex_pd *pd) { return static_cast<SoftPd *>(pd)->ctx; }
inline SoftQp *qp_of(ibex_qp *qp) { return static_cast<SoftQp *>(qp); }
inline SoftCq *cq_of(ibex_cq *cq) { return static_cast<SoftCq *>(cq); }

// One function per ops-table entry (transport/provider.h), spread over context_ops.cpp,
// memory_ops.cpp, cq_ops.cpp, qp_ops.cpp and post_ops.cpp; query_qp_cc is
// soft::query_qp_cc (engine/congestion_control.cpp).
IBEX_PROVIDER_DECLARE_OPS()

} // namespace ibex::soft::ops
