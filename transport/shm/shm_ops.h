// The shm provider's operations (the table in shm_provider.cpp), one file per kind of
// object: context.cpp, memory_ops.cpp (PDs, MRs), cq_ops.cpp, qp_ops.cpp, post_ops.cpp.
// The runtime checks argument shapes before these run.
#pragma once

#include <mutex>
#include <vector>

#include "transport/provider.h"
#include "transport/shm/objects.h"

namespace ibex::shm {

using Lock = std::lock_guard<std::mutex>;

// One function per ops-table entry (transport/provider.h); set_faults and query_qp_cc are
// left out of the table (shm injects no faults and runs no congestion control).
IBEX_PROVIDER_DECLARE_OPS()

} // namespace ibex::shm
