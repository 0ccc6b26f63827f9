// The provider interface. A provider (soft, verbs, ...) fills one ProviderOps table; the
// runtime's C API validates arguments and dispatches through it. An entry left null
// answers IBEX_ERR_NOT_SUPPORTED, so adding an operation touches no provider that lacks it.
//
// The public handle types are defined here as the base of each provider's objects, the
// way rdma-core's providers embed ibv_context: a handle is the provider object itself.
#pragma once

#include <ibex/ibex.h>

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
};

namespace ibex {

struct DeviceEntry {
    std::string name;
    std::string provider;
};

struct ProviderOps {
    const char *name;
    // Appends the devices this provider can open. Must not fail for "no hardware".
    void (*list_devices)(std::vector<DeviceEntry> &out);
    // True if this provider handles the device name (e.g. "udp:" prefix).
    bool (*claims)(const char *device);

    ibex_status_t (*open_device)(const char *device, const ibex_context_attr_t *attr, ibex_context **out);
    ibex_status_t (*close_device)(ibex_context *ctx);
    ibex_status_t (*set_faults)(ibex_context *ctx, const ibex_fault_config_t *faults);
    ibex_status_t (*query_counters)(ibex_context *ctx, ibex_counters_t *out);
    ibex_status_t (*progress)(ibex_context *ctx);

    ibex_status_t (*alloc_pd)(ibex_context *ctx, ibex_pd **out);
    ibex_status_t (*dealloc_pd)(ibex_pd *pd);
    ibex_status_t (*reg_mr)(ibex_pd *pd, void *addr, size_t length, unsigned access, ibex_mr **out);
    ibex_status_t (*dereg_mr)(ibex_mr *mr);

    ibex_status_t (*create_cq)(ibex_context *ctx, int cqe, ibex_cq **out);
    ibex_status_t (*destroy_cq)(ibex_cq *cq);
    ibex_status_t (*poll_cq)(ibex_cq *cq, int max, ibex_wc_t *wc, int *count);
    ibex_status_t (*cq_fd)(ibex_cq *cq, int *fd);
    ibex_status_t (*req_notify_cq)(ibex_cq *cq);
    ibex_status_t (*cq_wait)(ibex_cq *cq, int timeout_ms);

    ibex_status_t (*create_qp)(ibex_pd *pd, const ibex_qp_init_attr_t *attr, ibex_qp **out);
    ibex_status_t (*destroy_qp)(ibex_qp *qp);
    ibex_status_t (*modify_qp)(ibex_qp *qp, const ibex_qp_attr_t *attr, unsigned mask);
    ibex_status_t (*query_qp)(ibex_qp *qp, ibex_qp_attr_t *attr);
    ibex_status_t (*qp_local_addr)(ibex_qp *qp, ibex_ep_addr_t *addr);
    ibex_status_t (*post_send)(ibex_qp *qp, ibex_send_wr_t *wr, ibex_send_wr_t **bad_wr);
    ibex_status_t (*post_recv)(ibex_qp *qp, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad_wr);

    // Congestion control (DCQCN) state of one QP; `out->size` already checked.
    ibex_status_t (*query_qp_cc)(ibex_qp *qp, ibex_qp_cc_t *out);
    // Retransmission counters of one QP; `out->size` already checked.
    ibex_status_t (*query_qp_retransmit)(ibex_qp *qp, ibex_qp_retransmit_t *out);
};

// Every provider built into this library, in the order devices are listed.
const std::vector<const ProviderOps *> &providers();
// The provider that claims a device name, or nullptr.
const ProviderOps *provider_for(const char *device);

// Defined by each provider.
extern const ProviderOps kSoftProviderOps;
// rdma-core verbs (transport/verbs), when built (IBEX_HAVE_VERBS).
extern const ProviderOps kVerbsProviderOps;

} // namespace ibex
