// The software 16-bit float conversions the scalar path uses, against the reference and,
// where the CPU has F16C, against the hardware instructions the SIMD path uses: every f16
// value, and about a million f32 values spread over all exponents (plus every rounding
// boundary of the f16 subnormal range) going back.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <immintrin.h>

#include "allreduce/cpu/elementwise.h"
#include "allreduce/cpu/kernels.h"
#include "tests/allreduce/cpu/reduce_reference.h"

namespace {

namespace cpu = ibex::coll::cpu;
namespace ref = ibex::test::ref;

// The library's own check (cpuid): F16C is there exactly when the AVX2 kernels are.
bool have_f16c() { return cpu::avx2_kernels() != nullptr; }

__attribute__((target("avx2,f16c"))) uint32_t hw_f16_to_f32_bits(uint16_t h) {
    return std::bit_cast<uint32_t>(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))));
}
__attribute__((target("avx2,f16c"))) uint16_t hw_f32_to_f16(float f) {
    return static_cast<uint16_t>(_mm_cvtsi128_si32(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT)) & 0xffff);
}

TEST(HalfConversion, EveryHalfWidensExactly) {
    const bool hw = have_f16c();
    for (uint32_t h = 0; h <= 0xffff; ++h) {
        const uint32_t soft = std::bit_cast<uint32_t>(cpu::f16_to_f32(static_cast<uint16_t>(h)));
        ASSERT_EQ(soft, std::bit_cast<uint32_t>(ref::f16_decode(static_cast<uint16_t>(h)))) << std::hex << h;
        if (hw) {
            ASSERT_EQ(soft, hw_f16_to_f32_bits(static_cast<uint16_t>(h))) << "F16C differs at 0x" << std::hex << h;
        }
        // Round trip is the identity except that signalling NaNs come back quiet.
        const uint16_t back = cpu::f32_to_f16(cpu::f16_to_f32(static_cast<uint16_t>(h)));
        ASSERT_EQ(back, ref::f16_is_nan(static_cast<uint16_t>(h)) ? (h | 0x200) : h) << std::hex << h;
    }
}

void check_narrowing(uint32_t bits, bool hw) {
    const float f = std::bit_cast<float>(bits);
    const uint16_t soft = cpu::f32_to_f16(f);
    ASSERT_EQ(soft, ref::f16_encode(f)) << "f16 of 0x" << std::hex << bits;
    if (hw) {
        ASSERT_EQ(soft, hw_f32_to_f16(f)) << "F16C differs for 0x" << std::hex << bits;
    }
    ASSERT_EQ(cpu::f32_to_bf16(f), ref::bf16_encode(f)) << "bf16 of 0x" << std::hex << bits;
}

TEST(HalfConversion, FloatsNarrowToNearestEven) {
    const bool hw = have_f16c();
    // An odd stride visits every exponent and sign with varied low mantissa bits.
    for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4093) check_narrowing(static_cast<uint32_t>(bits), hw);
    // Exact halfway points and their neighbours, across the f16 subnormal/normal range and
    // the overflow threshold, where round-to-even decides.
    for (uint32_t exp = 100; exp <= 143; ++exp) {
        for (uint32_t m = 0; m < (1u << 10); ++m) {
            const uint32_t center = (exp << 23) | (m << 13) | 0x1000u; // f16 normal halfway
            for (uint32_t b : {center - 1, center, center + 1, (exp << 23) | (m << 13)}) {
                check_narrowing(b, hw);
                check_narrowing(b | 0x80000000u, hw);
            }
        }
        const uint32_t shift = exp < 113 ? 126 - exp : 13; // halfway of a subnormal step
        if (shift < 23) check_narrowing((exp << 23) | (1u << (shift - 1)), hw);
    }
}

} // namespace
