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

} // namespace ibex::coll
