// Both kernel paths (scalar, AVX2+F16C when this CPU has them) against the plain reference
// in reduce_reference.h, bit for bit: every type x op, counts around every vector width
// (tails), unaligned pointers, out aliasing a or b, NaN/inf/subnormal operands, and the
// division of IBEX_AVG. Also the run-time choice of path and the C name functions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "allreduce/cpu/kernels.h"
#include "allreduce/cpu/reduce.h"
#include "tests/allreduce/cpu/reduce_reference.h"

namespace {

using ibex::coll::cpu::KernelTable;
namespace ref = ibex::test::ref;

constexpr ibex_datatype_t kTypes[] = {IBEX_U8, IBEX_I32, IBEX_I64, IBEX_F16, IBEX_BF16, IBEX_F32, IBEX_F64};
constexpr ibex_redop_t kOps[] = {IBEX_SUM, IBEX_PROD, IBEX_MIN, IBEX_MAX, IBEX_AVG};
// Around 8/16/32/64-element strides (one and two vectors per pass) and a long run.
constexpr size_t kCounts[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 1000, 4099};

bool is_float(ibex_datatype_t t) { return t == IBEX_F16 || t == IBEX_BF16 || t == IBEX_F32 || t == IBEX_F64; }

bool elem_is_nan(ibex_datatype_t t, const uint8_t *p) { return is_float(t) && std::isnan(ref::as_double(t, p)); }

// A value of type t for slot i: mixes random bit patterns (every class: NaN, inf,
// subnormals, huge), small "realistic" numbers whose sums/products stay meaningful, and
// fixed specials.
void make_value(ibex_datatype_t t, std::mt19937_64 &rng, uint8_t *out) {
    const uint64_t r = rng();
    const int pick = static_cast<int>(r % 8);
    const size_t sz = ibex_datatype_size(t);
    if (!is_float(t) || pick < 3) { // random bits
        const uint64_t bits = rng();
        std::memcpy(out, &bits, sz);
        return;
    }
    const double small = (static_cast<int>((r >> 8) % 2001) - 1000) / 64.0; // exact in all float types
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 6.1e-5f, 5.96e-8f, 1e-40f, 3.0e38f};
    double v = small;
    if (pick == 7) v = specials[(r >> 20) % (sizeof specials / sizeof specials[0])];
    switch (t) {
    case IBEX_F32: { const float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
    case IBEX_F64: std::memcpy(out, &v, 8); break;
    case IBEX_F16: { const uint16_t h = ref::f16_encode(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    default: { const uint16_t h = ref::bf16_encode(static_cast<float>(v)); std::memcpy(out, &h, 2); break; }
    }
}

struct Case {
    std::vector<uint8_t> a, b, expect;
};

// Inputs and the reference result. For sum/prod two NaNs with different payloads would
// leave the survivor to the compiler's operand order, so a NaN pair is made identical;
// min/max define the survivor (b's), so they keep distinct payloads.
Case make_case(ibex_datatype_t t, ibex_redop_t op, size_t count, uint64_t seed) {
    const size_t sz = ibex_datatype_size(t);
    std::mt19937_64 rng(seed);
    Case c;
    c.a.resize(count * sz);
    c.b.resize(count * sz);
    c.expect.resize(count * sz);
    for (size_t i = 0; i < count; ++i) {
        make_value(t, rng, &c.a[i * sz]);
        make_value(t, rng, &c.b[i * sz]);
        const bool pair_nan = elem_is_nan(t, &c.a[i * sz]) && elem_is_nan(t, &c.b[i * sz]);
        if (pair_nan && (op == IBEX_SUM || op == IBEX_PROD || op == IBEX_AVG))
            std::memcpy(&c.b[i * sz], &c.a[i * sz], sz);
        ref::element(t, op, &c.expect[i * sz], &c.a[i * sz], &c.b[i * sz]);
    }
    return c;
}

std::string first_mismatch(ibex_datatype_t t, const uint8_t *got, const uint8_t *want, const Case &c, size_t count) {
    const size_t sz = ibex_datatype_size(t);
    for (size_t i = 0; i < count; ++i) {
        if (std::memcmp(got + i * sz, want + i * sz, sz) != 0) {
            auto hex = [sz](const uint8_t *p) {
                uint64_t v = 0;
                std::memcpy(&v, p, sz);
                char buf[32];
                std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
                return std::string(buf);
            };
            return "element " + std::to_string(i) + ": a=" + hex(&c.a[i * sz]) + " b=" + hex(&c.b[i * sz]) +
                   " got " + hex(got + i * sz) + " want " + hex(want + i * sz);
        }
    }
    return "";
}

std::vector<const KernelTable *> paths() {
    std::vector<const KernelTable *> v{&ibex::coll::cpu::scalar_kernels()};
    if (const KernelTable *simd = ibex::coll::cpu::avx2_kernels()) v.push_back(simd);
    return v;
}

class ReduceKernels : public ::testing::TestWithParam<std::tuple<ibex_datatype_t, ibex_redop_t>> {};

TEST_P(ReduceKernels, EveryPathMatchesReferenceBitForBit) {
    const auto [type, op] = GetParam();
    const size_t sz = ibex_datatype_size(type);
    for (const KernelTable *k : paths()) {
        for (size_t count : kCounts) {
            const Case c = make_case(type, op, count, 1000 * count + 10 * type + op);
            // Out of place, at an odd byte offset from any vector alignment.
            std::vector<uint8_t> a(c.a.size() + sz), b(c.b.size() + sz), out(c.a.size() + sz, 0xee);
            std::copy(c.a.begin(), c.a.end(), a.begin() + static_cast<long>(sz)); // count 0: no memcpy from null
            std::copy(c.b.begin(), c.b.end(), b.begin() + static_cast<long>(sz));
            k->reduce[type][op](out.data() + sz, a.data() + sz, b.data() + sz, count);
            ASSERT_EQ(first_mismatch(type, out.data() + sz, c.expect.data(), c, count), "")
                << k->name << " " << ibex_datatype_name(type) << " " << ibex_redop_name(op) << " count " << count;
            EXPECT_TRUE(std::all_of(out.begin(), out.begin() + static_cast<long>(sz), [](uint8_t x) { return x == 0xee; }))
                << "wrote before out";
            // In place into a, then into b.
            std::vector<uint8_t> ia = c.a, ib = c.b;
            k->reduce[type][op](ia.data(), ia.data(), c.b.data(), count);
            ASSERT_EQ(first_mismatch(type, ia.data(), c.expect.data(), c, count), "")
                << k->name << " out == a, " << ibex_datatype_name(type) << " " << ibex_redop_name(op) << " count " << count;
            k->reduce[type][op](ib.data(), c.a.data(), ib.data(), count);
            ASSERT_EQ(first_mismatch(type, ib.data(), c.expect.data(), c, count), "")
                << k->name << " out == b, " << ibex_datatype_name(type) << " " << ibex_redop_name(op) << " count " << count;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceKernels, ::testing::Combine(::testing::ValuesIn(kTypes), ::testing::ValuesIn(kOps)),
                         [](const auto &info) {
                             return std::string(ibex_datatype_name(std::get<0>(info.param))) + "_" +
                                    ibex_redop_name(std::get<1>(info.param));
                         });

TEST(ReduceKernels, AverageDividesOnceLikeTheReference) {
    for (const KernelTable *k : paths()) {
        for (ibex_datatype_t type : kTypes) {
            const size_t sz = ibex_datatype_size(type);
            for (int nranks : {1, 2, 3, 5, 8, 256, 1000}) {
                for (size_t count : {size_t{1}, size_t{7}, size_t{17}, size_t{100}}) {
                    const Case c = make_case(type, IBEX_SUM, count, 77 + count + static_cast<uint64_t>(nranks));
                    std::vector<uint8_t> got = c.a, want = c.a;
                    for (size_t i = 0; i < count; ++i) ref::divide(type, &want[i * sz], nranks);
                    k->avg[type](got.data(), count, nranks);
                    ASSERT_EQ(first_mismatch(type, got.data(), want.data(), c, count), "")
                        << k->name << " " << ibex_datatype_name(type) << " / " << nranks;
                }
            }
        }
    }
}

TEST(ReduceKernels, SignedIntegersWrapAroundAndAverageTruncatesTowardZero) {
    const int32_t a[2] = {INT32_MAX, -7};
    const int32_t b[2] = {1, 0};
    int32_t out[2];
    ibex::coll::reduce_into(out, a, b, 2, IBEX_I32, IBEX_SUM);
    EXPECT_EQ(out[0], INT32_MIN);
    ibex::coll::finalize_avg(out, 2, IBEX_I32, 2);
    EXPECT_EQ(out[0], INT32_MIN / 2);
    EXPECT_EQ(out[1], -3); // -7 / 2 truncated, not floored
    const int64_t x = INT64_MAX, y = 3;
    int64_t p = 0;
    ibex::coll::reduce_into(&p, &x, &y, 1, IBEX_I64, IBEX_PROD);
    EXPECT_EQ(p, INT64_MAX - 2); // (2^63 - 1) * 3 mod 2^64 = 2^63 - 3
}

TEST(ReduceKernels, FloatMinMaxPropagateNaN) {
    const float a[3] = {1.0f, NAN, 2.0f};
    const float b[3] = {NAN, 1.0f, -INFINITY};
    float mn[3], mx[3];
    ibex::coll::reduce_into(mn, a, b, 3, IBEX_F32, IBEX_MIN);
    ibex::coll::reduce_into(mx, a, b, 3, IBEX_F32, IBEX_MAX);
    EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]) && std::isnan(mx[0]) && std::isnan(mx[1]));
    EXPECT_EQ(mn[2], -INFINITY);
    EXPECT_EQ(mx[2], 2.0f);
}

TEST(ReduceKernels, HalfSubnormalsSumExactlyAndOverflowToInfinity) {
    // 0x0001 is 2^-24, the smallest f16 subnormal; 0x03ff + 0x0001 carries into the first normal.
    const uint16_t a[3] = {0x0001, 0x03ff, 0x7bff};
    const uint16_t b[3] = {0x0001, 0x0001, 0x7bff};
    uint16_t out[3];
    ibex::coll::reduce_into(out, a, b, 3, IBEX_F16, IBEX_SUM);
    EXPECT_EQ(out[0], 0x0002);
    EXPECT_EQ(out[1], 0x0400);
    EXPECT_EQ(out[2], 0x7c00); // 65504 + 65504 -> +inf
}

// Started as a fresh process by the test below (the choice is made once per process, and
// a forked child would inherit the parent's): print the choice and exit before any test.
const int isa_probe = [] {
    if (std::getenv("IBEX_REDUCE_ISA_PROBE")) {
        std::printf("%s\n", ibex::coll::reduce_isa());
        std::fflush(stdout);
        std::_Exit(0);
    }
    return 0;
}();

std::string isa_of_fresh_process(const char *setting) {
    char self[4096] = {};
    if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return "no /proc/self/exe";
    const std::string cmd = std::string("env ") + (setting ? "IBEX_REDUCE_ISA=" + std::string(setting) : "-u IBEX_REDUCE_ISA") +
                            " IBEX_REDUCE_ISA_PROBE=1 '" + self + "'";
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) return "popen failed";
    char line[64] = {};
    const bool got = std::fgets(line, sizeof line, p) != nullptr;
    pclose(p);
    std::string s = got ? line : "";
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

TEST(ReduceIsa, AutoPicksAvx2WhereTheCpuHasItAndTheEnvironmentForcesScalar) {
    const bool simd = ibex::coll::cpu::avx2_kernels() != nullptr;
    EXPECT_EQ(isa_of_fresh_process(nullptr), simd ? "avx2+f16c" : "scalar");
    EXPECT_EQ(isa_of_fresh_process("scalar"), "scalar");
    EXPECT_EQ(isa_of_fresh_process("auto"), simd ? "avx2+f16c" : "scalar");
    EXPECT_EQ(std::string(ibex::coll::reduce_isa()), ibex::coll::cpu::active_kernels().name);
}

TEST(Datatype, SizesAndNamesAsNcclTestsPrintsThem) {
    const struct {
        ibex_datatype_t t;
        size_t size;
        const char *name;
    } rows[] = {{IBEX_U8, 1, "uint8"},    {IBEX_I32, 4, "int32"}, {IBEX_I64, 8, "int64"}, {IBEX_F16, 2, "half"},
                {IBEX_BF16, 2, "bfloat16"}, {IBEX_F32, 4, "float"}, {IBEX_F64, 8, "double"}};
    for (const auto &r : rows) {
        EXPECT_EQ(ibex_datatype_size(r.t), r.size);
        EXPECT_STREQ(ibex_datatype_name(r.t), r.name);
    }
    EXPECT_EQ(ibex_datatype_size(IBEX_DATATYPE_COUNT), 0u);
    EXPECT_STREQ(ibex_redop_name(IBEX_SUM), "sum");
    EXPECT_STREQ(ibex_redop_name(IBEX_PROD), "prod");
    EXPECT_STREQ(ibex_redop_name(IBEX_MIN), "min");
    EXPECT_STREQ(ibex_redop_name(IBEX_MAX), "max");
    EXPECT_STREQ(ibex_redop_name(IBEX_AVG), "avg");
}

} // namespace
