// Result comparison for the GPU/CPU parity tests: equal bits, except that two NaNs are
// equal whatever their payloads. A NaN made by arithmetic carries an operand's payload on
// x86 (which one depends on instruction operand order, which the compiler picks) and is
// the canonical NaN on NVIDIA GPUs; no rule can make those bits agree. NaNs that are
// selected rather than computed (min/max) still compare bit for bit where the caller
// asks for exact equality.
#pragma once

#include <cstdint>
#include <cstring>

#include "ibex/coll.h"

namespace ibex::coll::test {

inline bool is_nan_bits(const void *p, ibex_datatype_t type) {
    uint64_t v = 0;
    switch (type) {
    case IBEX_F16: std::memcpy(&v, p, 2); return (v & 0x7fff) > 0x7c00;
    case IBEX_BF16: std::memcpy(&v, p, 2); return (v & 0x7fff) > 0x7f80;
    case IBEX_F32: std::memcpy(&v, p, 4); return (v & 0x7fffffffu) > 0x7f800000u;
    case IBEX_F64: std::memcpy(&v, p, 8); return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return false;
    }
}

// Element equality under `op`: exact for min/max and integers, NaN-as-a-class for the
// arithmetic ops.
inline bool same_result(const void *got, const void *want, ibex_datatype_t type, bool arithmetic) {
    const size_t es = ibex_datatype_size(type);
    if (std::memcmp(got, want, es) == 0) return true;
    return arithmetic && is_nan_bits(got, type) && is_nan_bits(want, type);
}

} // namespace ibex::coll::test
