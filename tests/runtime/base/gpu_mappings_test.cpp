// The cache of peers' GPU mappings (runtime/base/gpu_mappings.h), with a
// fake opener in place of CUDA IPC: one open per peer allocation however often it is
// used, ranges bounded by the exported size, an opener's refusal passed on with nothing
// cached, every mapping closed once, by peer or all together, and trimming that closes a
// peer's oldest mappings but never one in use.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "runtime/base/status.h"
#include "runtime/base/gpu_mappings.h"

namespace {

using ibex::cuda::GpuMappings;

// The fake exporter: handle byte 0 names a "GPU allocation" of the fake's own; 0xff is a
// stale handle.
struct Fake {
    static inline std::map<void *, int> open_now; // mapped pointer -> times closed - 1
    static inline int opens = 0, closes = 0;
    static inline uint8_t memory[4][4096];
    static ibex_status_t open(const ibex::cuda::IpcExport &e, void **out) {
        if (e.handle[0] == 0xff) return ibex::fail(IBEX_ERR_REMOTE, "fake: stale handle");
        ++opens;
        *out = memory[e.handle[0] & 3];
        open_now[*out] = 0;
        return IBEX_OK;
    }
    static void close(void *p) {
        ++closes;
        open_now.erase(p);
    }
    static void reset() {
        open_now.clear();
        opens = closes = 0;
    }
};

ibex::cuda::IpcExport exported(uint8_t which, uint64_t size = 4096) {
    ibex::cuda::IpcExport e{};
    e.handle[0] = which;
    e.size = size;
    e.device = 0;
    return e;
}

TEST(GpuMappingCache, OpensEachPeerAllocationOnceAndBoundsItsRange) {
    Fake::reset();
    {
        GpuMappings m({Fake::open, Fake::close});
        uint8_t *p = nullptr;
        ASSERT_EQ(m.get(7, 1, exported(0), 0, 4096, &p), IBEX_OK);
        EXPECT_EQ(p, Fake::memory[0]);
        ASSERT_EQ(m.get(7, 1, exported(0), 100, 50, &p), IBEX_OK);
        EXPECT_EQ(p, Fake::memory[0] + 100);
        EXPECT_EQ(Fake::opens, 1);
        // The same id of another peer is another allocation.
        ASSERT_EQ(m.get(8, 1, exported(1), 0, 8, &p), IBEX_OK);
        EXPECT_EQ(p, Fake::memory[1]);
        EXPECT_EQ(Fake::opens, 2);
        EXPECT_EQ(m.size(), 2u);
        // Past the exported size: refused, the mapping kept.
        EXPECT_EQ(m.get(7, 1, exported(0), 4000, 97, &p), IBEX_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ibex_last_error()).find("leaves the peer's mapped GPU allocation"), std::string::npos)
            << ibex_last_error();
        EXPECT_EQ(m.get(7, 1, exported(0), 4097, 0, &p), IBEX_ERR_INVALID_ARGUMENT);
        EXPECT_TRUE(m.has(7, 1));
    }
    EXPECT_EQ(Fake::closes, 2) << "the destructor closes what is open";
    EXPECT_TRUE(Fake::open_now.empty());
}

TEST(GpuMappingCache, AStaleHandleIsRefusedAndNothingIsCached) {
    Fake::reset();
    GpuMappings m({Fake::open, Fake::close});
    uint8_t *p = nullptr;
    EXPECT_EQ(m.get(7, 2, exported(0xff), 0, 8, &p), IBEX_ERR_REMOTE);
    EXPECT_NE(std::string(ibex_last_error()).find("stale"), std::string::npos) << ibex_last_error();
    EXPECT_FALSE(m.has(7, 2));
    EXPECT_EQ(m.size(), 0u);
    // A good handle for the same id later maps.
    EXPECT_EQ(m.get(7, 2, exported(2), 0, 8, &p), IBEX_OK);
    EXPECT_EQ(p, Fake::memory[2]);
}

TEST(GpuMappingCache, ForgettingAPeerClosesOnlyItsMappings) {
    Fake::reset();
    GpuMappings m({Fake::open, Fake::close});
    uint8_t *p = nullptr;
    ASSERT_EQ(m.get(7, 1, exported(0), 0, 8, &p), IBEX_OK);
    ASSERT_EQ(m.get(7, 2, exported(1), 0, 8, &p), IBEX_OK);
    ASSERT_EQ(m.get(9, 1, exported(2), 0, 8, &p), IBEX_OK);
    m.forget_peer(7);
    EXPECT_EQ(Fake::closes, 2);
    EXPECT_FALSE(m.has(7, 1));
    EXPECT_FALSE(m.has(7, 2));
    EXPECT_TRUE(m.has(9, 1));
    m.forget_peer(7); // nothing left of it
    EXPECT_EQ(Fake::closes, 2);
    // Mapped again on next use.
    ASSERT_EQ(m.get(7, 1, exported(0), 0, 8, &p), IBEX_OK);
    EXPECT_EQ(Fake::opens, 4);
    m.clear();
    EXPECT_EQ(Fake::closes, 4);
    EXPECT_EQ(m.size(), 0u);
}

TEST(GpuMappingCache, TrimClosesAPeersOldestButNeverOneInUse) {
    Fake::reset();
    GpuMappings m({Fake::open, Fake::close});
    uint8_t *p = nullptr;
    for (uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(m.get(7, id, exported(uint8_t(id)), 0, 8, &p), IBEX_OK);
    ASSERT_EQ(m.get(9, 1, exported(0), 0, 8, &p), IBEX_OK);
    m.trim(7, 3, {});
    EXPECT_EQ(Fake::closes, 0) << "within the bound: nothing closed";
    // Id 1 is the oldest but in use: id 2 goes instead.
    m.trim(7, 2, {1, 3});
    EXPECT_EQ(Fake::closes, 1);
    EXPECT_TRUE(m.has(7, 1));
    EXPECT_FALSE(m.has(7, 2));
    EXPECT_TRUE(m.has(7, 3));
    // Everything in use: the bound gives way rather than close a mapping being used.
    m.trim(7, 0, {1, 3});
    EXPECT_EQ(Fake::closes, 1);
    m.trim(7, 1, {3});
    EXPECT_FALSE(m.has(7, 1));
    EXPECT_TRUE(m.has(7, 3));
    EXPECT_TRUE(m.has(9, 1)) << "another peer's mappings are not touched";
    EXPECT_EQ(Fake::closes, 2);
    m.forget(7, 3);
    m.forget(7, 3); // gone already: nothing
    EXPECT_FALSE(m.has(7, 3));
    EXPECT_EQ(Fake::closes, 3);
}

} // namespace
