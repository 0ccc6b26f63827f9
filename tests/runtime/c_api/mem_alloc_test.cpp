// ibex_mem_alloc / ibex_mem_free through the shared library, on the soft provider (page-
// aligned anonymous memory) and on shm (memfd memory): usable and registrable memory, and
// a clear error, with nothing freed, for every misuse.
#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

#define ASSERT_OK(expr) ASSERT_EQ((expr), IBEX_OK) << #expr << ": " << ibex_last_error()

#define EXPECT_FAILS_WITH(expr, status, words)                                                          \
    do {                                                                                                 \
        const ibex_status_t _st = (expr);                                                                \
        EXPECT_EQ(_st, status) << #expr << ": " << ibex_last_error();                                    \
        EXPECT_NE(std::string(ibex_last_error()).find(words), std::string::npos)                         \
            << #expr << ": detail \"" << ibex_last_error() << "\" does not say \"" << words << "\"";      \
    } while (0)

class MemAlloc : public ::testing::TestWithParam<const char *> {
protected:
    void SetUp() override {
        ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
        attr.progress_thread = 0;
        ASSERT_OK(ibex_open_device(GetParam(), &attr, &ctx));
        ASSERT_OK(ibex_alloc_pd(ctx, &pd));
        ASSERT_OK(ibex_alloc_pd(ctx, &other));
    }
    void TearDown() override {
        if (other) ibex_dealloc_pd(other);
        if (pd) ibex_dealloc_pd(pd);
        if (ctx) ibex_close_device(ctx);
    }
    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = nullptr, *other = nullptr;
};

TEST_P(MemAlloc, PageAlignedZeroedRegistrableMemory) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    for (size_t size : {size_t(1), page, size_t(3) << 20}) {
        void *p = nullptr;
        ASSERT_OK(ibex_mem_alloc(pd, size, &p));
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
        auto *b = static_cast<uint8_t *>(p);
        EXPECT_EQ(b[0], 0);
        EXPECT_EQ(b[size - 1], 0);
        std::memset(b, 0x5a, size);
        ibex_mr_t *mr = nullptr;
        ASSERT_OK(ibex_reg_mr(pd, p, size, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, &mr));
        ASSERT_OK(ibex_dereg_mr(mr));
        ASSERT_OK(ibex_mem_free(pd, p));
    }
}

TEST_P(MemAlloc, MisuseIsAClearErrorAndFreesNothing) {
    void *p = reinterpret_cast<void *>(0x1);
    EXPECT_FAILS_WITH(ibex_mem_alloc(nullptr, 4096, &p), IBEX_ERR_INVALID_ARGUMENT, "pd is NULL");
    EXPECT_EQ(p, nullptr) << "the out pointer is cleared on failure";
    EXPECT_FAILS_WITH(ibex_mem_alloc(pd, 4096, nullptr), IBEX_ERR_INVALID_ARGUMENT, "ptr is NULL");
    EXPECT_FAILS_WITH(ibex_mem_alloc(pd, 0, &p), IBEX_ERR_INVALID_ARGUMENT, "size is 0");
    EXPECT_FAILS_WITH(ibex_mem_free(nullptr, p), IBEX_ERR_INVALID_ARGUMENT, "pd is NULL");
    EXPECT_FAILS_WITH(ibex_mem_free(pd, nullptr), IBEX_ERR_INVALID_ARGUMENT, "ptr is NULL");

    ASSERT_OK(ibex_mem_alloc(pd, 8192, &p));
    static_cast<uint8_t *>(p)[100] = 7;
    int on_stack = 0;
    EXPECT_FAILS_WITH(ibex_mem_free(pd, &on_stack), IBEX_ERR_INVALID_ARGUMENT, "not returned by ibex_mem_alloc");
    EXPECT_FAILS_WITH(ibex_mem_free(pd, static_cast<uint8_t *>(p) + 64), IBEX_ERR_INVALID_ARGUMENT,
                      "not returned by ibex_mem_alloc");
    EXPECT_FAILS_WITH(ibex_mem_free(other, p), IBEX_ERR_INVALID_ARGUMENT, "another PD");
    EXPECT_EQ(static_cast<uint8_t *>(p)[100], 7) << "a refused free must leave the memory in place";
    ASSERT_OK(ibex_mem_free(pd, p));
    EXPECT_FAILS_WITH(ibex_mem_free(pd, p), IBEX_ERR_INVALID_ARGUMENT, "freed already");
}

INSTANTIATE_TEST_SUITE_P(Devices, MemAlloc, ::testing::Values("udp:lo", "shm"),
                         [](const auto &info) { return std::string(info.param).substr(0, 3); });

} // namespace
