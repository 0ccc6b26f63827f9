#include "tools/ibex_allreduce_perf/check.h"

#include <cstring>
#include <vector>

#include "allreduce/cpu/elementwise.h"

namespace ibex::collperf {
namespace {

namespace cpu = ibex::coll::cpu;

// The pattern as a small integer (exact in every type). prod uses 1, 2, -1 and 1/2, so
// products stay in range and exact up to 15 ranks in half, 127 in float/bfloat16.
double pattern(ibex_redop_t op, int rank, size_t i) {
    const size_t h = (i * 2654435761u) ^ (static_cast<size_t>(rank) * 40503u + 17u);
    if (op == IBEX_PROD) {
        static const double factors[] = {1.0, 2.0, -1.0, 0.5, 1.0, 1.0, -1.0, 1.0};
        return factors[(h >> 3) % 8];
    }
    return static_cast<double>(static_cast<int>((h >> 5) % 9) - 4); // -4 .. 4
}

// Encode v (exact by construction) in `type`; integers wrap like the kernels.
void store(void *p, ibex_datatype_t type, double v) {
    switch (type) {
    case IBEX_U8: { const auto x = static_cast<uint8_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 1); break; }
    case IBEX_I32: { const auto x = static_cast<int32_t>(static_cast<int64_t>(v)); std::memcpy(p, &x, 4); break; }
    case IBEX_I64: { const auto x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    case IBEX_F16: { const uint16_t x = cpu::f32_to_f16(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case IBEX_BF16: { const uint16_t x = cpu::f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case IBEX_F32: { const auto x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    case IBEX_F64: std::memcpy(p, &v, 8); break;
    default: break;
    }
}

bool is_float(ibex_datatype_t t) { return t == IBEX_F16 || t == IBEX_BF16 || t == IBEX_F32 || t == IBEX_F64; }

// The expected element (raw bytes into out) of the reduction over all ranks of the
// inputs at index i. Integer types reduce in their own width with wraparound (the
// element as the type, not as a double), floats exactly in double (the values make that
// exact), then avg divides once as finalize_avg does.
void expected_reduced(void *out, ibex_datatype_t type, ibex_redop_t op, int nranks, size_t i) {
    if (is_float(type)) {
        double acc = pattern(op, 0, i);
        for (int r = 1; r < nranks; ++r) {
            const double v = pattern(op, r, i);
            if (op == IBEX_SUM || op == IBEX_AVG) acc += v;
            else if (op == IBEX_PROD) acc *= v;
            else if (op == IBEX_MIN) acc = v < acc ? v : acc;
            else acc = v > acc ? v : acc;
        }
        if (op != IBEX_AVG) return store(out, type, acc);
        // finalize_avg: the type's computation precision, one division.
        switch (type) {
        case IBEX_F64: { const double q = acc / nranks; std::memcpy(out, &q, 8); return; }
        case IBEX_F32: { const float q = static_cast<float>(acc) / static_cast<float>(nranks); std::memcpy(out, &q, 4); return; }
        case IBEX_F16: { const uint16_t q = cpu::f32_to_f16(static_cast<float>(acc) / static_cast<float>(nranks)); std::memcpy(out, &q, 2); return; }
        default: { const uint16_t q = cpu::f32_to_bf16(static_cast<float>(acc) / static_cast<float>(nranks)); std::memcpy(out, &q, 2); return; }
        }
    }
    // Integers: as the type, via uint64 wraparound for sum/prod (low bits are the same).
    auto as_signed = [type](uint64_t bits) -> int64_t {
        if (type == IBEX_U8) return static_cast<int64_t>(bits & 0xff);
        if (type == IBEX_I32) return static_cast<int32_t>(static_cast<uint32_t>(bits));
        return static_cast<int64_t>(bits);
    };
    auto elem = [&](int r) {
        uint64_t bits = 0;
        uint8_t tmp[8];
        store(tmp, type, pattern(op, r, i));
        std::memcpy(&bits, tmp, ibex_datatype_size(type));
        return as_signed(bits);
    };
    int64_t acc = elem(0);
    for (int r = 1; r < nranks; ++r) {
        const int64_t v = elem(r);
        if (op == IBEX_SUM || op == IBEX_AVG) acc = as_signed(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
        else if (op == IBEX_PROD) acc = as_signed(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
        else if (op == IBEX_MIN) acc = v < acc ? v : acc;
        else acc = v > acc ? v : acc;
    }
    if (op == IBEX_AVG) acc /= nranks; // C++ division truncates toward zero, as the kernels do
    std::memcpy(out, &acc, ibex_datatype_size(type)); // little-endian: the low bytes are the value
}

} // namespace

void fill_input(void *buf, size_t count, ibex_datatype_t type, ibex_redop_t op, int rank, size_t first_index) {
    const size_t sz = ibex_datatype_size(type);
    auto *p = static_cast<uint8_t *>(buf);
    for (size_t i = 0; i < count; ++i) store(p + i * sz, type, pattern(op, rank, first_index + i));
}

int64_t count_wrong(const void *out, const CheckSpec &s) {
    const size_t sz = ibex_datatype_size(s.type);
    const auto *got = static_cast<const uint8_t *>(out);
    if (s.coll == Coll::reduce && s.rank != s.root) return 0;
    int64_t wrong = 0;
    uint8_t want[8];
    for (size_t i = 0; i < s.count; ++i) {
        switch (s.coll) {
        case Coll::allreduce:
        case Coll::reduce: expected_reduced(want, s.type, s.op, s.nranks, i); break;
        case Coll::reduce_scatter:
            expected_reduced(want, s.type, s.op, s.nranks, static_cast<size_t>(s.rank) * s.count + i);
            break;
        case Coll::allgather: {
            const size_t per = s.count / static_cast<size_t>(s.nranks);
            store(want, s.type, pattern(s.op, static_cast<int>(i / per), i % per));
            break;
        }
        case Coll::broadcast: store(want, s.type, pattern(s.op, s.root, i)); break;
        case Coll::alltoall: {
            // Block q came from rank q: its elements for this rank, at rank * per there.
            const size_t per = s.count / static_cast<size_t>(s.nranks);
            store(want, s.type, pattern(s.op, static_cast<int>(i / per), static_cast<size_t>(s.rank) * per + i % per));
            break;
        }
        case Coll::sendrecv: store(want, s.type, pattern(s.op, (s.rank + s.nranks - 1) % s.nranks, i)); break;
        }
        if (std::memcmp(want, got + i * sz, sz) != 0) ++wrong;
    }
    return wrong;
}

} // namespace ibex::collperf
