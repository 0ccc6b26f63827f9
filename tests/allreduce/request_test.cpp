// The per-thread cache of finished requests: a thread that issued a burst reuses all of it;
// a thread that only lets go of another thread's requests keeps the minimum.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "allreduce/request.h"

namespace ibex::coll {
namespace {

// Both holders (caller and driver) let go, as after a wait.
void let_go(ibex_request *r) {
    r->release();
    r->release();
}

TEST(RequestCache, AThreadReusesAWholeBurstItCreated) {
    // A fresh thread: its cache starts empty whatever this binary ran before.
    std::thread([] {
        constexpr size_t kBurst = 3000; // beyond the minimum of 1024
        std::vector<ibex_request *> first;
        for (size_t i = 0; i < kBurst; ++i) first.push_back(request_new());
        for (ibex_request *r : first) ASSERT_NE(r, nullptr);
        for (ibex_request *r : first) let_go(r);
        EXPECT_EQ(request_cache_size(), kBurst);
        const std::set<ibex_request *> known(first.begin(), first.end());
        std::vector<ibex_request *> second;
        for (size_t i = 0; i < kBurst; ++i) second.push_back(request_new());
        EXPECT_EQ(request_cache_size(), 0u);
        for (ibex_request *r : second) {
            EXPECT_TRUE(known.count(r)) << "a request came from the heap, not the cache";
            EXPECT_FALSE(r->done.load());
            EXPECT_EQ(r->refs.load(), 2);
            EXPECT_EQ(r->status, IBEX_OK);
        }
        for (ibex_request *r : second) let_go(r);
    }).join();
}

TEST(RequestCache, AThreadThatOnlyLetsGoKeepsTheMinimum) {
    std::vector<ibex_request *> made;
    std::thread([&] {
        for (int i = 0; i < 3000; ++i) made.push_back(request_new());
    }).join();
    std::thread([&] {
        for (ibex_request *r : made) let_go(r); // the rest go back to the heap
        EXPECT_EQ(request_cache_size(), 1024u);
    }).join();
}

} // namespace
} // namespace ibex::coll
