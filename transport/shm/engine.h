// The shm RC engine: the requester (requester.cpp) turns send WQEs into fragments on the
// peer's request ring and completes them from its responses; the responder
// (responder.cpp) serves the requests on this QP's ring against this context's memory
// regions, so rkey, bounds and access are checked where the memory lives. The copy
// mechanism is chosen in copy.cpp; the progress loop is in context.cpp. All calls with
// the context lock held unless said otherwise.
#pragma once

#include <cstdint>
#include <sys/uio.h>

#include "transport/shm/objects.h"

namespace ibex::shm {

uint64_t now_ns();

// ---- requester.cpp
// Puts as many fragments on the peer's ring as the window, the ring and RNR back-off allow.
bool transmit(ShmQp &qp);
// Consumes the peer's responses; completes WQEs; runs the ack and RNR timers. `now` may
// be 0: the clock is read only when a response or an outstanding WQE needs it.
bool requester_progress(ShmQp &qp, uint64_t &now);
// Earliest timer of the QP (ns), 0 when none.
uint64_t requester_deadline(const ShmQp &qp);

// ---- responder.cpp
bool serve_requests(ShmQp &qp);
// process_vm_writev (to_peer) or process_vm_readv until all `len` bytes moved; false on
// an error or no progress. Advances the iovec arrays it is given.
bool cma_all(bool to_peer, uint32_t pid, iovec *local, unsigned long nl, iovec *remote, unsigned long nr, size_t len);

// ---- qp_state.cpp
// Moves the QP to ERR and flushes both queues (no-op when already there).
void qp_to_error(ShmQp &qp);
void complete(ShmQp &qp, ShmCq *cq, uint64_t wr_id, ibex_wc_status_t st, ibex_wc_opcode_t op, uint32_t len);

// ---- context.cpp
// `now`: the time when the caller has it, else 0 and the clock is read only if a QP needs it.
bool progress_once(ShmContext &ctx, uint64_t now = 0);
// Wakes the context whose shared header this is, when its progress thread sleeps.
void ring_doorbell(CtxShared *peer);

// ---- alloc.cpp
// Publishes (or withdraws) an MR that lies in one of this context's allocations, and
// offers that allocation to every connected peer.
void publish_mr(ShmContext &ctx, const ibex_mr &mr);
void withdraw_mr(ShmContext &ctx, const ibex_mr &mr);
// Sends the peer context the fds of all this context's allocations it lacks.
void offer_allocs(ShmQp &qp);
// Offers again what a peer's full socket queue refused (lock held).
void retry_offers(ShmContext &ctx);
// Initiator: WRITE or READ straight into or out of the peer's allocation when its
// published MR, QP state and access allow it (checked as the target would); false: the
// request goes the usual way, and the target answers it, errors included. place_only: a
// WRITE with immediate whose payload goes straight into the peer's mapping (`map` only),
// leaving the immediate, the receive and the completion to a request that follows.
// GPU memory on either side moves by one cudaMemcpyAsync: with `fence` given (a plain
// WRITE or READ) it is queued and fenced, and the caller completes the WR when the fence
// is done; without it the copy is waited for.
bool direct_copy(ShmQp &qp, const SendWqe &w, bool place_only = false, cuda::CopyFence *fence = nullptr);
// The latency path: a lone WRITE from one SGE into the peer's mapped allocation, with
// nothing queued before it, copied and completed in the post without a WQE. False, with
// nothing done, for anything else: the general path then posts it (and reports errors).
// Opens the QP's in-place lane for the next WRITE between the same two regions
// (post_ops.cpp takes it).
bool write_in_place(ShmQp &qp, const ibex_send_wr_t &wr);

// Opens the context's fd-passing socket (failure only disables `map`).
void open_fd_socket(ShmContext &ctx);
void close_fd_socket(ShmContext &ctx);
// Initiator: the allocation holding [p, p + len) when the peer context may map it (its
// fd sent once); its id and the offset in *id / *off.
bool shared_alloc_of(ShmQp &qp, const void *p, size_t len, uint64_t *id, uint64_t *off);
// Target: where the initiator's bytes [off, off + len) of allocation `id` lie here, or
// nullptr (not received, out of range).
uint8_t *peer_mapping(ShmQp &qp, uint64_t id, uint64_t off, uint64_t len);
// How many peer allocations this context has mapped, once the fds waiting on its socket
// are taken (tests); false when `c` is not shm.
bool mapped_peer_allocs(ibex_context *c, size_t *out);

// ---- gpu.cpp
// p lies in one of this context's MRs over GPU memory (no CUDA call: see device_ranges).
bool is_gpu(const ShmContext &ctx, const void *p);
// Exports the GPU allocation holding mr (once per allocation) and says how its MR is
// published: alloc = kGpuAlloc | export id and the offset in the allocation (0, 0: not
// exported).
void export_gpu(ShmContext &ctx, const ibex_mr &mr, uint64_t *alloc, uint64_t *off);
// Initiator: the export holding [p, p + len), for the target to map (kGpuAlloc | id).
bool gpu_export_of(const ShmContext &ctx, const void *p, size_t len, uint64_t *id, uint64_t *off);
// Where [off, off + len) of the peer's export `id` lies here (a device pointer), mapping it
// on first use; nullptr when it cannot be mapped.
uint8_t *gpu_peer_mapping(ShmQp &qp, uint64_t id, uint64_t off, uint64_t len);
// Whether the peer process still runs (looked at every 100 ms at most): a WRITE or READ
// into a dead peer's mapped GPU memory takes the request path instead, which fails it.
bool peer_lives(ShmQp &qp);
// Closes the peer's GPU mappings when no other QP of this context reaches that peer.
void forget_gpu_peer(ShmQp &qp);
// One copy where either side may be GPU memory; fenced in *fence when given, else waited.
ibex_status_t copy_gpu(void *dst, const void *src, size_t n, cuda::CopyFence *fence = nullptr);
ibex_status_t copy_iovs_gpu(iovec *dst, unsigned long nd, const iovec *src, unsigned long ns, size_t len);
// Waits out the QP's queued GPU copies; completes their WRs flushed when asked.
void flush_gpu_pending(ShmQp &qp, bool complete_flushed);

// ---- copy.cpp
// IBEX_SHM_COPY (map|cma|ring), 0 when unset; logs a bad value once.
uint32_t forced_copy();
// Whether this process may read the peer context's probe word by process_vm_readv.
bool cma_works(uint32_t pid, const CtxShared *peer);
// Logs, once per process and mechanism, that the mechanism is in use and why.
void note_copy_choice(Copy c, const char *why);
const char *copy_name(Copy c);
// The context's payload counters by mechanism (tests, tools); false when `c` is not shm.
bool copy_stats(ibex_context *c, CopyStats *out);

} // namespace ibex::shm
