// Registering memory on the soft provider: what the engine will write into (LOCAL_WRITE,
// REMOTE_WRITE) has its pages mapped at once, as an RNIC pins them, so the first packets
// that land there take no page faults; memory it only reads from is left as it was.
#include <gtest/gtest.h>

#include <ibex/ibex.h>
#include <sys/mman.h>

#include "runtime/base/prefault.h"
#include "tests/support/untouched_pages.h"

namespace {

TEST(SoftMemory, RegistrationMapsTheRegionsTheEngineWrites) {
    {
        ibex::test::UntouchedPages probe(1);
        if (!ibex::base::prefault_range(probe.p, probe.bytes)) GTEST_SKIP() << "MADV_POPULATE_WRITE is not supported";
    }
    ibex_context_t *ctx = nullptr;
    ASSERT_EQ(ibex_open_device("udp:lo", nullptr, &ctx), IBEX_OK) << ibex_last_error();
    ibex_pd_t *pd = nullptr;
    ASSERT_EQ(ibex_alloc_pd(ctx, &pd), IBEX_OK);
    ibex::test::UntouchedPages writable(48), readable(48);
    ASSERT_NE(writable.p, MAP_FAILED);
    ASSERT_NE(readable.p, MAP_FAILED);
    ASSERT_EQ(writable.resident(), 0u);
    ibex_mr_t *w = nullptr, *r = nullptr;
    ASSERT_EQ(ibex_reg_mr(pd, writable.p, writable.bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, &w), IBEX_OK);
    ASSERT_EQ(ibex_reg_mr(pd, readable.p, readable.bytes, IBEX_ACCESS_REMOTE_READ, &r), IBEX_OK);
    EXPECT_EQ(writable.resident(), writable.pages);
    EXPECT_EQ(readable.resident(), 0u);
    ibex_dereg_mr(w);
    ibex_dereg_mr(r);
    ibex_dealloc_pd(pd);
    ibex_close_device(ctx);
}

} // namespace
