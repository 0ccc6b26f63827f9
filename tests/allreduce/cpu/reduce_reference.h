// A deliberately plain reference for the reduction arithmetic, written independently of
// allreduce/cpu/elementwise.h: 16-bit floats decoded with ldexp and encoded through
// frexp/nearbyint in double (exact there, so the only rounding is the one being
// specified), integers widened and masked. Shared by the kernel tests and the matrix test.
#pragma once

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ibex/coll.h"

namespace ibex::test::ref {

inline bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
inline bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

inline float f16_decode(uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const bool neg = h & 0x8000;
    float mag;
    if (e == 31) {
        if (m == 0) mag = INFINITY;
        else // quiet NaN carrying the payload in the top mantissa bits
            mag = std::bit_cast<float>(0x7fc00000u | (static_cast<uint32_t>(m) << 13));
    } else if (e == 0) {
        mag = static_cast<float>(std::ldexp(static_cast<double>(m), -24));
    } else {
        mag = static_cast<float>(std::ldexp(static_cast<double>(1024 + m), e - 25));
    }
    return neg ? -mag : mag; // negation flips only the sign bit, NaN included
}

// Nearest representable with `mbits` mantissa bits, exponent bias `bias`, ties to even,
// overflow to infinity. Returns the encoding without the sign.
inline uint32_t encode_mag(double mag, int mbits, int bias, uint32_t inf_bits) {
    const double unit = std::ldexp(1.0, mbits);
    const double min_normal = std::ldexp(1.0, 1 - bias);
    double enc;
    if (mag < min_normal) {
        enc = std::nearbyint(mag * std::ldexp(1.0, bias - 1 + mbits)); // subnormal steps
    } else {
        int ex = 0;
        const double fr = std::frexp(mag, &ex); // mag = fr * 2^ex, fr in [0.5, 1)
        const int E = ex - 1;
        const double mant = std::nearbyint((fr * 2.0 - 1.0) * unit);
        enc = static_cast<double>(E + bias) * unit + mant; // a carry moves into the exponent
    }
    return enc >= inf_bits ? inf_bits : static_cast<uint32_t>(enc);
}

inline uint16_t f16_encode(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint16_t sign = (x >> 31) ? 0x8000 : 0;
    if (std::isnan(f)) return sign | 0x7e00 | ((x >> 13) & 0x3ff);
    if (std::isinf(f)) return sign | 0x7c00;
    return static_cast<uint16_t>(sign | encode_mag(std::fabs(static_cast<double>(f)), 10, 15, 0x7c00));
}

inline float bf16_decode(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t bf16_encode(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const uint16_t sign = (x >> 31) ? 0x8000 : 0;
    if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
    if (std::isinf(f)) return sign | 0x7f80;
    return static_cast<uint16_t>(sign | encode_mag(std::fabs(static_cast<double>(f)), 7, 127, 0x7f80));
}

// The op on floats: NaN in b wins, then NaN in a, else the ordinary result. For sum and
// prod the hardware's own NaN (one operand NaN: that one, quietened) is what x86 gives.
template <class F> F float_op(ibex_redop_t op, F a, F b) {
    switch (op) {
    case IBEX_SUM:
    case IBEX_AVG: return a + b;
    case IBEX_PROD: return a * b;
    case IBEX_MIN:
        if (std::isnan(b)) return b;
        if (std::isnan(a)) return a;
        return b < a ? b : a;
    default:
        if (std::isnan(b)) return b;
        if (std::isnan(a)) return a;
        return b > a ? b : a;
    }
}

template <class I> I int_op(ibex_redop_t op, I a, I b) {
    using W = unsigned __int128;
    const W ua = static_cast<W>(static_cast<std::make_unsigned_t<I>>(a));
    const W ub = static_cast<W>(static_cast<std::make_unsigned_t<I>>(b));
    const W mask = (W(1) << (8 * sizeof(I))) - 1;
    switch (op) {
    case IBEX_SUM:
    case IBEX_AVG: return static_cast<I>(static_cast<std::make_unsigned_t<I>>((ua + ub) & mask));
    case IBEX_PROD: return static_cast<I>(static_cast<std::make_unsigned_t<I>>((ua * ub) & mask));
    case IBEX_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

// One element of `type` at a and b, result into out (raw bytes).
inline void element(ibex_datatype_t type, ibex_redop_t op, void *out, const void *a, const void *b) {
    auto ld = [](const void *p, auto &v) { std::memcpy(&v, p, sizeof v); };
    auto st = [out](auto v) { std::memcpy(out, &v, sizeof v); };
    switch (type) {
    case IBEX_U8: { uint8_t x, y; ld(a, x); ld(b, y); st(int_op(op, x, y)); break; }
    case IBEX_I32: { int32_t x, y; ld(a, x); ld(b, y); st(int_op(op, x, y)); break; }
    case IBEX_I64: { int64_t x, y; ld(a, x); ld(b, y); st(int_op(op, x, y)); break; }
    case IBEX_F32: { float x, y; ld(a, x); ld(b, y); st(float_op(op, x, y)); break; }
    case IBEX_F64: { double x, y; ld(a, x); ld(b, y); st(float_op(op, x, y)); break; }
    case IBEX_F16: {
        uint16_t x, y; ld(a, x); ld(b, y);
        st(f16_encode(float_op(op, f16_decode(x), f16_decode(y))));
        break;
    }
    case IBEX_BF16: {
        uint16_t x, y; ld(a, x); ld(b, y);
        st(bf16_encode(float_op(op, bf16_decode(x), bf16_decode(y))));
        break;
    }
    default: break;
    }
}

// v / nranks: floats in their computation type, integers truncated toward zero.
inline void divide(ibex_datatype_t type, void *p, int n) {
    auto rw = [p](auto v, auto f) { std::memcpy(&v, p, sizeof v); v = f(v); std::memcpy(p, &v, sizeof v); };
    switch (type) {
    case IBEX_U8: rw(uint8_t{}, [n](uint8_t v) { return static_cast<uint8_t>(v / n); }); break;
    case IBEX_I32: rw(int32_t{}, [n](int32_t v) { return static_cast<int32_t>(v / n); }); break;
    case IBEX_I64: rw(int64_t{}, [n](int64_t v) { return static_cast<int64_t>(v / n); }); break;
    case IBEX_F32: rw(float{}, [n](float v) { return v / static_cast<float>(n); }); break;
    case IBEX_F64: rw(double{}, [n](double v) { return v / static_cast<double>(n); }); break;
    case IBEX_F16: rw(uint16_t{}, [n](uint16_t v) { return f16_encode(f16_decode(v) / static_cast<float>(n)); }); break;
    case IBEX_BF16: rw(uint16_t{}, [n](uint16_t v) { return bf16_encode(bf16_decode(v) / static_cast<float>(n)); }); break;
    default: break;
    }
}

// The value of one element as a double (for tolerance checks); NaN for NaNs.
inline double as_double(ibex_datatype_t type, const void *p) {
    switch (type) {
    case IBEX_U8: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case IBEX_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case IBEX_I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case IBEX_F32: { float v; std::memcpy(&v, p, 4); return v; }
    case IBEX_F64: { double v; std::memcpy(&v, p, 8); return v; }
    case IBEX_F16: { uint16_t v; std::memcpy(&v, p, 2); return f16_decode(v); }
    case IBEX_BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_decode(v); }
    default: return NAN;
    }
}

} // namespace ibex::test::ref
