// One element's arithmetic on the GPU, following allreduce/cpu/elementwise.h rule for
// rule (that header is the definition; these are its device-side counterparts). The
// 16-bit float conversions are done in integer arithmetic rather than with cvt
// instructions, because the NaN payloads must come out as the CPU's F16C ones do.
// Everything is host-callable too, so a host-only test checks these very functions
// against the CPU ones on machines without a GPU.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define IBEX_HD __host__ __device__ __forceinline__
#else
#define IBEX_HD inline
#endif

#include "ibex/coll.h"

namespace ibex::coll::gpu {

IBEX_HD uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

IBEX_HD float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

struct half_bits {
    uint16_t v;
};
struct bfloat_bits {
    uint16_t v;
};

IBEX_HD float half_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    const uint32_t m = h & 0x3ffu;
    if (e == 31) return float_of(sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u));
    if (e != 0) return float_of(sign | ((e + 112u) << 23) | (m << 13));
    // Subnormal or zero: m * 2^-24 is exact as a normal f32.
    return float_of(bits_of(float(m) * 5.9604644775390625e-8f) | sign);
}

IBEX_HD uint16_t float_to_half(float f) {
    const uint32_t x = bits_of(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((mag >> 13) & 0x3ffu)); // quiet NaN
    if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                          // overflow to inf
    if (mag >= 0x38800000u) return uint16_t(sign | ((mag + 0xfffu + ((mag >> 13) & 1u) - 0x38000000u) >> 13));
    const uint32_t e = mag >> 23;
    if (e < 102) return sign;
    const uint32_t full = (mag & 0x7fffffu) | 0x800000u;
    const uint32_t sh = 126u - e;
    uint32_t q = full >> sh;
    const uint32_t r = full & ((1u << sh) - 1u);
    const uint32_t h = 1u << (sh - 1u);
    q += (r > h || (r == h && (q & 1u))) ? 1u : 0u;
    return uint16_t(sign | q);
}

IBEX_HD float bfloat_to_float(uint16_t h) { return float_of(uint32_t(h) << 16); }

IBEX_HD uint16_t float_to_bfloat(float f) {
    const uint32_t x = bits_of(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x0040u);
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Storage type -> computation type and back.
template <class T> struct Calc {
    using type = T;
    IBEX_HD static T in(T v) { return v; }
    IBEX_HD static T out(T v) { return v; }
};
template <> struct Calc<half_bits> {
    using type = float;
    IBEX_HD static float in(half_bits v) { return half_to_float(v.v); }
    IBEX_HD static half_bits out(float v) { return {float_to_half(v)}; }
};
template <> struct Calc<bfloat_bits> {
    using type = float;
    IBEX_HD static float in(bfloat_bits v) { return bfloat_to_float(v.v); }
    IBEX_HD static bfloat_bits out(float v) { return {float_to_bfloat(v)}; }
};

template <class C> struct IsInt {
    static constexpr bool value = false;
};
template <> struct IsInt<uint8_t> {
    static constexpr bool value = true;
};
template <> struct IsInt<int32_t> {
    static constexpr bool value = true;
};
template <> struct IsInt<int64_t> {
    static constexpr bool value = true;
};

// Unsigned type integer arithmetic wraps in (u8 multiplies as unsigned int).
template <class C> struct Wrap;
template <> struct Wrap<uint8_t> {
    using type = unsigned;
};
template <> struct Wrap<int32_t> {
    using type = uint32_t;
};
template <> struct Wrap<int64_t> {
    using type = uint64_t;
};

template <class C, int Op> IBEX_HD C apply(C a, C b) {
    if constexpr (Op == IBEX_SUM || Op == IBEX_AVG || Op == IBEX_PROD) {
        if constexpr (IsInt<C>::value) {
            using U = typename Wrap<C>::type;
            return Op == IBEX_PROD ? C(U(a) * U(b)) : C(U(a) + U(b));
        } else {
            return Op == IBEX_PROD ? a * b : a + b;
        }
    } else {
        if constexpr (!IsInt<C>::value) {
            if (b != b) return b; // NaN (no fast-math here: the comparison is honest)
        }
        if constexpr (Op == IBEX_MIN) return b < a ? b : a;
        else return b > a ? b : a;
    }
}

template <class T, int Op> IBEX_HD T combine(T a, T b) {
    using K = Calc<T>;
    return K::out(apply<typename K::type, Op>(K::in(a), K::in(b)));
}

template <class T> IBEX_HD T divide(T v, int nranks) {
    using K = Calc<T>;
    using C = typename K::type;
    if constexpr (IsInt<C>::value) return T((long long)v / (long long)nranks); // as the CPU: no wrap of the divisor
    else return K::out(K::in(v) / C(nranks));
}

} // namespace ibex::coll::gpu
