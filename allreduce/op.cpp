#include "allreduce/op.h"

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
    case OpKind::barrier:
    case OpKind::probe: break;
    }
    return {};
}

} // namespace ibex::coll
