#include "transport/soft/codec/crc32_wide.h"

#include <isa-l/crc.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ibex::roce {
namespace {

// Folding constants of the reflected CRC-32 (Gopal et al., "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ", Intel 2009): x^n mod P, bit-reflected and shifted
// left once. Folding a 128-bit lane forward by D bits multiplies its low half by
// fold_constant(D + 32) and its high half by fold_constant(D - 32).
constexpr uint64_t kPoly = 0x104C11DB7ull;

constexpr uint64_t fold_constant(unsigned n) {
    uint64_t r = 1;
    for (unsigned i = 0; i < n; ++i) {
        r <<= 1;
        if (r & (1ull << 32)) r ^= kPoly;
    }
    uint64_t reflected = 0;
    for (int b = 0; b < 32; ++b)
        if (r & (1ull << b)) reflected |= 1ull << (31 - b);
    return reflected << 1;
}

// The paper's published values, as a check on the generator.
static_assert(fold_constant(544) == 0x154442bd4ull && fold_constant(480) == 0x1c6e41596ull);
static_assert(fold_constant(160) == 0x1751997d0ull && fold_constant(96) == 0x0ccaa009eull);
static_assert(fold_constant(64) == 0x163cd6124ull);

constexpr uint64_t k1024Lo = fold_constant(1024 + 32), k1024Hi = fold_constant(1024 - 32);
constexpr uint64_t k128Lo = fold_constant(128 + 32), k128Hi = fold_constant(128 - 32);
constexpr uint64_t k64 = fold_constant(64);
// Barrett reduction: P (reflected, with x^32) and mu = floor(x^64 / P) (reflected).
constexpr uint64_t kPolyReflected = 0x1db710641ull, kMu = 0x1f7011641ull;

constexpr size_t kMinWide = 256; // below this ISA-L is as fast (measured)

#if defined(__x86_64__)
__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1"))) inline __m256i fold256(__m256i x, __m256i k, __m256i next) {
    const __m256i lo = _mm256_clmulepi64_epi128(x, k, 0x00);
    const __m256i hi = _mm256_clmulepi64_epi128(x, k, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(lo, hi), next);
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold128(__m128i x, __m128i k, __m128i next) {
    const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

// 128 -> 32 bits: folds to 64 bits, then Barrett reduction.
__attribute__((target("pclmul,sse4.1"))) uint32_t reduce128(__m128i x) {
    const __m128i k128 = _mm_set_epi64x(static_cast<long long>(k128Hi), static_cast<long long>(k128Lo));
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k128, 0x10));
    const __m128i k64v = _mm_set_epi64x(0, static_cast<long long>(k64));
    x = _mm_xor_si128(_mm_srli_si128(x, 4), _mm_clmulepi64_si128(_mm_and_si128(x, low32), k64v, 0x00));
    const __m128i barrett = _mm_set_epi64x(static_cast<long long>(kMu), static_cast<long long>(kPolyReflected));
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
    return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

// The CRC register (not inverted) after the whole 16-byte blocks of [p, p + len), len >= 128;
// p and len are left at the remaining (< 16) bytes.
__attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1"))) uint32_t fold_register(uint32_t reg, const uint8_t *&p, size_t &len) {
    __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 32));
    __m256i y2 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 64));
    __m256i y3 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 96));
    y0 = _mm256_xor_si256(y0, _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(reg))));
    p += 128;
    len -= 128;
    // Four independent 256-bit accumulators hide the multiply latency.
    const __m256i k1024 = _mm256_set_epi64x(static_cast<long long>(k1024Hi), static_cast<long long>(k1024Lo),
                                            static_cast<long long>(k1024Hi), static_cast<long long>(k1024Lo));
    for (; len >= 128; p += 128, len -= 128) {
        y0 = fold256(y0, k1024, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
        y1 = fold256(y1, k1024, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 32)));
        y2 = fold256(y2, k1024, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 64)));
        y3 = fold256(y3, k1024, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 96)));
    }
    // The eight 128-bit lanes, in byte order, into one.
    const __m128i k128 = _mm_set_epi64x(static_cast<long long>(k128Hi), static_cast<long long>(k128Lo));
    __m128i x = _mm256_castsi256_si128(y0);
    x = fold128(x, k128, _mm256_extracti128_si256(y0, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y1));
    x = fold128(x, k128, _mm256_extracti128_si256(y1, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y2));
    x = fold128(x, k128, _mm256_extracti128_si256(y2, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y3));
    x = fold128(x, k128, _mm256_extracti128_si256(y3, 1));
    for (; len >= 16; p += 16, len -= 16) x = fold128(x, k128, _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return reduce128(x);
}
#endif

} // namespace

bool crc32_wide_available() {
#if defined(__x86_64__)
    static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") &&
                           __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    return ok;
#else
    return false;
#endif
}

uint32_t crc32_wide(uint32_t crc, const void *data, size_t len) {
    const auto *p = static_cast<const uint8_t *>(data);
#if defined(__x86_64__)
    if (len >= kMinWide) crc = ~fold_register(~crc, p, len);
#endif
    // Short buffers (headers: ISA-L is as fast there) and the last few bytes.
    return len ? crc32_gzip_refl(crc, p, len) : crc;
}

} // namespace ibex::roce
