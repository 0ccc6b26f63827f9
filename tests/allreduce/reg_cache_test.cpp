// The registration cache on a real protection domain: reuse of covering registrations,
// the bound on entries, entries pinned by the user or needed by the running collective.
#include <gtest/gtest.h>

#include <vector>

#include "allreduce/reg_cache.h"
#include "tests/support/endpoint.h"

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

} // namespace
} // namespace ibex::coll
