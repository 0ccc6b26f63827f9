// The provider interface. A provider (soft, verbs, ...) fills one ProviderOps table; the
// runtime's C API validates arguments and dispatches through it. An entry left null
// answers IBEX_ERR_NOT_SUPPORTED, so adding an operation touches no provider that lacks it.
//
// The public handle types are defined here as the base of each provider's objects, the
// way rdma-core's providers embed ibv_context: a handle is the provider object itself.
#pragma once

#include <ibex/ibex.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace ibex {
struct ProviderOps;
}

struct ibex_context {
    const ibex::ProviderOps *ops;
    std::string device_name;
};
struct ibex_pd {
    ibex_context *context;
};
struct ibex_mr {
    ibex_pd *pd;
    void *addr;
    size_t length;
    uint32_t lkey;
    uint32_t rkey;
    unsigned access;
};
struct ibex_cq {
    ibex_context *context;
    int cqe;
};
struct ibex_qp {
    ibex_pd *pd;
    ibex_cq *send_cq;
    ibex_cq *recv_cq;
    uint32_t qp_num;
    // pd->context->ops, set by ibex_create_qp: posting dispatches with one load, not three
    // dependent ones (a few ns of an 8-byte WRITE over shm).
    const ibex::ProviderOps *ops = nullptr;
};

namespace ibex {

struct DeviceEntry {
    std::string name;
    std::string provider;
};

// The ops of a provider, one per line: X(return type, name, parameters). ProviderOps holds a
// pointer for each, and IBEX_PROVIDER_DECLARE_OPS() declares a function for each in the
// namespace it stands in, so a provider that spreads its ops over several files takes the
// signatures from here instead of restating them.
#define IBEX_PROVIDER_OPS(X)                                                                        \
    /* Appends the devices this provider can open. Must not fail for "no hardware". */              \
    X(void, list_devices, (std::vector<DeviceEntry> & out))                                         \
    /* True if this provider handles the device name (e.g. "udp:" prefix). */                       \
    X(bool, claims, (const char *device))                                                           \
    X(ibex_status_t, open_device, (const char *device, const ibex_context_attr_t *attr, ibex_context **out)) \
    X(ibex_status_t, close_device, (ibex_context * ctx))                                            \
    X(ibex_status_t, set_faults, (ibex_context * ctx, const ibex_fault_config_t *faults))           \
    X(ibex_status_t, query_counters, (ibex_context * ctx, ibex_counters_t *out))                    \
    /* ibex_query_device: fills a whole structure (zeroed, size set); the runtime hands the */      \
    /* caller as much of it as the caller's size holds. */                                          \
    X(ibex_status_t, query_device, (ibex_context * ctx, ibex_device_attr_t *out))                   \
    X(ibex_status_t, progress, (ibex_context * ctx))                                                \
    X(ibex_status_t, alloc_pd, (ibex_context * ctx, ibex_pd **out))                                 \
    X(ibex_status_t, dealloc_pd, (ibex_pd * pd))                                                    \
    X(ibex_status_t, reg_mr, (ibex_pd * pd, void *addr, size_t length, unsigned access, ibex_mr **out)) \
    X(ibex_status_t, dereg_mr, (ibex_mr * mr))                                                      \
    X(ibex_status_t, create_cq, (ibex_context * ctx, int cqe, ibex_cq **out))                       \
    X(ibex_status_t, destroy_cq, (ibex_cq * cq))                                                    \
    X(ibex_status_t, poll_cq, (ibex_cq * cq, int max, ibex_wc_t *wc, int *count))                   \
    X(ibex_status_t, cq_fd, (ibex_cq * cq, int *fd))                                                \
    X(ibex_status_t, req_notify_cq, (ibex_cq * cq))                                                 \
    X(ibex_status_t, cq_wait, (ibex_cq * cq, int timeout_ms))                                       \
    X(ibex_status_t, create_qp, (ibex_pd * pd, const ibex_qp_init_attr_t *attr, ibex_qp **out))     \
    X(ibex_status_t, destroy_qp, (ibex_qp * qp))                                                    \
    X(ibex_status_t, modify_qp, (ibex_qp * qp, const ibex_qp_attr_t *attr, unsigned mask))          \
    X(ibex_status_t, query_qp, (ibex_qp * qp, ibex_qp_attr_t *attr))                                \
    X(ibex_status_t, qp_local_addr, (ibex_qp * qp, ibex_ep_addr_t *addr))                           \
    X(ibex_status_t, post_send, (ibex_qp * qp, ibex_send_wr_t *wr, ibex_send_wr_t **bad_wr))        \
    X(ibex_status_t, post_recv, (ibex_qp * qp, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad_wr))        \
    /* Congestion control (DCQCN) state of one QP; `out->size` already checked. */                  \
    X(ibex_status_t, query_qp_cc, (ibex_qp * qp, ibex_qp_cc_t *out))                                \
    /* ibex_mem_alloc / ibex_mem_free where the provider backs buffers itself (shm: memfd */         \
    /* memory shared with peers). Null: the runtime hands out page-aligned anonymous memory. */      \
    X(ibex_status_t, mem_alloc, (ibex_pd * pd, size_t size, void **out))                            \
    X(ibex_status_t, mem_free, (ibex_pd * pd, void *ptr))                                           \
    /* ibex_rkey_ptr where the provider maps peers' memory (shm); arguments already checked. */     \
    X(ibex_status_t, rkey_ptr, (ibex_qp * qp, uint64_t remote_addr, uint32_t rkey, size_t length,    \
                                unsigned access, void **out))                                        \
    /* Retransmission counters of one QP; `out->size` already checked. */                           \
    X(ibex_status_t, query_qp_retransmit, (ibex_qp * qp, ibex_qp_retransmit_t *out))

#define IBEX_PROVIDER_OP_POINTER_(ret, op, params) ret(*op) params;
#define IBEX_PROVIDER_OP_DECLARATION_(ret, op, params) ret op params;
#define IBEX_PROVIDER_DECLARE_OPS() IBEX_PROVIDER_OPS(IBEX_PROVIDER_OP_DECLARATION_)

// An entry left null answers IBEX_ERR_NOT_SUPPORTED.
struct ProviderOps {
    const char *name;
    IBEX_PROVIDER_OPS(IBEX_PROVIDER_OP_POINTER_)
};

// Copies a counter snapshot into the caller's structure of out->size bytes (an older,
// smaller layout included), for query_counters.
inline void copy_counters(ibex_counters_t snap, ibex_counters_t *out) {
    snap.size = out->size;
    std::memcpy(out, &snap, std::min<size_t>(out->size, sizeof snap));
}

// Every provider built into this library, in the order devices are listed.
const std::vector<const ProviderOps *> &providers();
// The provider that claims a device name, or nullptr.
const ProviderOps *provider_for(const char *device);

// Defined by each provider.
extern const ProviderOps kSoftProviderOps;
// rdma-core verbs (transport/verbs), when built (IBEX_HAVE_VERBS).
extern const ProviderOps kVerbsProviderOps;
// Processes of one host (transport/shm).
extern const ProviderOps kShmProviderOps;

} // namespace ibex
