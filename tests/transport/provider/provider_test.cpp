// The provider ops table: a provider that leaves an entry empty answers "not supported"
// through the C API instead of crashing, and device names route to their provider.
#include <gtest/gtest.h>

#include <string>

#include "transport/provider.h"

namespace {

const ibex::ProviderOps kEmptyOps = {.name = "empty"};

TEST(ProviderOps, MissingEntriesAnswerNotSupported) {
    ibex_context ctx{&kEmptyOps, "empty:0"};
    ibex_pd_t *pd = nullptr;
    EXPECT_EQ(ibex_alloc_pd(&ctx, &pd), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_NE(std::string(ibex_last_error()).find("\"empty\""), std::string::npos) << ibex_last_error();
    EXPECT_EQ(pd, nullptr);
    ibex_cq_t *cq = nullptr;
    EXPECT_EQ(ibex_create_cq(&ctx, 16, &cq), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_EQ(ibex_progress(&ctx), IBEX_ERR_NOT_SUPPORTED);
    ibex_counters_t c{};
    c.size = sizeof c;
    EXPECT_EQ(ibex_query_counters(&ctx, &c), IBEX_ERR_NOT_SUPPORTED);
    ibex_device_attr_t d{};
    d.size = sizeof d;
    d.max_msg_size = 7;
    EXPECT_EQ(ibex_query_device(&ctx, &d), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_EQ(d.max_msg_size, 7u) << "nothing is written when the provider cannot answer";

    ibex_cq cqh{&ctx, 16};
    int n = -1;
    ibex_wc_t wc;
    EXPECT_EQ(ibex_poll_cq(&cqh, 1, &wc, &n), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_EQ(n, 0);
    ibex_pd pdh{&ctx};
    ibex_qp qph{&pdh, &cqh, &cqh, 1};
    ibex_send_wr_t wr{};
    ibex_send_wr_t *bad = nullptr;
    EXPECT_EQ(ibex_post_send(&qph, &wr, &bad), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_EQ(bad, &wr) << "the first WR not posted is reported";
    ibex_recv_wr_t rwr{};
    EXPECT_EQ(ibex_post_recv(&qph, &rwr, nullptr), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_EQ(ibex_close_device(&ctx), IBEX_ERR_NOT_SUPPORTED);
}

// Every provider built here answers the device query with what its QPs can do.
TEST(ProviderOps, EveryOpenableProviderAnswersTheDeviceQuery) {
    for (const char *device : {"udp:lo", "shm"}) {
        ibex_context_t *ctx = nullptr;
        ASSERT_EQ(ibex_open_device(device, nullptr, &ctx), IBEX_OK) << device << ": " << ibex_last_error();
        ibex_device_attr_t d{};
        d.size = sizeof d;
        EXPECT_EQ(ibex_query_device(ctx, &d), IBEX_OK) << device << ": " << ibex_last_error();
        EXPECT_EQ(d.size, sizeof d);
        EXPECT_EQ(d.max_msg_size, uint64_t(1) << 31) << device;
        EXPECT_GE(d.max_mtu, uint32_t(IBEX_MTU_256)) << device;
        EXPECT_LE(d.max_mtu, uint32_t(IBEX_MTU_4096)) << device;
        EXPECT_GE(d.efficient_msg_bytes, 4096u) << device;
        EXPECT_EQ(ibex_close_device(ctx), IBEX_OK);
    }
}

TEST(ProviderOps, DeviceNamesRouteToTheirProvider) {
    const ibex::ProviderOps *p = ibex::provider_for("udp:lo");
    ASSERT_NE(p, nullptr);
    EXPECT_STREQ(p->name, "soft");
#if IBEX_HAVE_VERBS
    ASSERT_NE(ibex::provider_for("mlx5_0"), nullptr);
    EXPECT_STREQ(ibex::provider_for("mlx5_0")->name, "verbs");
#else
    EXPECT_EQ(ibex::provider_for("mlx5_0"), nullptr) << "built without the verbs provider";
#endif
    EXPECT_EQ(ibex::provider_for(""), nullptr);
}

} // namespace
