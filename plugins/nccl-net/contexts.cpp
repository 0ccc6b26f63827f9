// The v11+ contexts. From v11 NCCL initialises the plugin once per communicator, hands
// the context it gets back to that communicator's listen, connect and setNetAttr, and
// finalizes it when the communicator goes. The devices are opened once for the process
// (init is idempotent), so a context only names its communicator; it is a
// generation-checked handle like every other object, so a finalized or foreign context
// is refused, not dereferenced.
#include <cinttypes>
#include <mutex>

#include "plugins/nccl-net/state.h"

namespace ibex_nccl {

ncclResult_t init_context(void **ctx, uint64_t comm_id, const ncclNetCommConfig_v11_t *config,
                          ncclDebugLogger_t logger) {
    if (ctx == nullptr)
        return ncclInvalidArgument;
    *ctx = nullptr;
    const ncclResult_t r = init(logger);
    if (r != ncclSuccess)
        return r;
    std::lock_guard<std::mutex> lock(plugin().mu);
    auto [handle, context] = plugin().contexts.add();
    if (handle == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : too many communicators hold the plugin (no finalize?)");
        return ncclSystemError;
    }
    context->comm_id = comm_id;
    context->traffic_class = config != nullptr ? config->trafficClass : -1;
    *ctx = handle;
    IBEX_NCCL_INFO("NET/IBEX : communicator %" PRIx64 " attached (traffic class %d)", comm_id,
                   context->traffic_class);
    return ncclSuccess;
}

ncclResult_t finalize_context(void *ctx) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    if (plugin().contexts.get(ctx) == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : finalize: %p is not a live context", ctx);
        return ncclInvalidArgument;
    }
    plugin().contexts.remove(ctx);
    return ncclSuccess;
}

bool context_valid(const void *ctx) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    if (plugin().contexts.get(ctx) != nullptr)
        return true;
    IBEX_NCCL_WARN("NET/IBEX : %p is not a context from init (finalized, or never made)", ctx);
    return false;
}

int context_traffic_class(const void *ctx) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    const NetContext *context = plugin().contexts.get(ctx);
    return context != nullptr ? context->traffic_class : -1;
}

ncclResult_t set_net_attr(void *ctx, const ncclNetAttr_v11_t *attr) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    NetContext *context = plugin().contexts.get(ctx);
    if (context == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : setNetAttr: %p is not a live context", ctx);
        return ncclInvalidArgument;
    }
    // Hints on peers and flows per comm: ibex runs one QP per comm whatever they say,
    // so they are recorded (and logged), not acted on. NULL means "no hints".
    context->has_attr = attr != nullptr;
    if (attr != nullptr) {
        context->attr = *attr;
        IBEX_NCCL_INFO("NET/IBEX : communicator %" PRIx64 " hints: send peers %d-%d flows %d-%d, "
                       "recv peers %d-%d flows %d-%d (recorded; one QP per comm regardless)",
                       context->comm_id, attr->sendCommAttr.minConcurrentPeers,
                       attr->sendCommAttr.maxConcurrentPeers, attr->sendCommAttr.minFlowsPerPeer,
                       attr->sendCommAttr.maxFlowsPerPeer, attr->recvCommAttr.minConcurrentPeers,
                       attr->recvCommAttr.maxConcurrentPeers, attr->recvCommAttr.minFlowsPerPeer,
                       attr->recvCommAttr.maxFlowsPerPeer);
    }
    return ncclSuccess;
}

} // namespace ibex_nccl
