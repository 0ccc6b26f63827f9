// The registration cache on a real protection domain: reuse of covering registrations,
// the bound on entries, entries pinned by the user or needed by the running collective.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <vector>

#include "allreduce/reg_cache.h"
#include "runtime/base/simulated_device.h"
#include "tests/support/endpoint.h"
#include "transport/soft/engine/staging.h"

namespace ibex::coll {
namespace {

class RegCacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        IBEX_ASSERT_OK(ibex_open_device("udp:lo", nullptr, &ctx_));
        IBEX_ASSERT_OK(ibex_alloc_pd(ctx_, &pd_));
    }
    void TearDown() override {
        cache_.reset();
        if (pd_) ibex_dealloc_pd(pd_);
        if (ctx_) ibex_close_device(ctx_);
    }
    ibex_context_t *ctx_ = nullptr;
    ibex_pd_t *pd_ = nullptr;
    std::unique_ptr<RegCache> cache_;
};

TEST_F(RegCacheTest, CoveringRegistrationIsReused) {
    cache_ = std::make_unique<RegCache>(pd_, 8);
    std::vector<uint8_t> buf(1 << 20);
    ibex_mr_t *whole = nullptr, *part = nullptr;
    IBEX_ASSERT_OK(cache_->get(buf.data(), buf.size(), &whole));
    IBEX_ASSERT_OK(cache_->get(buf.data() + 4096, 100, &part));
    EXPECT_EQ(whole, part);
    EXPECT_EQ(cache_->size(), 1u);
    ibex_mr_info_t info{};
    IBEX_ASSERT_OK(ibex_mr_query(whole, &info));
    EXPECT_LE(reinterpret_cast<uintptr_t>(info.addr), reinterpret_cast<uintptr_t>(buf.data()));
    EXPECT_GE(reinterpret_cast<uintptr_t>(info.addr) + info.length, reinterpret_cast<uintptr_t>(buf.data()) + buf.size());
    EXPECT_TRUE(info.access & IBEX_ACCESS_REMOTE_WRITE);
}

TEST_F(RegCacheTest, BoundedLeastRecentlyUsedFirst) {
    cache_ = std::make_unique<RegCache>(pd_, 4);
    std::vector<std::vector<uint8_t>> bufs(10, std::vector<uint8_t>(3 * 4096));
    ibex_mr_t *mr = nullptr;
    for (auto &b : bufs) {
        cache_->next_epoch(); // one collective per buffer
        IBEX_ASSERT_OK(cache_->get(b.data(), b.size(), &mr));
    }
    EXPECT_EQ(cache_->size(), 4u);
    // Entries the running collective uses are kept even beyond the bound.
    cache_->next_epoch();
    for (auto &b : bufs) IBEX_ASSERT_OK(cache_->get(b.data(), b.size(), &mr));
    EXPECT_EQ(cache_->size(), 10u);
    cache_->next_epoch();
    IBEX_ASSERT_OK(cache_->get(bufs[0].data(), 1, &mr));
    EXPECT_EQ(cache_->size(), 4u);
}

TEST_F(RegCacheTest, UserRegistrationsArePinned) {
    cache_ = std::make_unique<RegCache>(pd_, 4);
    std::vector<uint8_t> pinned(8192);
    IBEX_ASSERT_OK(cache_->add(pinned.data(), pinned.size()));
    std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(8192));
    ibex_mr_t *mr = nullptr;
    for (auto &b : bufs) {
        cache_->next_epoch();
        IBEX_ASSERT_OK(cache_->get(b.data(), b.size(), &mr));
    }
    const size_t before = cache_->size();
    IBEX_ASSERT_OK(cache_->remove(pinned.data()));
    EXPECT_EQ(cache_->size(), before - 1) << "the pinned entry had been evicted";
    EXPECT_EQ(cache_->remove(pinned.data()), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(cache_->add(nullptr, 0), IBEX_ERR_INVALID_ARGUMENT);
}

// GPU buffers (simulated device memory, runtime/base/simulated_device.h): cudaMalloc
// aligns to 256 bytes, so a buffer may start inside a page whose first bytes are no
// allocation. Rounding it out to the page made the region start in host memory: no
// staging shadow, and the soft engine read GPU addresses (issue 17).
class RegCacheGpuTest : public RegCacheTest {
protected:
    void SetUp() override {
        RegCacheTest::SetUp();
        map_ = mmap(nullptr, kMap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(map_, MAP_FAILED);
    }
    void TearDown() override {
        RegCacheTest::TearDown(); // deregisters first: the regions still look like GPU memory
        ibex::cuda::simulated::clear();
        if (map_ != MAP_FAILED) munmap(map_, kMap);
    }
    static constexpr size_t kMap = 16 * 4096;
    void *map_ = MAP_FAILED;
    std::vector<uint8_t> backing_ = std::vector<uint8_t>(kMap);
};

TEST_F(RegCacheGpuTest, GpuBufferIsRegisteredExactlyWithItsShadow) {
    cache_ = std::make_unique<RegCache>(pd_, 8);
    uint8_t *view = static_cast<uint8_t *>(map_) + 0xe00;
    const size_t bytes = 5 * 4096 + 12;
    ASSERT_TRUE(ibex::cuda::simulated::add_range(view, bytes, backing_.data()));
    ibex_mr_t *whole = nullptr, *slice = nullptr;
    IBEX_ASSERT_OK(cache_->get(view, bytes, &whole));
    ibex_mr_info_t info{};
    IBEX_ASSERT_OK(ibex_mr_query(whole, &info));
    EXPECT_EQ(info.addr, static_cast<void *>(view)) << "a GPU buffer must not be rounded out to host pages";
    EXPECT_EQ(info.length, bytes);
    EXPECT_EQ(ibex_memory_type(info.addr), IBEX_MEMORY_CUDA_DEVICE);
    EXPECT_TRUE(ibex::soft::staging::active()) << "the region got no staging shadow";
    // Interior slices (the executor looks each one up) reuse it.
    IBEX_ASSERT_OK(cache_->get(view + 8000, 4096, &slice));
    EXPECT_EQ(slice, whole);
    EXPECT_EQ(cache_->size(), 1u);
}

TEST_F(RegCacheGpuTest, StaleHostEntryIsNotTakenForGpuMemory) {
    cache_ = std::make_unique<RegCache>(pd_, 8);
    // Host memory registered, given back, and the addresses reused for GPU memory (the
    // cache cannot see the free).
    uint8_t *p = static_cast<uint8_t *>(map_);
    ASSERT_EQ(mprotect(p, kMap, PROT_READ | PROT_WRITE), 0);
    ibex_mr_t *host = nullptr, *gpu = nullptr;
    IBEX_ASSERT_OK(cache_->get(p, 8 * 4096, &host));
    ASSERT_EQ(mprotect(p, kMap, PROT_NONE), 0);
    ASSERT_TRUE(ibex::cuda::simulated::add_range(p, 8 * 4096, backing_.data()));
    IBEX_ASSERT_OK(cache_->get(p + 100, 4096, &gpu));
    EXPECT_NE(gpu, host);
    ibex_mr_info_t info{};
    IBEX_ASSERT_OK(ibex_mr_query(gpu, &info));
    EXPECT_EQ(info.addr, static_cast<void *>(p + 100));
    EXPECT_EQ(cache_->size(), 2u);
}

} // namespace
} // namespace ibex::coll
