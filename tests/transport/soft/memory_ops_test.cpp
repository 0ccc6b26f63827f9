// Registering memory on the soft provider: what the engine will write into (LOCAL_WRITE,
// REMOTE_WRITE) has its pages mapped at once, as an RNIC pins them, so the first packets
// that land there take no page faults; memory it only reads from is left as it was.
#include <gtest/gtest.h>

#include <ibex/ibex.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "runtime/base/prefault.h"

namespace {

constexpr size_t kPages = 64;

size_t resident_pages(void *p) {
    std::vector<unsigned char> v(kPages);
    if (mincore(p, kPages * static_cast<size_t>(sysconf(_SC_PAGESIZE)), v.data()) != 0) return 0;
    size_t n = 0;
    for (unsigned char c : v) n += c & 1;
    return n;
}

struct Fresh {
    size_t bytes = kPages * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ~Fresh() {
        if (p != MAP_FAILED) munmap(p, bytes);
    }
};

TEST(SoftMemory, RegistrationMapsTheRegionsTheEngineWrites) {
    Fresh probe;
    ASSERT_NE(probe.p, MAP_FAILED);
    if (!ibex::base::prefault_range(probe.p, probe.bytes)) GTEST_SKIP() << "MADV_POPULATE_WRITE is not supported";
    ibex_context_t *ctx = nullptr;
    ASSERT_EQ(ibex_open_device("udp:lo", nullptr, &ctx), IBEX_OK) << ibex_last_error();
    ibex_pd_t *pd = nullptr;
    ASSERT_EQ(ibex_alloc_pd(ctx, &pd), IBEX_OK);
    Fresh writable, readable;
    ASSERT_EQ(resident_pages(writable.p), 0u);
    ibex_mr_t *w = nullptr, *r = nullptr;
    ASSERT_EQ(ibex_reg_mr(pd, writable.p, writable.bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, &w), IBEX_OK);
    ASSERT_EQ(ibex_reg_mr(pd, readable.p, readable.bytes, IBEX_ACCESS_REMOTE_READ, &r), IBEX_OK);
    EXPECT_EQ(resident_pages(writable.p), kPages);
    EXPECT_EQ(resident_pages(readable.p), 0u);
    ibex_dereg_mr(w);
    ibex_dereg_mr(r);
    ibex_dealloc_pd(pd);
    ibex_close_device(ctx);
}

} // namespace
