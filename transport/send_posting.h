// The provider-independent part of the software providers' send posting (soft, shm), run
// with the context lock held: the WR's shape is checked, its local buffers are resolved
// against the context's regions (or, inline, copied into the WQE), and the remote side
// and flags are taken over. What a WQE means on the wire stays each provider's own.
#pragma once

#include <cstdint>
#include <cstring>

#include <ibex/ibex.h>

#include "runtime/base/c_enum.h"
#include "runtime/base/status.h"
#include "transport/qp_state.h"

namespace ibex {

inline constexpr uint64_t kMaxSoftMessage = 1ull << 31;

inline bool is_atomic_wr(int opcode) { return opcode == IBEX_WR_ATOMIC_CMP_AND_SWP || opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD; }

// Resolves SGEs against an MR table (find(key), resolve(key, addr, len, access)); `need`
// is the local right the operation needs. Zero-length SGEs are dropped.
template <class Mrs, class List>
ibex_status_t resolve_sges(const Mrs &mrs, const ibex_sge_t *sg, int n, unsigned need, List *out) {
    out->count = 0;
    out->total = 0;
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) {
        if (!sg[i].length) continue;
        uint8_t *p = mrs.resolve(sg[i].lkey, sg[i].addr, sg[i].length, need);
        if (!p) {
            if (!mrs.find(sg[i].lkey))
                return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: lkey 0x%x is not a registered memory region", i, sg[i].lkey);
            if (!mrs.resolve(sg[i].lkey, sg[i].addr, sg[i].length, 0))
                return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: [0x%llx, +%u) lies outside memory region 0x%x", i,
                            static_cast<unsigned long long>(sg[i].addr), sg[i].length, sg[i].lkey);
            return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: memory region 0x%x lacks IBEX_ACCESS_LOCAL_WRITE", i,
                        sg[i].lkey);
        }
        out->sge[out->count++] = {p, sg[i].length};
        total += sg[i].length;
    }
    if (total > kMaxSoftMessage)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "message of %llu bytes exceeds 2 GiB", static_cast<unsigned long long>(total));
    out->total = static_cast<uint32_t>(total);
    return IBEX_OK;
}

enum class SendAdmit { post, flush };

// May this WR become a WQE? `flush`: the QP is in ERR, and the WR completes flushed.
template <class Qp>
ibex_status_t admit_send(const Qp &qp, const ibex_send_wr_t &wr, int max_sge, SendAdmit *out) {
    if (!c_enum_in(wr.opcode, IBEX_WR_RDMA_WRITE, IBEX_WR_ATOMIC_FETCH_AND_ADD))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "unknown work request opcode %d", c_enum_value(wr.opcode));
    if (wr.num_sge < 0 || wr.num_sge > max_sge || (wr.num_sge && !wr.sg_list))
        return fail(IBEX_ERR_INVALID_ARGUMENT, "num_sge %d out of range (0..%d) or sg_list missing", wr.num_sge, max_sge);
    *out = qp.state == IBEX_QPS_ERR ? SendAdmit::flush : SendAdmit::post;
    if (*out == SendAdmit::flush) return IBEX_OK;
    if (qp.state != IBEX_QPS_RTS)
        return fail(IBEX_ERR_INVALID_STATE, "QP 0x%x is in %s; post_send needs RTS", qp.qp_num, qp_state_name(qp.state));
    if (qp.sq.full()) return fail(IBEX_ERR_QUEUE_FULL, "send queue of QP 0x%x is full (%zu)", qp.qp_num, qp.sq.capacity());
    return IBEX_OK;
}

// Fills a send WQE from its WR: the local buffers (inline: copied into w.inline_data; else
// resolved by resolve(sg_list, num_sge, need, &w.local)), the remote address and key or the
// atomic operands, and the flags. Nothing is queued.
template <class Wqe, class Resolve>
ibex_status_t fill_send_wqe(const ibex_send_wr_t &wr, Wqe &w, Resolve resolve) {
    const bool atomic = is_atomic_wr(wr.opcode);
    const bool read = wr.opcode == IBEX_WR_RDMA_READ;
    if ((wr.send_flags & IBEX_SEND_INLINE) && !read && !atomic) {
        uint64_t total = 0;
        for (int i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
        if (total > sizeof w.inline_data)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "inline data of %llu bytes exceeds %zu",
                        static_cast<unsigned long long>(total), sizeof w.inline_data);
        uint32_t off = 0;
        for (int i = 0; i < wr.num_sge; ++i) {
            std::memcpy(w.inline_data + off, reinterpret_cast<const void *>(static_cast<uintptr_t>(wr.sg_list[i].addr)),
                        wr.sg_list[i].length);
            off += wr.sg_list[i].length;
        }
        w.local.count = off ? 1 : 0;
        w.local.sge[0] = {w.inline_data, off};
        w.local.total = off;
    } else {
        IBEX_TRY(resolve(wr.sg_list, wr.num_sge, (read || atomic) ? unsigned(IBEX_ACCESS_LOCAL_WRITE) : 0u, &w.local));
    }
    if (atomic) {
        if (w.local.total != 8)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "an atomic needs exactly 8 bytes of local buffer (got %u)", w.local.total);
        if (wr.wr.atomic.remote_addr & 7)
            return fail(IBEX_ERR_INVALID_ARGUMENT, "atomic remote address 0x%llx is not 8-byte aligned",
                        static_cast<unsigned long long>(wr.wr.atomic.remote_addr));
        w.remote_addr = wr.wr.atomic.remote_addr;
        w.rkey = wr.wr.atomic.rkey;
        w.compare_add = wr.wr.atomic.compare_add;
        w.swap = wr.wr.atomic.swap;
    } else {
        w.remote_addr = wr.wr.rdma.remote_addr;
        w.rkey = wr.wr.rdma.rkey;
    }
    w.wr_id = wr.wr_id;
    w.opcode = static_cast<uint8_t>(wr.opcode);
    w.signaled = (wr.send_flags & IBEX_SEND_SIGNALED) != 0;
    w.solicited = (wr.send_flags & IBEX_SEND_SOLICITED) != 0;
    w.fence = (wr.send_flags & IBEX_SEND_FENCE) != 0;
    w.imm = wr.imm_data;
    return IBEX_OK;
}

} // namespace ibex
