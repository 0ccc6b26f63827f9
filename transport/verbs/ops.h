// The functions the verbs provider's ops table (verbs_provider.cpp) points to, by the file
// that holds them.
#pragma once

#include <vector>

#include <ibex/ibex.h>

#include "transport/provider.h"

namespace ibex::verbs {

// One function per ops-table entry (transport/provider.h): devices and contexts in
// device_ops.cpp, PDs and MRs in memory_ops.cpp, CQs in cq_ops.cpp, QPs and posting in
// qp_ops.cpp. The verbs provider leaves set_faults and query_qp_cc out of its table.
IBEX_PROVIDER_DECLARE_OPS()

} // namespace ibex::verbs
