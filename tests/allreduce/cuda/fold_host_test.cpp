// The mapped collectives' fold kernel body (allreduce/cuda/fold.cuh), compiled here for the
// host and run as a grid of threads would run it, against the CPU's pairwise fold
// (reduce_into in rank order, then finalize_avg): every type and op, 1 to 8 inputs, on
// 16-byte aligned buffers (the packet path) and misaligned ones (the element path), with
// the last output being input 0 itself (in place), and with one thread or several
// interleaved. Bit for bit, NaNs from arithmetic compared as a class (nan_equal.h).
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "allreduce/cpu/reduce.h"
#include "allreduce/cuda/fold.cuh"
#include "tests/allreduce/cuda/nan_equal.h"

namespace ibex::coll {
namespace {

const ibex_datatype_t kTypes[] = {IBEX_U8, IBEX_I32, IBEX_I64, IBEX_F16, IBEX_BF16, IBEX_F32, IBEX_F64};
const ibex_redop_t kOps[] = {IBEX_SUM, IBEX_PROD, IBEX_MIN, IBEX_MAX, IBEX_AVG};

// A buffer whose data starts `lead` bytes after a 16-byte boundary.
struct Buffer {
    std::vector<uint8_t> raw;
    uint8_t *data;
    Buffer(size_t bytes, size_t lead) : raw(bytes + 32) {
        const auto a = reinterpret_cast<uintptr_t>(raw.data());
        data = raw.data() + ((16 - a % 16) % 16) + lead;
    }
};

template <class T, int Op> void run_grid(const gpu::FoldPointers &p, size_t count, bool packets, int avg, size_t threads) {
    for (size_t t = 0; t < threads; ++t) gpu::fold_share<T, Op>(p, count, packets, avg, t, threads);
}

template <class T> void run_op(ibex_redop_t op, const gpu::FoldPointers &p, size_t count, bool packets, int n, size_t threads) {
    switch (op) {
    case IBEX_SUM: run_grid<T, IBEX_SUM>(p, count, packets, 0, threads); break;
    case IBEX_AVG: run_grid<T, IBEX_SUM>(p, count, packets, n, threads); break;
    case IBEX_PROD: run_grid<T, IBEX_PROD>(p, count, packets, 0, threads); break;
    case IBEX_MIN: run_grid<T, IBEX_MIN>(p, count, packets, 0, threads); break;
    case IBEX_MAX: run_grid<T, IBEX_MAX>(p, count, packets, 0, threads); break;
    default: break;
    }
}

void run_type(ibex_datatype_t t, ibex_redop_t op, const gpu::FoldPointers &p, size_t count, bool packets, int n,
              size_t threads) {
    switch (t) {
    case IBEX_U8: run_op<uint8_t>(op, p, count, packets, n, threads); break;
    case IBEX_I32: run_op<int32_t>(op, p, count, packets, n, threads); break;
    case IBEX_I64: run_op<int64_t>(op, p, count, packets, n, threads); break;
    case IBEX_F16: run_op<gpu::half_bits>(op, p, count, packets, n, threads); break;
    case IBEX_BF16: run_op<gpu::bfloat_bits>(op, p, count, packets, n, threads); break;
    case IBEX_F32: run_op<float>(op, p, count, packets, n, threads); break;
    case IBEX_F64: run_op<double>(op, p, count, packets, n, threads); break;
    default: break;
    }
}

TEST(CudaFoldHost, TheKernelBodyGivesThePairwiseCpuBits) {
    std::mt19937_64 rng(7);
    for (ibex_datatype_t t : kTypes)
        for (ibex_redop_t op : kOps)
            for (int n : {1, 2, 3, 8})
                for (size_t lead : {size_t(0), ibex_datatype_size(t)})
                    for (size_t threads : {size_t(1), size_t(7)}) {
                        SCOPED_TRACE(std::string(ibex_datatype_name(t)) + " " + ibex_redop_name(op) + " inputs " +
                                     std::to_string(n) + " lead " + std::to_string(lead) + " threads " +
                                     std::to_string(threads));
                        const size_t count = 1037, es = ibex_datatype_size(t), bytes = count * es;
                        std::vector<Buffer> in, out;
                        for (int k = 0; k < n; ++k) {
                            in.emplace_back(bytes, lead);
                            for (size_t b = 0; b < bytes; ++b) in.back().data[b] = static_cast<uint8_t>(rng());
                            out.emplace_back(bytes, lead);
                        }
                        std::vector<uint8_t> want(in[0].data, in[0].data + bytes);
                        for (int k = 1; k < n; ++k) reduce_into(want.data(), want.data(), in[k].data, count, t, op);
                        if (op == IBEX_AVG) finalize_avg(want.data(), count, t, n);
                        gpu::FoldPointers p{};
                        for (int k = 0; k < n; ++k) p.in[k] = in[k].data;
                        for (int k = 0; k + 1 < n; ++k) p.out[k] = out[k].data;
                        p.out[n - 1] = in[0].data; // in place
                        p.nin = p.nout = n;
                        run_type(t, op, p, count, lead == 0, n, threads);
                        const bool arithmetic = op == IBEX_SUM || op == IBEX_PROD || op == IBEX_AVG;
                        for (int k = 0; k < n; ++k) {
                            const auto *got = static_cast<const uint8_t *>(p.out[k]);
                            for (size_t i = 0; i < count; ++i)
                                ASSERT_TRUE(test::same_result(got + i * es, &want[i * es], t, arithmetic))
                                    << "output " << k << " element " << i;
                        }
                    }
}

} // namespace
} // namespace ibex::coll
