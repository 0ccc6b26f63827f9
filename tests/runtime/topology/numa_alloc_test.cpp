// ibex_numa_alloc(): placement when libnuma works, plain memory when it does not.
#include <ibex/topology.h>

#include <gtest/gtest.h>

#include <numa.h>
#include <numaif.h>

#include <cstring>

namespace {

TEST(NumaAlloc, OnNodeZero) {
    void *p = nullptr;
    const size_t size = 1 << 20;
    ASSERT_EQ(ibex_numa_alloc(size, 0, &p), IBEX_OK) << ibex_last_error();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
    std::memset(p, 0xab, size);
    if (numa_available() >= 0) {
        int node = -1;
        ASSERT_EQ(get_mempolicy(&node, nullptr, 0, p, MPOL_F_NODE | MPOL_F_ADDR), 0);
        EXPECT_EQ(node, 0);
    }
    ibex_numa_free(p, size);
}

TEST(NumaAlloc, NoPreference) {
    void *p = nullptr;
    ASSERT_EQ(ibex_numa_alloc(4096, -1, &p), IBEX_OK) << ibex_last_error();
    static_cast<char *>(p)[0] = 1;
    ibex_numa_free(p, 4096);
}

TEST(NumaAlloc, MissingNodeIsRefused) {
    if (numa_available() < 0) GTEST_SKIP() << "no NUMA support: every node falls back to plain memory";
    void *p = reinterpret_cast<void *>(0x1);
    EXPECT_EQ(ibex_numa_alloc(4096, numa_max_node() + 1, &p), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::strstr(ibex_last_error(), "does not exist"), nullptr) << ibex_last_error();
}

TEST(NumaAlloc, BadArguments) {
    void *p = nullptr;
    EXPECT_EQ(ibex_numa_alloc(0, 0, &p), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_numa_alloc(4096, 0, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    ibex_numa_free(nullptr, 0);
}

} // namespace
