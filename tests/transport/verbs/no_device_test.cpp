// The verbs provider on a host without RDMA devices: nothing listed, and opening one
// fails with a status and a detail that say so.
#include <string>

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <ibex/ibex.h>

#include "transport/provider.h"

namespace {

bool host_has_rdma_devices() {
    int n = 0;
    ibv_device **l = ibv_get_device_list(&n);
    if (l) ibv_free_device_list(l);
    return l && n > 0;
}

TEST(VerbsNoDevice, ListsNothing) {
    if (host_has_rdma_devices()) GTEST_SKIP() << "this host has RDMA devices";
    ibex_device_list_t *list = nullptr;
    int count = 0;
    ASSERT_EQ(ibex_get_device_list(&list, &count), IBEX_OK);
    for (int i = 0; i < count; ++i) EXPECT_STRNE(ibex_device_provider(list, i), "verbs") << ibex_device_name(list, i);
    EXPECT_GE(count, 1); // the soft provider's udp:lo is still there
    ibex_free_device_list(list);
}

TEST(VerbsNoDevice, OpeningMlx5FailsClearly) {
    if (host_has_rdma_devices()) GTEST_SKIP() << "this host has RDMA devices";
    ibex_context_t *ctx = nullptr;
    ASSERT_EQ(ibex_open_device("mlx5_0", nullptr, &ctx), IBEX_ERR_NO_DEVICE);
    EXPECT_EQ(ctx, nullptr);
    const std::string detail = ibex_last_error();
    EXPECT_NE(detail.find("mlx5_0"), std::string::npos) << detail;
    EXPECT_NE(detail.find("no RDMA devices"), std::string::npos) << detail;
    // With a port suffix too.
    EXPECT_EQ(ibex_open_device("mlx5_0:1", nullptr, &ctx), IBEX_ERR_NO_DEVICE);
}

TEST(VerbsNoDevice, ClaimsRdmaNamesOnlyAfterTheSoftProvider) {
    const auto &list = ibex::providers();
    ASSERT_GE(list.size(), 2u);
    EXPECT_STREQ(list[0]->name, "soft");
    EXPECT_EQ(ibex::provider_for("mlx5_0"), &ibex::kVerbsProviderOps);
    EXPECT_EQ(ibex::provider_for("rxe0"), &ibex::kVerbsProviderOps);
    EXPECT_EQ(ibex::provider_for("udp:lo"), &ibex::kSoftProviderOps);
    EXPECT_EQ(ibex::provider_for("mlx5_0:x"), nullptr); // malformed port
    EXPECT_EQ(ibex::provider_for("eth0"), nullptr);
}

} // namespace
