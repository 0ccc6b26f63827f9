// Sizes and printable names of the collective types and ops (names as nccl-tests prints
// them, so ibex_allreduce_perf tables read like its tables).
#include "ibex/coll.h"

extern "C" {

size_t ibex_datatype_size(ibex_datatype_t type) {
    switch (type) {
    case IBEX_U8: return 1;
    case IBEX_F16:
    case IBEX_BF16: return 2;
    case IBEX_I32:
    case IBEX_F32: return 4;
    case IBEX_I64:
    case IBEX_F64: return 8;
    default: return 0;
    }
}

const char *ibex_datatype_name(ibex_datatype_t type) {
    switch (type) {
    case IBEX_U8: return "uint8";
    case IBEX_I32: return "int32";
    case IBEX_I64: return "int64";
    case IBEX_F16: return "half";
    case IBEX_BF16: return "bfloat16";
    case IBEX_F32: return "float";
    case IBEX_F64: return "double";
    default: return "unknown";
    }
}

const char *ibex_redop_name(ibex_redop_t op) {
    switch (op) {
    case IBEX_SUM: return "sum";
    case IBEX_PROD: return "prod";
    case IBEX_MIN: return "min";
    case IBEX_MAX: return "max";
    case IBEX_AVG: return "avg";
    default: return "unknown";
    }
}

} // extern "C"
