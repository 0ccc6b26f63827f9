#include "allreduce/op.h"

#include <algorithm>

#include "runtime/base/status.h"

namespace ibex::coll {

const char *op_kind_name(OpKind k) {
    switch (k) {
    case OpKind::allreduce: return "allreduce";
    case OpKind::reduce_scatter: return "reduce_scatter";
    case OpKind::allgather: return "allgather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce: return "reduce";
    case OpKind::barrier: return "barrier";
    case OpKind::probe: return "probe";
    case OpKind::alltoall: return "alltoall";
    case OpKind::alltoallv: return "alltoallv";
    case OpKind::p2p: return "send/recv";
    }
    return "?";
}

OpBytes op_bytes(const Op &op, int rank, int nranks) {
    const size_t bytes = op.args.count * ibex_datatype_size(op.args.type), n = static_cast<size_t>(nranks);
    switch (op.kind) {
    case OpKind::allreduce: return {bytes, bytes, true};
    case OpKind::broadcast: return {rank == op.args.root ? bytes : 0, bytes, true};
    case OpKind::reduce: return {bytes, rank == op.args.root ? bytes : 0, true};
    case OpKind::reduce_scatter: return {n * bytes, bytes, false};
    case OpKind::allgather: return {bytes, n * bytes, false};
    case OpKind::alltoall: return {n * bytes, n * bytes, false};
    case OpKind::alltoallv: {
        // The extent of each side: from the buffer's start to the end of its last block.
        const AlltoallvBlocks b = alltoallv_blocks(op, nranks);
        const size_t elem = ibex_datatype_size(op.args.type);
        size_t send = 0, recv = 0;
        for (size_t p = 0; p < n && b.sendcounts.size() == n; ++p) {
            if (b.sendcounts[p]) send = std::max(send, (b.sdispls[p] + b.sendcounts[p]) * elem);
            if (b.recvcounts[p]) recv = std::max(recv, (b.rdispls[p] + b.recvcounts[p]) * elem);
        }
        return {send, recv, false};
    }
    case OpKind::barrier:
    case OpKind::probe:
    case OpKind::p2p: break; // buffers of its own per piece
    }
    return {};
}

AlltoallvBlocks alltoallv_blocks(const Op &op, int nranks) {
    const size_t n = static_cast<size_t>(nranks);
    if (op.blocks.size() != 4 * n) return {};
    const std::span<const size_t> all(op.blocks);
    return {all.subspan(0, n), all.subspan(n, n), all.subspan(2 * n, n), all.subspan(3 * n, n)};
}

namespace {

bool reduces(OpKind k) { return k == OpKind::allreduce || k == OpKind::reduce_scatter || k == OpKind::reduce; }
const char *kind_name(uint32_t call) { return op_kind_name(static_cast<OpKind>(call >> 16)); }
const char *type_name(uint32_t call) {
    const uint32_t t = call & 0xff;
    return t < IBEX_DATATYPE_COUNT ? ibex_datatype_name(static_cast<ibex_datatype_t>(t)) : "?";
}
const char *op_name(uint32_t call) {
    const uint32_t o = (call >> 8) & 0xff;
    return o < IBEX_REDOP_COUNT ? ibex_redop_name(static_cast<ibex_redop_t>(o)) : "?";
}

} // namespace

uint32_t call_word(const Op &op) {
    return uint32_t(op.args.type) | (reduces(op.kind) ? uint32_t(op.args.op) << 8 : 0) | uint32_t(op.kind) << 16;
}

ibex_status_t call_mismatch(int q, uint32_t call, uint64_t count, int root, uint32_t my_call, uint64_t my_count,
                            int my_root) {
    return fail(IBEX_ERR_INVALID_ARGUMENT,
                "rank %d called %s of %llu %s (%s, root %d) where this rank called %s of %llu %s (%s, root %d): the "
                "ranks called different collectives, counts or types",
                q, kind_name(call), static_cast<unsigned long long>(count), type_name(call), op_name(call), root,
                kind_name(my_call), static_cast<unsigned long long>(my_count), type_name(my_call), op_name(my_call),
                my_root);
}

} // namespace ibex::coll
