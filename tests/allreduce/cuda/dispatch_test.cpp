// The collectives' host/GPU dispatch on host memory (everywhere) and device memory
// (on a CUDA host).
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include <ibex/ibex.h>

#include "allreduce/cpu/reduce.h"
#include "allreduce/cuda/dispatch.h"

namespace ibex::coll {
namespace {

TEST(CollDispatch, HostMemoryTakesTheCpuKernels) {
    std::vector<float> a = {1.5f, -2.0f, 3.25f}, b = {0.5f, 4.0f, -1.0f}, out(3), ref(3);
    EXPECT_FALSE(is_device_pointer(a.data()));
    EXPECT_EQ(ibex_memory_type(a.data()), IBEX_MEMORY_HOST);
    ASSERT_EQ(reduce_into_any(out.data(), a.data(), b.data(), 3, IBEX_F32, IBEX_MAX), IBEX_OK) << ibex_last_error();
    reduce_into(ref.data(), a.data(), b.data(), 3, IBEX_F32, IBEX_MAX);
    EXPECT_EQ(out, ref);
    ASSERT_EQ(finalize_avg_any(out.data(), 3, IBEX_F32, 2), IBEX_OK);
    finalize_avg(ref.data(), 3, IBEX_F32, 2);
    EXPECT_EQ(out, ref);
    std::vector<float> copy(3);
    ASSERT_EQ(copy_any(copy.data(), out.data(), sizeof(float) * 3), IBEX_OK);
    EXPECT_EQ(copy, out);
}

TEST(CollDispatch, NullAndStackPointersAreHost) {
    int x = 0;
    EXPECT_FALSE(is_device_pointer(nullptr));
    EXPECT_FALSE(is_device_pointer(&x));
    EXPECT_EQ(ibex_memory_type(nullptr), IBEX_MEMORY_HOST);
    if (!ibex_cuda_available()) {
        EXPECT_STRNE(cuda::unavailable_reason(), "");
    }
}

} // namespace
} // namespace ibex::coll
