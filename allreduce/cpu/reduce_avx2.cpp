// AVX2 kernels (F16C for half precision, integer shifts for bfloat16). Each function is
// compiled for AVX2 by a target attribute rather than by file-wide flags, so nothing else
// in this file (or an inline function it pulls in) can leak AVX2 code onto a CPU without
// it; reduce.cpp calls in here only after cpuid says the CPU has both extensions.
// Results equal elementwise.h's bit for bit: same IEEE operations in f32/f64 (no FMA,
// no reciprocal), same rounding back to 16 bits, same NaN rules; tails use elementwise.h.
#include "allreduce/cpu/elementwise.h"
#include "allreduce/cpu/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

#define IBEX_AVX2 __attribute__((target("avx2,f16c")))

namespace ibex::coll::cpu {
namespace {

// Lane types: T in memory, V in registers, N elements per vector; ps: V is __m256 (f32 math).
struct F32 {
    static constexpr bool ps = true;
    using T = float;
    using V = __m256;
    static constexpr size_t N = 8;
    IBEX_AVX2 static V load(const T *p) { return _mm256_loadu_ps(p); }
    IBEX_AVX2 static void store(T *p, V v) { _mm256_storeu_ps(p, v); }
};

struct F64 {
    static constexpr bool ps = false;
    using T = double;
    using V = __m256d;
    static constexpr size_t N = 4;
    IBEX_AVX2 static V load(const T *p) { return _mm256_loadu_pd(p); }
    IBEX_AVX2 static void store(T *p, V v) { _mm256_storeu_pd(p, v); }
};

struct F16 {
    static constexpr bool ps = true;
    using T = f16_t;
    using V = __m256;
    static constexpr size_t N = 8;
    IBEX_AVX2 static V load(const T *p) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    }
    IBEX_AVX2 static void store(T *p, V v) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
};

// Sixteen bfloat16 per step, widened by interleaving with zeros (unpacklo/hi within each
// 128-bit lane) and narrowed by the matching pack, so no cross-lane shuffle is needed: the
// two halves hold elements {0-3, 8-11} and {4-7, 12-15}, which pack back in order.
struct BF16 {
    static constexpr bool ps = false;
    using T = bf16_t;
    struct V {
        __m256 lo, hi;
    };
    static constexpr size_t N = 16;
    IBEX_AVX2 static V load(const T *p) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
        const __m256i z = _mm256_setzero_si256();
        return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(z, x)), _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, x))};
    }
    // Round to nearest even on the dropped 16 bits; NaNs keep their top bits, quietened.
    IBEX_AVX2 static __m256i narrow(__m256 v) {
        const __m256i x = _mm256_castps_si256(v);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
        const __m256i rounded =
            _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
        const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
        const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        return _mm256_blendv_epi8(rounded, quiet, nan);
    }
    IBEX_AVX2 static void store(T *p, V v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), _mm256_packus_epi32(narrow(v.lo), narrow(v.hi)));
    }
};

struct I32 {
    static constexpr bool ps = false;
    using T = int32_t;
    using V = __m256i;
    static constexpr size_t N = 8;
    IBEX_AVX2 static V load(const T *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
    IBEX_AVX2 static void store(T *p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v); }
};
struct I64 : I32 {
    using T = int64_t;
    static constexpr size_t N = 4;
    IBEX_AVX2 static V load(const T *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
    IBEX_AVX2 static void store(T *p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v); }
};
struct U8 : I32 {
    using T = uint8_t;
    static constexpr size_t N = 32;
    IBEX_AVX2 static V load(const T *p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)); }
    IBEX_AVX2 static void store(T *p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v); }
};

// The op on registers. Float min/max: MINPS(b, a) is exactly "b < a ? b : a" (it returns
// its second operand when either is NaN), then b wins where b is NaN: elementwise.h's rule.
template <class L, int Op> struct VecOp;

template <class L, int Op>
    requires L::ps
struct VecOp<L, Op> {
    IBEX_AVX2 static __m256 apply(__m256 a, __m256 b) {
        if constexpr (Op == IBEX_SUM) return _mm256_add_ps(a, b);
        else if constexpr (Op == IBEX_PROD) return _mm256_mul_ps(a, b);
        else if constexpr (Op == IBEX_MIN)
            return _mm256_blendv_ps(_mm256_min_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
        else return _mm256_blendv_ps(_mm256_max_ps(b, a), b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
    }
};

template <int Op> struct VecOp<BF16, Op> {
    IBEX_AVX2 static BF16::V apply(BF16::V a, BF16::V b) {
        return {VecOp<F32, Op>::apply(a.lo, b.lo), VecOp<F32, Op>::apply(a.hi, b.hi)};
    }
};

template <int Op> struct VecOp<F64, Op> {
    IBEX_AVX2 static __m256d apply(__m256d a, __m256d b) {
        if constexpr (Op == IBEX_SUM) return _mm256_add_pd(a, b);
        else if constexpr (Op == IBEX_PROD) return _mm256_mul_pd(a, b);
        else if constexpr (Op == IBEX_MIN)
            return _mm256_blendv_pd(_mm256_min_pd(b, a), b, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
        else return _mm256_blendv_pd(_mm256_max_pd(b, a), b, _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
    }
};

template <int Op> struct VecOp<I32, Op> {
    IBEX_AVX2 static __m256i apply(__m256i a, __m256i b) {
        if constexpr (Op == IBEX_SUM) return _mm256_add_epi32(a, b);
        else if constexpr (Op == IBEX_PROD) return _mm256_mullo_epi32(a, b);
        else if constexpr (Op == IBEX_MIN) return _mm256_min_epi32(a, b);
        else return _mm256_max_epi32(a, b);
    }
};

template <int Op> struct VecOp<I64, Op> {
    IBEX_AVX2 static __m256i apply(__m256i a, __m256i b) {
        if constexpr (Op == IBEX_SUM) return _mm256_add_epi64(a, b);
        else if constexpr (Op == IBEX_PROD) {
            // Low 64 bits of the product from 32x32 multiplies: lo*lo + ((hi*lo + lo*hi) << 32).
            const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                                   _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
            return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
        } else if constexpr (Op == IBEX_MIN) return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
        else return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a));
    }
};

template <int Op> struct VecOp<U8, Op> {
    IBEX_AVX2 static __m256i apply(__m256i a, __m256i b) {
        if constexpr (Op == IBEX_SUM) return _mm256_add_epi8(a, b);
        else if constexpr (Op == IBEX_PROD) {
            // No byte multiply: even bytes and odd bytes as 16-bit products, low byte kept.
            const __m256i even = _mm256_and_si256(_mm256_mullo_epi16(a, b), _mm256_set1_epi16(0x00ff));
            const __m256i odd = _mm256_slli_epi16(
                _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8)), 8);
            return _mm256_or_si256(even, odd);
        } else if constexpr (Op == IBEX_MIN) return _mm256_min_epu8(a, b);
        else return _mm256_max_epu8(a, b);
    }
};

template <class L> struct Avx2 {
    template <int Op> IBEX_AVX2 static void run(void *out, const void *a, const void *b, size_t count);
};

template <class L>
template <int Op>
IBEX_AVX2 void Avx2<L>::run(void *out, const void *a, const void *b, size_t count) {
    using T = typename L::T;
    using K = VecOp<L, Op == IBEX_AVG ? IBEX_SUM : Op>;
    auto *o = static_cast<T *>(out);
    const auto *x = static_cast<const T *>(a);
    const auto *y = static_cast<const T *>(b);
    size_t i = 0;
    // Two vectors per pass: both loads of a pass happen before its stores, so out may be a or b.
    for (; i + 2 * L::N <= count; i += 2 * L::N) {
        const auto r0 = K::apply(L::load(x + i), L::load(y + i));
        const auto r1 = K::apply(L::load(x + i + L::N), L::load(y + i + L::N));
        L::store(o + i, r0);
        L::store(o + i + L::N, r1);
    }
    for (; i + L::N <= count; i += L::N) L::store(o + i, K::apply(L::load(x + i), L::load(y + i)));
    for (; i < count; ++i) o[i] = combine<T, Op == IBEX_AVG ? IBEX_SUM : Op>(x[i], y[i]);
}

template <class L> IBEX_AVX2 void avg_avx2(void *buf, size_t count, int nranks) {
    using T = typename L::T;
    auto *p = static_cast<T *>(buf);
    size_t i = 0;
    if constexpr (L::ps) {
        const __m256 n = _mm256_set1_ps(static_cast<float>(nranks));
        for (; i + L::N <= count; i += L::N) L::store(p + i, _mm256_div_ps(L::load(p + i), n));
    } else if constexpr (std::is_same_v<L, BF16>) {
        const __m256 n = _mm256_set1_ps(static_cast<float>(nranks));
        for (; i + L::N <= count; i += L::N) {
            const BF16::V v = L::load(p + i);
            L::store(p + i, {_mm256_div_ps(v.lo, n), _mm256_div_ps(v.hi, n)});
        }
    } else {
        const __m256d n = _mm256_set1_pd(static_cast<double>(nranks));
        for (; i + L::N <= count; i += L::N) L::store(p + i, _mm256_div_pd(L::load(p + i), n));
    }
    for (; i < count; ++i) p[i] = divide(p[i], nranks);
}

KernelTable make_table() {
    KernelTable t = scalar_kernels(); // integer division for avg stays scalar
    t.name = "avx2+f16c";
    fill_ops<Avx2<U8>>(t, IBEX_U8);
    fill_ops<Avx2<I32>>(t, IBEX_I32);
    fill_ops<Avx2<I64>>(t, IBEX_I64);
    fill_ops<Avx2<F16>>(t, IBEX_F16);
    fill_ops<Avx2<BF16>>(t, IBEX_BF16);
    fill_ops<Avx2<F32>>(t, IBEX_F32);
    fill_ops<Avx2<F64>>(t, IBEX_F64);
    t.avg[IBEX_F16] = avg_avx2<F16>;
    t.avg[IBEX_BF16] = avg_avx2<BF16>;
    t.avg[IBEX_F32] = avg_avx2<F32>;
    t.avg[IBEX_F64] = avg_avx2<F64>;
    return t;
}

// cpuid itself rather than __builtin_cpu_supports, which not every compiler knows "f16c" in.
bool cpu_has_avx2_f16c() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const bool osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!osxsave || !avx || !f16c) return false;
    // The OS must save the YMM registers (XCR0 bits 1 and 2), or AVX instructions fault.
    unsigned xcr0_lo = 0, xcr0_hi = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x6u) != 0x6u) return false;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    return b & (1u << 5); // AVX2
}

} // namespace

const KernelTable *avx2_kernels() {
    static const bool usable = cpu_has_avx2_f16c();
    if (!usable) return nullptr;
    static const KernelTable table = make_table();
    return &table;
}

} // namespace ibex::coll::cpu

#else

namespace ibex::coll::cpu {
const KernelTable *avx2_kernels() { return nullptr; }
} // namespace ibex::coll::cpu

#endif
