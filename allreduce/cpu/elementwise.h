// The arithmetic of one element, the definition both kernel paths follow bit for bit:
// - f16/bf16 widen exactly to f32, the op runs in f32, and the result rounds to nearest
//   even; NaNs convert as F16C does (quietened, payload truncated), so the software
//   conversions here match the hardware ones.
// - Integers wrap (computed on the unsigned type, so overflow is defined).
// - min/max: a NaN in either operand gives a NaN (b's when both are); otherwise
//   min = b < a ? b : a and max = b > a ? b : a, which is exactly what x86 MINPS/MAXPS
//   compute with the operands (b, a).
// Only the functions here decide results; the SIMD code must agree with them.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ibex/coll.h"

namespace ibex::coll::cpu {

inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: man * 2^-24 is exact in f32 (a normal number).
        const float mag = static_cast<float>(man) * 0x1p-24f;
        return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
    }
    if (exp == 31) {
        // Inf, or a NaN quietened with its payload kept (as VCVTPH2PS does).
        return std::bit_cast<float>(sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u));
    }
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t f32_to_f16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) // NaN: quiet, top payload bits (as VCVTPS2PH does)
        return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) // >= 65520 rounds to infinity (and infinity stays)
        return static_cast<uint16_t>(sign | 0x7c00u);
    if (abs >= 0x38800000u) { // normal in f16: rebias, round the 13 dropped bits to even
        const uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);
        return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
    }
    // Subnormal (or zero) in f16: round mantissa * 2^(exp-126) to an integer, ties to even.
    const uint32_t exp = abs >> 23;
    if (exp < 102) return sign; // below 2^-25: rounds to zero (2^-25 itself ties to even 0)
    const uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp; // 14 .. 24
    uint32_t m = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
    const uint32_t x = std::bit_cast<uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
    return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Storage types of the two 16-bit float formats (distinct so templates can tell them apart).
struct f16_t {
    uint16_t bits;
};
struct bf16_t {
    uint16_t bits;
};

template <class T> struct Widen {
    using type = T;
    static T up(T v) { return v; }
    static T down(T v) { return v; }
};
template <> struct Widen<f16_t> {
    using type = float;
    static float up(f16_t v) { return f16_to_f32(v.bits); }
    static f16_t down(float v) { return {f32_to_f16(v)}; }
};
template <> struct Widen<bf16_t> {
    using type = float;
    static float up(bf16_t v) { return bf16_to_f32(v.bits); }
    static bf16_t down(float v) { return {f32_to_bf16(v)}; }
};

// The ops on the computation type (float/double or an integer).
template <class C> C op_sum(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
        using U = std::make_unsigned_t<C>;
        return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
        return a + b;
    }
}
template <class C> C op_prod(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
        // Multiply at least as unsigned int, so u8 does not promote to signed int.
        using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
        return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    } else {
        return a * b;
    }
}
template <class C> C op_min(C a, C b) {
    if constexpr (!std::is_integral_v<C>) {
        if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
}
template <class C> C op_max(C a, C b) {
    if constexpr (!std::is_integral_v<C>) {
        if (std::isnan(b)) return b;
    }
    return b > a ? b : a;
}

// One element of any storage type T under op.
template <class T, int Op> inline T combine(T a, T b) {
    using W = Widen<T>;
    const auto x = W::up(a), y = W::up(b);
    if constexpr (Op == IBEX_SUM || Op == IBEX_AVG) return W::down(op_sum(x, y));
    else if constexpr (Op == IBEX_PROD) return W::down(op_prod(x, y));
    else if constexpr (Op == IBEX_MIN) return W::down(op_min(x, y));
    else return W::down(op_max(x, y));
}

// One element divided by the rank count: floats divide in their computation type (no
// reciprocal, so the result is the correctly rounded quotient), integers truncate. The divisor is
// taken as int64_t so that a rank count beyond a narrow type's range (u8 with 256+
// ranks) divides correctly instead of wrapping to zero.
template <class T> inline T divide(T v, int nranks) {
    using W = Widen<T>;
    using C = typename W::type;
    if constexpr (std::is_integral_v<C>) return static_cast<T>(static_cast<int64_t>(v) / int64_t{nranks});
    else return W::down(W::up(v) / static_cast<C>(nranks));
}

} // namespace ibex::coll::cpu
