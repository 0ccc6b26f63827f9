// The GPU kernels' element arithmetic (allreduce/cuda/elementwise.cuh, compiled here for
// the host) against the CPU definition (allreduce/cpu/elementwise.h): every 16-bit
// value's conversions, and millions of random operand pairs per type and op, bit for
// bit. This is what checks the CUDA arithmetic on machines without a GPU.
#include <cstring>
#include <random>
#include <type_traits>

#include <gtest/gtest.h>

#include "allreduce/cpu/elementwise.h"
#include "allreduce/cuda/elementwise.cuh"
#include "tests/allreduce/cuda/nan_equal.h"

namespace ibex::coll {
namespace {

namespace g = gpu;
namespace c = cpu;

uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

TEST(CudaElementwise, SixteenBitConversionsMatchForEveryValue) {
    for (uint32_t h = 0; h < 65536; ++h) {
        const auto v = static_cast<uint16_t>(h);
        ASSERT_EQ(f32_bits(g::half_to_float(v)), f32_bits(c::f16_to_f32(v))) << std::hex << h;
        ASSERT_EQ(f32_bits(g::bfloat_to_float(v)), f32_bits(c::bf16_to_f32(v))) << std::hex << h;
    }
}

TEST(CudaElementwise, NarrowingMatchesOnEdgesAndRandomFloats) {
    std::mt19937 rng(1);
    auto check = [](uint32_t x) {
        float f;
        std::memcpy(&f, &x, 4);
        ASSERT_EQ(g::float_to_half(f), c::f32_to_f16(f)) << std::hex << x;
        ASSERT_EQ(g::float_to_bfloat(f), c::f32_to_bf16(f)) << std::hex << x;
    };
    // Every exponent with mantissas around the rounding points (ties, one either side).
    for (uint32_t sign : {0u, 0x80000000u})
        for (uint32_t e = 0; e < 256; ++e)
            for (uint32_t m : {0u, 1u, 0xfffu, 0x1000u, 0x1001u, 0x2000u, 0x3000u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u,
                               0x400000u, 0x7fffffu})
                check(sign | (e << 23) | m);
    for (int i = 0; i < 4000000; ++i) check(rng());
}

template <class G, class C> G to_g(C v) {
    G g;
    std::memcpy(&g, &v, sizeof v);
    return g;
}

template <class C> constexpr ibex_datatype_t type_of() {
    if constexpr (std::is_same_v<C, uint8_t>) return IBEX_U8;
    else if constexpr (std::is_same_v<C, int32_t>) return IBEX_I32;
    else if constexpr (std::is_same_v<C, int64_t>) return IBEX_I64;
    else if constexpr (std::is_same_v<C, c::f16_t>) return IBEX_F16;
    else if constexpr (std::is_same_v<C, c::bf16_t>) return IBEX_BF16;
    else if constexpr (std::is_same_v<C, float>) return IBEX_F32;
    else return IBEX_F64;
}

// Random operands of storage type C (CPU) / G (GPU), compared for one op.
template <class C, class G, int Op> void pairs(int n, uint32_t seed) {
    constexpr bool arithmetic = Op == IBEX_SUM || Op == IBEX_PROD || Op == IBEX_AVG;
    std::mt19937_64 rng(seed);
    for (int i = 0; i < n; ++i) {
        C a, b;
        uint64_t ra = rng(), rb = rng();
        std::memcpy(&a, &ra, sizeof a);
        std::memcpy(&b, &rb, sizeof b);
        if (i % 4 == 0) b = a; // equal operands (min/max ties, x - x style cases)
        const C want = c::combine<C, Op>(a, b);
        const G got = g::combine<G, Op>(to_g<G>(a), to_g<G>(b));
        ASSERT_TRUE(test::same_result(&got, &want, type_of<C>(), arithmetic)) << "op " << Op << " a 0x" << std::hex << ra << " b 0x" << rb;
    }
}

template <class C, class G> void all_ops(uint32_t seed) {
    pairs<C, G, IBEX_SUM>(300000, seed);
    pairs<C, G, IBEX_PROD>(300000, seed + 1);
    pairs<C, G, IBEX_MIN>(300000, seed + 2);
    pairs<C, G, IBEX_MAX>(300000, seed + 3);
    pairs<C, G, IBEX_AVG>(1000, seed + 4);
}

TEST(CudaElementwise, CombineMatchesForEveryTypeAndOp) {
    all_ops<uint8_t, uint8_t>(10);
    all_ops<int32_t, int32_t>(20);
    all_ops<int64_t, int64_t>(30);
    all_ops<c::f16_t, g::half_bits>(40);
    all_ops<c::bf16_t, g::bfloat_bits>(50);
    all_ops<float, float>(60);
    all_ops<double, double>(70);
}

template <class C, class G> void divide_all16(int nranks) {
    for (uint32_t h = 0; h < 65536; ++h) {
        C v;
        const auto bits = static_cast<uint16_t>(h);
        std::memcpy(&v, &bits, 2);
        const C want = c::divide(v, nranks);
        const G got = g::divide(to_g<G>(v), nranks);
        ASSERT_TRUE(test::same_result(&got, &want, type_of<C>(), true)) << std::hex << h << " / " << std::dec << nranks;
    }
}

TEST(CudaElementwise, AverageDivisionMatches) {
    for (int n : {1, 2, 3, 7, 64, 1000}) {
        divide_all16<c::f16_t, g::half_bits>(n);
        divide_all16<c::bf16_t, g::bfloat_bits>(n);
        std::mt19937_64 rng(static_cast<uint64_t>(n));
        for (int i = 0; i < 100000; ++i) {
            const uint64_t r = rng();
            float f;
            double d;
            int32_t i32;
            int64_t i64;
            uint8_t u8 = static_cast<uint8_t>(r);
            std::memcpy(&f, &r, 4);
            std::memcpy(&d, &r, 8);
            std::memcpy(&i32, &r, 4);
            std::memcpy(&i64, &r, 8);
            const float gf = g::divide(f, n), cf = c::divide(f, n);
            const double gd = g::divide(d, n), cd = c::divide(d, n);
            ASSERT_TRUE(test::same_result(&gf, &cf, IBEX_F32, true));
            ASSERT_TRUE(test::same_result(&gd, &cd, IBEX_F64, true));
            ASSERT_EQ(g::divide(i32, n), c::divide(i32, n));
            ASSERT_EQ(g::divide(i64, n), c::divide(i64, n));
            if (n < 256) { // u8 / 256 and more divides by 0 on the CPU
                ASSERT_EQ(g::divide(u8, n), c::divide(u8, n));
            }
        }
    }
}

} // namespace
} // namespace ibex::coll
