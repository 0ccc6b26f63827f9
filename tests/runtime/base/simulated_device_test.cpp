// The simulated copy engine (runtime/base/simulated_device.h): copies to simulated GPU
// memory that finish by the clock, one after another as on a stream, so that a fence is
// done only once its last copy has landed, and the copies behind it wait their turn.
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/simulated_device.h"

namespace {

namespace sim = ibex::cuda::simulated;
using Clock = std::chrono::steady_clock;

// Polls the fence until done, at most `bound`; the time it took.
Clock::duration wait_done(ibex::cuda::CopyFence &f, Clock::duration bound) {
    const auto start = Clock::now();
    while (!ibex::cuda::copies_done(f) && Clock::now() - start < bound)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    return Clock::now() - start;
}

TEST(SimulatedCopyEngine, FencesCompleteByTheClockInQueueOrder) {
    constexpr size_t kBytes = 1 << 20;
    void *view = mmap(nullptr, kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(view, MAP_FAILED);
    std::vector<uint8_t> backing(kBytes, 0), first(kBytes, 1), second(kBytes, 2);
    ASSERT_TRUE(sim::add_range(view, kBytes, backing.data()));
    // 1 MiB at 4 bytes per microsecond: 262 ms per copy, plus 50 ms before each.
    sim::set_copy_engine(4, 50000);
    ibex::cuda::CopyFence a, b;
    ASSERT_EQ(ibex::cuda::copy_async(view, first.data(), kBytes, 0), IBEX_OK);
    ASSERT_EQ(ibex::cuda::fence_copies(&a), IBEX_OK);
    ASSERT_EQ(ibex::cuda::copy_async(view, second.data(), kBytes, 0), IBEX_OK);
    ASSERT_EQ(ibex::cuda::fence_copies(&b), IBEX_OK);
    EXPECT_FALSE(ibex::cuda::copies_done(a)) << "a copy of 312 ms landed at once";
    EXPECT_EQ(backing[0], 0) << "the bytes moved before the fence completed";
    const auto took = wait_done(a, std::chrono::seconds(10));
    EXPECT_GE(took, std::chrono::milliseconds(250));
    EXPECT_EQ(backing[kBytes - 1], 1);
    // The second copy started only when the first had landed.
    EXPECT_FALSE(ibex::cuda::copies_done(b)) << "the second copy ran beside the first";
    EXPECT_EQ(backing[0], 1);
    wait_done(b, std::chrono::seconds(10));
    EXPECT_TRUE(ibex::cuda::copies_done(b));
    EXPECT_EQ(backing[0], 2);
    // Off again: copies happen at once.
    sim::set_copy_engine(0, 0);
    ASSERT_EQ(ibex::cuda::copy_async(view, first.data(), kBytes, 0), IBEX_OK);
    EXPECT_EQ(backing[0], 1);
    sim::remove_range(view);
    munmap(view, kBytes);
}

} // namespace
