// The CUDA reduction kernels give the CPU kernels' bits for every type and op, on
// special values (NaN payloads, infinities, signed zeros, subnormals, integer overflow),
// on aligned buffers (16-byte packet path) and misaligned ones (element path), in place.
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "allreduce/cpu/reduce.h"
#include "allreduce/cuda/dispatch.h"
#include "allreduce/cuda/reduce.h"
#include "tests/allreduce/cuda/gpu.h"
#include "tests/allreduce/cuda/nan_equal.h"

namespace ibex::coll {
namespace {

using ibex::test::DeviceBuffer;

// Random bit patterns (every NaN payload, subnormal and infinity occurs for the 16-bit
// types) mixed, for the wide float types, with ordinary values and specials so sums and
// products stay meaningful.
std::vector<uint8_t> make_input(ibex_datatype_t type, size_t count, uint32_t seed) {
    const size_t es = ibex_datatype_size(type);
    std::vector<uint8_t> v(count * es);
    std::mt19937_64 rng(seed);
    for (auto &b : v) b = static_cast<uint8_t>(rng());
    if (type == IBEX_F32 || type == IBEX_F64) {
        std::uniform_real_distribution<double> val(-1e3, 1e3);
        const double inf = std::numeric_limits<double>::infinity();
        const double specials[] = {0.0, -0.0, inf, -inf, 5e-324, 1.17e-38, 1e-45, 3.4e38, 1.7e308};
        for (size_t i = 0; i < count; ++i) {
            const uint64_t pick = rng() % 8;
            if (pick == 0) continue; // keep the random bits (NaNs included)
            const double d = pick == 1 ? specials[rng() % (sizeof specials / sizeof *specials)] : val(rng);
            if (type == IBEX_F32) {
                const float f = static_cast<float>(d);
                std::memcpy(&v[i * 4], &f, 4);
            } else {
                std::memcpy(&v[i * 8], &d, 8);
            }
        }
    }
    return v;
}

const ibex_datatype_t kTypes[] = {IBEX_U8, IBEX_I32, IBEX_I64, IBEX_F16, IBEX_BF16, IBEX_F32, IBEX_F64};
const ibex_redop_t kOps[] = {IBEX_SUM, IBEX_PROD, IBEX_MIN, IBEX_MAX, IBEX_AVG};

// Runs one case on the GPU with the buffers `offset` elements into their allocations.
void check(ibex_datatype_t type, ibex_redop_t op, size_t count, size_t offset, bool in_place) {
    SCOPED_TRACE(std::string(ibex_datatype_name(type)) + " " + ibex_redop_name(op) + " count " +
                 std::to_string(count) + " offset " + std::to_string(offset) + (in_place ? " in place" : ""));
    const size_t es = ibex_datatype_size(type);
    const size_t bytes = count * es, off = offset * es;
    const auto a = make_input(type, count, static_cast<uint32_t>(count * 31 + type * 7 + op));
    const auto b = make_input(type, count, static_cast<uint32_t>(count * 17 + type * 5 + op + 1000));
    std::vector<uint8_t> expect(bytes);
    reduce_into(expect.data(), a.data(), b.data(), count, type, op);

    DeviceBuffer da(bytes + off), db(bytes + off), dout(bytes + off);
    da.upload(a.data(), bytes, off);
    db.upload(b.data(), bytes, off);
    void *out = in_place ? da.bytes_at(off) : dout.bytes_at(off);
    ASSERT_EQ(cuda_reduce_into(out, da.bytes_at(off), db.bytes_at(off), count, type, op, nullptr), IBEX_OK)
        << ibex_last_error();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> got(bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    const bool arithmetic = op == IBEX_SUM || op == IBEX_PROD || op == IBEX_AVG;
    for (size_t i = 0; i < count; ++i)
        if (!test::same_result(&got[i * es], &expect[i * es], type, arithmetic)) {
            uint64_t g = 0, e = 0, x = 0, y = 0;
            std::memcpy(&g, &got[i * es], es);
            std::memcpy(&e, &expect[i * es], es);
            std::memcpy(&x, &a[i * es], es);
            std::memcpy(&y, &b[i * es], es);
            FAIL() << "element " << i << ": a 0x" << std::hex << x << " b 0x" << y << " -> GPU 0x" << g << ", CPU 0x" << e;
        }
}

TEST(CudaReduce, MatchesCpuForEveryTypeAndOp) {
    IBEX_REQUIRE_GPU();
    for (ibex_datatype_t t : kTypes)
        for (ibex_redop_t op : kOps)
            for (size_t count : {size_t(1), size_t(7), size_t(4099), size_t(1) << 18})
                for (size_t offset : {size_t(0), size_t(1)}) check(t, op, count, offset, false);
}

// The one-pass fold of the mapped collectives: n inputs in rank order (then the average)
// into several outputs, one of them an input (in place), with the CPU's pairwise bits, on
// the packet path and the element path.
TEST(CudaReduce, FoldMatchesThePairwiseCpuFoldIntoEveryOutput) {
    IBEX_REQUIRE_GPU();
    for (ibex_datatype_t t : kTypes)
        for (ibex_redop_t op : kOps)
            for (int n : {1, 2, 3, 8})
                for (size_t offset : {size_t(0), size_t(1)}) {
                    SCOPED_TRACE(std::string(ibex_datatype_name(t)) + " " + ibex_redop_name(op) + " inputs " +
                                 std::to_string(n) + " offset " + std::to_string(offset));
                    const size_t count = 4099, es = ibex_datatype_size(t), bytes = count * es, off = offset * es;
                    std::vector<std::vector<uint8_t>> in;
                    std::vector<std::unique_ptr<DeviceBuffer>> din, dout;
                    for (int k = 0; k < n; ++k) {
                        in.push_back(make_input(t, count, 500u + static_cast<uint32_t>(k * 13 + t * 3 + op)));
                        din.push_back(std::make_unique<DeviceBuffer>(bytes + off));
                        din.back()->upload(in.back().data(), bytes, off);
                        dout.push_back(std::make_unique<DeviceBuffer>(bytes + off));
                    }
                    std::vector<uint8_t> expect = in[0];
                    for (int k = 1; k < n; ++k) reduce_into(expect.data(), expect.data(), in[k].data(), count, t, op);
                    if (op == IBEX_AVG) finalize_avg(expect.data(), count, t, n);
                    // Outputs: each rank's own buffer, the last being input 0 itself.
                    std::vector<void *> outs;
                    std::vector<const void *> ins;
                    for (int k = 0; k < n; ++k) ins.push_back(din[k]->bytes_at(off));
                    for (int k = 0; k + 1 < n; ++k) outs.push_back(dout[k]->bytes_at(off));
                    outs.push_back(din[0]->bytes_at(off));
                    ASSERT_EQ(cuda_fold_into(outs.data(), n, ins.data(), n, count, t, op, n, nullptr), IBEX_OK)
                        << ibex_last_error();
                    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
                    const bool arithmetic = op == IBEX_SUM || op == IBEX_PROD || op == IBEX_AVG;
                    for (void *o : outs) {
                        std::vector<uint8_t> got(bytes);
                        ASSERT_EQ(cudaMemcpy(got.data(), o, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
                        for (size_t i = 0; i < count; ++i)
                            ASSERT_TRUE(test::same_result(&got[i * es], &expect[i * es], t, arithmetic)) << "element " << i;
                    }
                }
}

TEST(CudaReduce, InPlace) {
    IBEX_REQUIRE_GPU();
    for (ibex_datatype_t t : kTypes) check(t, IBEX_SUM, 10007, 0, true);
}

TEST(CudaReduce, FinalizeAvgMatchesCpu) {
    IBEX_REQUIRE_GPU();
    for (ibex_datatype_t t : kTypes)
        for (int nranks : {1, 3, 7, 64}) {
            SCOPED_TRACE(std::string(ibex_datatype_name(t)) + " / " + std::to_string(nranks));
            const size_t count = 5003, bytes = count * ibex_datatype_size(t);
            auto v = make_input(t, count, 99u + static_cast<uint32_t>(t));
            DeviceBuffer d(bytes);
            d.upload(v.data(), bytes);
            ASSERT_EQ(cuda_finalize_avg(d.p, count, t, nranks, nullptr), IBEX_OK) << ibex_last_error();
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            finalize_avg(v.data(), count, t, nranks);
            std::vector<uint8_t> got(bytes);
            d.download(got.data(), bytes);
            const size_t es = ibex_datatype_size(t);
            for (size_t i = 0; i < count; ++i)
                ASSERT_TRUE(test::same_result(&got[i * es], &v[i * es], t, true)) << "element " << i;
        }
}

TEST(CudaReduce, DispatchChoosesTheGpuForDeviceMemory) {
    IBEX_REQUIRE_GPU();
    const size_t count = 1000, bytes = count * sizeof(float);
    std::vector<float> a(count), b(count), expect(count), got(count);
    for (size_t i = 0; i < count; ++i) a[i] = float(i) * 0.5f, b[i] = 3.0f - float(i);
    reduce_into(expect.data(), a.data(), b.data(), count, IBEX_F32, IBEX_PROD);
    DeviceBuffer da(bytes), db(bytes);
    EXPECT_TRUE(is_device_pointer(da.p));
    EXPECT_EQ(ibex_memory_type(da.p), IBEX_MEMORY_CUDA_DEVICE);
    ASSERT_EQ(copy_any(da.p, a.data(), bytes), IBEX_OK) << ibex_last_error(); // host -> device
    ASSERT_EQ(copy_any(db.p, b.data(), bytes), IBEX_OK);
    ASSERT_EQ(reduce_into_any(da.p, da.p, db.p, count, IBEX_F32, IBEX_PROD), IBEX_OK) << ibex_last_error();
    ASSERT_EQ(copy_any(got.data(), da.p, bytes), IBEX_OK); // device -> host, synchronous
    EXPECT_EQ(std::memcmp(got.data(), expect.data(), bytes), 0);
    // Mixed: a device result with a pageable host operand, and a host result with a
    // device operand (the collectives' landing buffers are host memory).
    ASSERT_EQ(copy_any(da.p, a.data(), bytes), IBEX_OK);
    ASSERT_EQ(reduce_into_any(da.p, da.p, b.data(), count, IBEX_F32, IBEX_PROD), IBEX_OK) << ibex_last_error();
    ASSERT_EQ(copy_any(got.data(), da.p, bytes), IBEX_OK);
    EXPECT_EQ(std::memcmp(got.data(), expect.data(), bytes), 0);
    std::vector<float> host_out(count);
    ASSERT_EQ(reduce_into_any(host_out.data(), a.data(), db.p, count, IBEX_F32, IBEX_PROD), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(std::memcmp(host_out.data(), expect.data(), bytes), 0);
}

TEST(CudaReduce, RejectsBadArguments) {
    EXPECT_EQ(cuda_reduce_into(nullptr, nullptr, nullptr, 1, IBEX_F32, static_cast<ibex_redop_t>(9), nullptr),
              IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(cuda_finalize_avg(nullptr, 1, IBEX_F32, 0, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(cuda_reduce_into(nullptr, nullptr, nullptr, 0, IBEX_F32, IBEX_SUM, nullptr), IBEX_OK); // nothing to do
    void *outs[kMaxFold + 1] = {};
    const void *ins[kMaxFold + 1] = {};
    EXPECT_EQ(cuda_fold_into(outs, 1, ins, kMaxFold + 1, 1, IBEX_F32, IBEX_SUM, 1, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("inputs"), std::string::npos) << ibex_last_error();
    EXPECT_EQ(cuda_fold_into(outs, 0, ins, 1, 1, IBEX_F32, IBEX_SUM, 1, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(cuda_fold_into(outs, 1, ins, 1, 1, IBEX_F32, IBEX_AVG, 0, nullptr), IBEX_ERR_INVALID_ARGUMENT);
}

TEST(CudaReduce, WithoutAGpuTheLaunchFailsWithADetail) {
    if (cuda::available()) GTEST_SKIP() << "a GPU is present: covered by the other tests";
    int dummy[4] = {};
    EXPECT_EQ(cuda_reduce_into(dummy, dummy, dummy, 4, IBEX_I32, IBEX_SUM, nullptr), IBEX_ERR_SYSTEM);
    EXPECT_NE(std::string(ibex_last_error()).find("cuda_reduce_into"), std::string::npos) << ibex_last_error();
}

} // namespace
} // namespace ibex::coll
