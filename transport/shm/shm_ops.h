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

void list_devices(std::vector<DeviceEntry> &out);
bool claims(const char *device);
ibex_status_t open_device(const char *device, const ibex_context_attr_t *attr, ibex_context **out);
ibex_status_t close_device(ibex_context *c);
ibex_status_t query_counters(ibex_context *c, ibex_counters_t *out);
ibex_status_t progress(ibex_context *c);

ibex_status_t alloc_pd(ibex_context *c, ibex_pd **out);
ibex_status_t dealloc_pd(ibex_pd *p);
ibex_status_t reg_mr(ibex_pd *pd, void *addr, size_t length, unsigned access, ibex_mr **out);
ibex_status_t dereg_mr(ibex_mr *mr);
// alloc.cpp: ibex_mem_alloc memory (memfd, shared with peers for `map`)
ibex_status_t mem_alloc(ibex_pd *pd, size_t size, void **out);
ibex_status_t mem_free(ibex_pd *pd, void *ptr);

ibex_status_t create_cq(ibex_context *c, int cqe, ibex_cq **out);
ibex_status_t destroy_cq(ibex_cq *c);
ibex_status_t poll_cq(ibex_cq *c, int max, ibex_wc_t *wc, int *count);
ibex_status_t cq_fd(ibex_cq *c, int *fd);
ibex_status_t req_notify_cq(ibex_cq *c);
ibex_status_t cq_wait(ibex_cq *c, int timeout_ms);

ibex_status_t create_qp(ibex_pd *pd, const ibex_qp_init_attr_t *a, ibex_qp **out);
ibex_status_t destroy_qp(ibex_qp *q);
ibex_status_t modify_qp(ibex_qp *q, const ibex_qp_attr_t *a, unsigned mask);
ibex_status_t query_qp(ibex_qp *q, ibex_qp_attr_t *a);
ibex_status_t qp_local_addr(ibex_qp *q, ibex_ep_addr_t *out);

ibex_status_t post_send(ibex_qp *q, ibex_send_wr_t *wr, ibex_send_wr_t **bad);
ibex_status_t post_recv(ibex_qp *q, ibex_recv_wr_t *wr, ibex_recv_wr_t **bad);

} // namespace ibex::shm
