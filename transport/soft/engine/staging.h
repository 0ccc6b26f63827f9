// CUDA device memory on the soft transports: the engine never touches GPU memory. A
// registered GPU region gets a pinned host shadow of the same size (SoftMr::host), the
// engine reads and writes the shadow through MrTable::resolve, and the copies below keep
// shadow and GPU memory coherent at the points the verbs model makes data visible:
//
//  - data leaving (SEND, WRITE sources): GPU -> shadow queued when the WR is posted, on
//    the library's copy stream, with a fence after each WR's copies; post_send does not
//    wait. The requester sends a WR's first packet only once its fence is done
//    (send_ready), so the copies of the WRs behind it run while it is on the wire: a
//    sender with several WRs posted (the collectives' slices) pipelines GPU -> host
//    copies with the network, and no copy of a whole buffer precedes the first packet;
//  - a remote READ or atomic on a GPU region: GPU -> shadow for the requested range when
//    the request arrives;
//  - data arriving (receive buffers, READ and atomic results, remote WRITEs and atomics
//    into GPU regions): shadow -> GPU before ibex_poll_cq hands out any completion, and
//    in ibex_progress. So a completion's data is on the GPU when the completion is seen;
//    a plain RDMA WRITE (no immediate, no completion at the target) reaches GPU memory at
//    the target's next ibex_poll_cq or ibex_progress call, not before.
//
// Not coherent: GPU writes racing with an outstanding operation on the same bytes (as on
// hardware), and remote atomics on GPU memory are atomic only against other ibex
// operations, not against GPU kernels. Every function here runs with the context lock
// held, except attach(); all are no-ops until a GPU region exists (active()).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ibex/ibex.h>

namespace ibex::soft {

class SoftContext;
struct SoftMr;
struct SoftQp;

namespace staging {

// Some soft context in this process has a GPU region registered.
bool active();

// At registration, before the region is in the table: gives GPU memory its shadow.
// Host memory is left alone (mr.host stays nullptr).
ibex_status_t attach(SoftContext &ctx, SoftMr &mr);
// At deregistration, after the region left the table: copies back what remote writes
// left in the shadow, forgets pending copies into it, frees the shadow.
void detach(SoftContext &ctx, SoftMr &mr);

// MrTable::resolve for a region with a shadow: the shadow address of [addr, addr+len),
// refreshed from the GPU for remote reads/atomics and remembered as dirty for remote
// writes/atomics. nullptr if the refresh failed (the peer then sees an access error).
uint8_t *resolve(SoftMr &mr, uint64_t addr, uint64_t len, unsigned access);

// post_send, after the WR's SGEs resolved and before it is queued at SQ position sq_pos:
// queues the GPU -> shadow copies of an outgoing WR and fences them.
ibex_status_t stage_send(SoftContext &ctx, SoftQp &qp, const ibex_send_wr_t &wr, uint64_t sq_pos);
// The requester, before the first packet of the WQE at sq_pos: its staging copies are
// done (true too when it had none). Never blocks.
bool send_ready(SoftContext &ctx, SoftQp &qp, uint64_t sq_pos);
// Some WQE of the QP still waits for its staging copies (the progress thread then
// comes back soon instead of sleeping until a timer).
bool send_gated(const SoftContext &ctx, const SoftQp &qp);
// post_recv, likewise at RQ position rq_pos.
void stage_recv(SoftContext &ctx, SoftQp &qp, const ibex_recv_wr_t &wr, uint64_t rq_pos);
// Inline data is copied from the SGE addresses directly: they must be host memory.
ibex_status_t check_inline(const ibex_send_wr_t &wr);

// Copies to the GPU everything that has landed in shadows since the last flush: remote
// writes, and the local buffers of every retired WQE.
ibex_status_t flush(SoftContext &ctx);

// The QP's rings were reset or the QP is going away: its pending copies are void.
void forget_qp(SoftContext &ctx, SoftQp &qp);

// Adds [off, off+len) to a set of disjoint (offset, length) ranges, merging what overlaps
// or touches it and nothing else: copying back bytes no remote write touched would
// overwrite what a GPU kernel put there since.
void add_range(std::vector<std::pair<uint64_t, uint64_t>> &ranges, uint64_t off, uint64_t len);

} // namespace staging
} // namespace ibex::soft
