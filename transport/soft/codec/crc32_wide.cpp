#include "transport/soft/codec/crc32_wide.h"

#include <cstring>
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

constexpr uint64_t k2048Lo = fold_constant(2048 + 32), k2048Hi = fold_constant(2048 - 32);
constexpr uint64_t k1024Lo = fold_constant(1024 + 32), k1024Hi = fold_constant(1024 - 32);
constexpr uint64_t k512Lo = fold_constant(512 + 32), k512Hi = fold_constant(512 - 32);
constexpr uint64_t k128Lo = fold_constant(128 + 32), k128Hi = fold_constant(128 - 32);
constexpr uint64_t k64 = fold_constant(64);
// Barrett reduction: P (reflected, with x^32) and mu = floor(x^64 / P) (reflected).
constexpr uint64_t kPolyReflected = 0x1db710641ull, kMu = 0x1f7011641ull;

// Below these lengths ISA-L is as fast (measured): the folding's fixed cost is its final
// reduction of the accumulators.
constexpr size_t kMinWide256 = 256;
constexpr size_t kMinWide512 = 512;

#if defined(__x86_64__)
#define IBEX_CRC_TARGET_128 __attribute__((target("pclmul,sse4.1")))
#define IBEX_CRC_TARGET_256 __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))
#define IBEX_CRC_TARGET_512 __attribute__((target("avx512f,avx512vl,avx2,vpclmulqdq,pclmul,sse4.1")))

IBEX_CRC_TARGET_128 inline __m128i fold128(__m128i x, __m128i k, __m128i next) {
    const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

IBEX_CRC_TARGET_256 inline __m256i fold256(__m256i x, __m256i k, __m256i next) {
    const __m256i lo = _mm256_clmulepi64_epi128(x, k, 0x00);
    const __m256i hi = _mm256_clmulepi64_epi128(x, k, 0x11);
    return _mm256_xor_si256(_mm256_xor_si256(lo, hi), next);
}

IBEX_CRC_TARGET_512 inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
    const __m512i lo = _mm512_clmulepi64_epi128(x, k, 0x00);
    const __m512i hi = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); // lo ^ hi ^ next
}

IBEX_CRC_TARGET_128 inline __m128i pair128(uint64_t hi, uint64_t lo) {
    return _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
}

IBEX_CRC_TARGET_512 inline __m512i pair512(uint64_t hi, uint64_t lo) {
    const auto h = static_cast<long long>(hi), l = static_cast<long long>(lo);
    return _mm512_set_epi64(h, l, h, l, h, l, h, l);
}

// GCC 12's AVX-512 lane extracts pass _mm512_undefined_epi32() through, which it then
// warns is used uninitialised (a false positive in its own header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 128 -> 32 bits: folds to 64 bits, then Barrett reduction.
IBEX_CRC_TARGET_128 uint32_t reduce128(__m128i x) {
    const __m128i k128 = pair128(k128Hi, k128Lo);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k128, 0x10));
    const __m128i k64v = pair128(0, k64);
    x = _mm_xor_si128(_mm_srli_si128(x, 4), _mm_clmulepi64_si128(_mm_and_si128(x, low32), k64v, 0x00));
    const __m128i barrett = pair128(kMu, kPolyReflected);
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
    return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

// Loads 16 bytes at p; with Copy, stores them at d too.
template <bool Copy> IBEX_CRC_TARGET_128 inline __m128i take128(const uint8_t *p, uint8_t *d) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(p));
    if constexpr (Copy) _mm_storeu_si128(reinterpret_cast<__m128i *>(d), v);
    return v;
}
template <bool Copy> IBEX_CRC_TARGET_256 inline __m256i take256(const uint8_t *p, uint8_t *d) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
    if constexpr (Copy) _mm256_storeu_si256(reinterpret_cast<__m256i *>(d), v);
    return v;
}
template <bool Copy> IBEX_CRC_TARGET_512 inline __m512i take512(const uint8_t *p, uint8_t *d) {
    const __m512i v = _mm512_loadu_si512(p);
    if constexpr (Copy) _mm512_storeu_si512(d, v);
    return v;
}

// The tail shared by both widths: folds the remaining whole 16-byte blocks into x and
// reduces it. p, d and len are left at the remaining (< 16) bytes.
template <bool Copy> IBEX_CRC_TARGET_128 uint32_t finish128(__m128i x, const uint8_t *&p, uint8_t *&d, size_t &len) {
    const __m128i k128 = pair128(k128Hi, k128Lo);
    for (; len >= 16; p += 16, d += Copy ? 16 : 0, len -= 16) x = fold128(x, k128, take128<Copy>(p, d));
    return reduce128(x);
}

// The CRC register (not inverted) after the whole 16-byte blocks of [p, p + len),
// len >= 128, 256-bit folding; p, d and len are left at the remaining (< 16) bytes.
template <bool Copy> IBEX_CRC_TARGET_256 uint32_t fold_register256(uint32_t reg, const uint8_t *&p, uint8_t *&d, size_t &len) {
    __m256i y0 = take256<Copy>(p, d);
    __m256i y1 = take256<Copy>(p + 32, d + 32);
    __m256i y2 = take256<Copy>(p + 64, d + 64);
    __m256i y3 = take256<Copy>(p + 96, d + 96);
    y0 = _mm256_xor_si256(y0, _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(reg))));
    const size_t step = Copy ? 128 : 0;
    p += 128, d += step, len -= 128;
    // Four independent 256-bit accumulators hide the multiply latency.
    const __m256i k1024 = _mm256_set_epi64x(static_cast<long long>(k1024Hi), static_cast<long long>(k1024Lo),
                                            static_cast<long long>(k1024Hi), static_cast<long long>(k1024Lo));
    for (; len >= 128; p += 128, d += step, len -= 128) {
        y0 = fold256(y0, k1024, take256<Copy>(p, d));
        y1 = fold256(y1, k1024, take256<Copy>(p + 32, d + 32));
        y2 = fold256(y2, k1024, take256<Copy>(p + 64, d + 64));
        y3 = fold256(y3, k1024, take256<Copy>(p + 96, d + 96));
    }
    // The eight 128-bit lanes, in byte order, into one.
    const __m128i k128 = pair128(k128Hi, k128Lo);
    __m128i x = _mm256_castsi256_si128(y0);
    x = fold128(x, k128, _mm256_extracti128_si256(y0, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y1));
    x = fold128(x, k128, _mm256_extracti128_si256(y1, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y2));
    x = fold128(x, k128, _mm256_extracti128_si256(y2, 1));
    x = fold128(x, k128, _mm256_castsi256_si128(y3));
    x = fold128(x, k128, _mm256_extracti128_si256(y3, 1));
    return finish128<Copy>(x, p, d, len);
}

// The same with 512-bit folding, len >= 256.
template <bool Copy> IBEX_CRC_TARGET_512 uint32_t fold_register512(uint32_t reg, const uint8_t *&p, uint8_t *&d, size_t &len) {
    __m512i z0 = take512<Copy>(p, d);
    __m512i z1 = take512<Copy>(p + 64, d + 64);
    __m512i z2 = take512<Copy>(p + 128, d + 128);
    __m512i z3 = take512<Copy>(p + 192, d + 192);
    z0 = _mm512_xor_si512(z0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(reg))));
    const size_t step = Copy ? 256 : 0;
    p += 256, d += step, len -= 256;
    const __m512i k2048 = pair512(k2048Hi, k2048Lo);
    for (; len >= 256; p += 256, d += step, len -= 256) {
        z0 = fold512(z0, k2048, take512<Copy>(p, d));
        z1 = fold512(z1, k2048, take512<Copy>(p + 64, d + 64));
        z2 = fold512(z2, k2048, take512<Copy>(p + 128, d + 128));
        z3 = fold512(z3, k2048, take512<Copy>(p + 192, d + 192));
    }
    // The four accumulators into one, then whole 64-byte blocks.
    const __m512i k512 = pair512(k512Hi, k512Lo);
    z0 = fold512(z0, k512, z1);
    z0 = fold512(z0, k512, z2);
    z0 = fold512(z0, k512, z3);
    for (const size_t step64 = Copy ? 64 : 0; len >= 64; p += 64, d += step64, len -= 64)
        z0 = fold512(z0, k512, take512<Copy>(p, d));
    // Its four 128-bit lanes, in byte order, into one.
    const __m128i k128 = pair128(k128Hi, k128Lo);
    __m128i x = _mm512_castsi512_si128(z0);
    x = fold128(x, k128, _mm512_extracti32x4_epi32(z0, 1));
    x = fold128(x, k128, _mm512_extracti32x4_epi32(z0, 2));
    x = fold128(x, k128, _mm512_extracti32x4_epi32(z0, 3));
    return finish128<Copy>(x, p, d, len);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

uint32_t crc32_isal(uint32_t crc, const uint8_t *p, size_t len) { return len ? crc32_gzip_refl(crc, p, len) : crc; }

// Both entry points at one width: with Copy, dst receives the bytes.
template <bool Copy> uint32_t run_at(unsigned bits, uint32_t crc, uint8_t *d, const uint8_t *p, size_t len) {
    // Without a copy the kernels never store; d then stays inside the source.
    if constexpr (!Copy) d = const_cast<uint8_t *>(p);
#if defined(__x86_64__)
    // Where 512-bit folding runs, so does ISA-L's AVX-512 kernel, which is faster than
    // 256-bit folding below kMinWide512.
    if (bits >= 512) {
        if (len >= kMinWide512) crc = ~fold_register512<Copy>(~crc, p, d, len);
    } else if (bits >= 256 && len >= kMinWide256) {
        crc = ~fold_register256<Copy>(~crc, p, d, len);
    }
#else
    (void)bits;
#endif
    // Short buffers (headers: ISA-L is as fast there) and the last few bytes.
    if constexpr (Copy)
        if (len) std::memcpy(d, p, len);
    return crc32_isal(crc, p, len);
}

unsigned detect_bits() {
#if defined(__x86_64__)
    const bool base = __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul") &&
                      __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("avx2");
    if (base && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return 512;
    if (base) return 256;
#endif
    return 0;
}

} // namespace

unsigned crc32_wide_bits() {
    static const unsigned bits = detect_bits();
    return bits;
}

uint32_t crc32_wide(uint32_t crc, const void *data, size_t len) {
    return run_at<false>(crc32_wide_bits(), crc, nullptr, static_cast<const uint8_t *>(data), len);
}

uint32_t crc32_copy(uint32_t crc, void *dst, const void *src, size_t len) {
    return run_at<true>(crc32_wide_bits(), crc, static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), len);
}

uint32_t crc32_wide_at(unsigned bits, uint32_t crc, const void *data, size_t len) {
    return run_at<false>(bits, crc, nullptr, static_cast<const uint8_t *>(data), len);
}

uint32_t crc32_copy_at(unsigned bits, uint32_t crc, void *dst, const void *src, size_t len) {
    return run_at<true>(bits, crc, static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), len);
}

} // namespace ibex::roce
