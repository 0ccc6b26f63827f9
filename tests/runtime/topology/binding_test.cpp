// The NIC binding policy on the fixtures, and its environment overrides.
#include "tests/runtime/topology/fixture.h"

#include <cstring>
#include <string>

namespace ibex::test {
namespace {

class BindingTest : public ::testing::Test {
  protected:
    ScopedEnv no_nic_{"IBEX_NIC", std::nullopt};
    ScopedEnv no_numa_{"IBEX_NUMA", std::nullopt};
};

struct Bound {
    ibex_status_t status;
    ibex_binding_t b;
    std::string nic;      // label of nics[0]
    std::string path;
};

Bound bind(const ibex_topology_t *t, int rank, int size, int gpu = IBEX_BIND_GPU_FROM_RANK,
           const char *cpus = nullptr, int max_nics = 1) {
    ibex_bind_request_t req = IBEX_BIND_REQUEST_INIT;
    req.local_rank = rank;
    req.local_size = size;
    req.gpu = gpu;
    req.cpus = cpus;
    req.max_nics = max_nics;
    Bound r{};
    r.b.size = sizeof r.b;
    r.status = ibex_topo_bind(t, &req, &r.b);
    if (r.status == IBEX_OK) {
        ibex_topo_device_t d{};
        d.size = sizeof d;
        EXPECT_EQ(ibex_topo_device(t, r.b.nics[0], &d), IBEX_OK);
        r.nic = d.label;
        r.path = ibex_path_type_str(r.b.path);
    }
    return r;
}

TEST_F(BindingTest, DgxLikeEachGpuTakesItsSwitchNic) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    const char *nic[8] = {"NIC0", "NIC0", "NIC1", "NIC1", "NIC2", "NIC2", "NIC3", "NIC3"};
    const char *path[8] = {"PIX", "PXB", "PIX", "PXB", "PIX", "PXB", "PIX", "PXB"};
    const char *cores[8] = {"7", "6", "5", "4", "15", "14", "13", "12"};
    for (int r = 0; r < 8; ++r) {
        Bound x = bind(t.get(), r, 8);
        ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
        EXPECT_EQ(x.b.gpu, r);
        EXPECT_EQ(x.nic, nic[r]) << "rank " << r;
        EXPECT_EQ(x.path, path[r]) << "rank " << r;
        EXPECT_EQ(x.b.numa_node, r < 4 ? 0 : 1);
        EXPECT_STREQ(x.b.progress_cpus, cores[r]) << "rank " << r;
        EXPECT_STREQ(x.b.nic_cpus, r < 4 ? "0-7,16-23" : "8-15,24-31");
        EXPECT_EQ(x.b.flags, 0u);
    }
}

TEST_F(BindingTest, SecondNicIsTheNextNearest) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    Bound x = bind(t.get(), 0, 1, 0, nullptr, 4);
    ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
    ASSERT_EQ(x.b.nic_count, 4);
    int nic1 = -1, nic0 = -1;
    ASSERT_EQ(ibex_topo_find(t.get(), "NIC0", &nic0), IBEX_OK);
    ASSERT_EQ(ibex_topo_find(t.get(), "NIC1", &nic1), IBEX_OK);
    EXPECT_EQ(x.b.nics[0], nic0); // PIX
    EXPECT_EQ(x.b.nics[1], nic1); // PHB, then the two SYS NICs
}

// Rail alignment: GPUs that see the same NICs at the same distance take them in turn.
TEST_F(BindingTest, RanksSpreadOverEquidistantNics) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    ScopedEnv nic("IBEX_NIC", std::string("mlx5_2,enp198s0np0")); // both SYS from socket 0
    const char *want[4] = {"NIC2", "NIC3", "NIC2", "NIC3"};
    for (int r = 0; r < 4; ++r) {
        Bound x = bind(t.get(), r, 4);
        ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
        EXPECT_EQ(x.nic, want[r]) << "rank " << r;
        EXPECT_EQ(x.path, "SYS");
        EXPECT_EQ(x.b.flags, static_cast<uint32_t>(IBEX_BINDING_NIC_FROM_ENV));
        EXPECT_EQ(x.b.numa_node, 1); // memory follows the NIC
    }
}

TEST_F(BindingTest, NicOverrideOfOneNicForcesIt) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    ScopedEnv nic("IBEX_NIC", std::string("NIC3"));
    Bound x = bind(t.get(), 0, 1);
    ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(x.nic, "NIC3");
    EXPECT_STREQ(x.b.nic_cpus, "8-15,24-31");
}

TEST_F(BindingTest, UnknownNicOverrideIsAnError) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    ScopedEnv nic("IBEX_NIC", std::string("mlx5_0,mlx5_7"));
    Bound x = bind(t.get(), 0, 1);
    EXPECT_EQ(x.status, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ibex_last_error(), "mlx5_7"), nullptr) << ibex_last_error();
    EXPECT_NE(std::strstr(ibex_last_error(), "IBEX_NIC"), nullptr) << ibex_last_error();
}

TEST_F(BindingTest, NumaOverride) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    ScopedEnv numa("IBEX_NUMA", std::string("1"));
    Bound x = bind(t.get(), 0, 8);
    ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(x.nic, "NIC0"); // the NIC is still the GPU's
    EXPECT_EQ(x.b.numa_node, 1);
    EXPECT_EQ(x.b.flags, static_cast<uint32_t>(IBEX_BINDING_NUMA_FROM_ENV));
    EXPECT_STREQ(x.b.nic_cpus, "8-15,24-31");
    EXPECT_STREQ(x.b.progress_cpus, "15");
}

TEST_F(BindingTest, NumaOverrideOfMissingNodeIsAnError) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    ScopedEnv numa("IBEX_NUMA", std::string("5"));
    Bound x = bind(t.get(), 0, 1);
    EXPECT_EQ(x.status, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ibex_last_error(), "IBEX_NUMA=5"), nullptr) << ibex_last_error();
}

TEST_F(BindingTest, CoresAnchorWithoutGpu) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    // cores of socket 1: its two NICs are local, ranks alternate between them
    Bound a = bind(t.get(), 0, 2, IBEX_BIND_GPU_NONE, "8-11");
    Bound b = bind(t.get(), 1, 2, IBEX_BIND_GPU_NONE, "12-15");
    ASSERT_EQ(a.status, IBEX_OK) << ibex_last_error();
    ASSERT_EQ(b.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(a.nic, "NIC2");
    EXPECT_EQ(b.nic, "NIC3");
    EXPECT_EQ(a.path, "PHB");
    EXPECT_EQ(a.b.gpu, -1);
    EXPECT_EQ(a.b.numa_node, 1);
    EXPECT_STREQ(a.b.progress_cpus, "15"); // not among the rank's own cores
    EXPECT_STREQ(b.b.progress_cpus, "10");  // rank 1: second from the top, skipping 12-15
}

TEST_F(BindingTest, NoAnchorRoundRobin) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    const char *want[5] = {"NIC0", "NIC1", "NIC2", "NIC3", "NIC0"};
    for (int r = 0; r < 5; ++r) {
        Bound x = bind(t.get(), r, 5, IBEX_BIND_GPU_NONE);
        ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
        EXPECT_EQ(x.nic, want[r]);
        EXPECT_EQ(x.path, "-");
    }
}

TEST_F(BindingTest, SingleNicHost) {
    Topo t = load_fixture("single_nic.xml");
    ASSERT_TRUE(t);
    Bound a = bind(t.get(), 0, 2), b = bind(t.get(), 1, 2);
    ASSERT_EQ(a.status, IBEX_OK) << ibex_last_error();
    ASSERT_EQ(b.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(a.nic, "NIC0");
    EXPECT_EQ(a.path, "PHB");
    EXPECT_EQ(b.nic, "NIC0");
    EXPECT_EQ(b.path, "NODE");
    EXPECT_STREQ(a.b.progress_cpus, "7"); // one thread per core: 7, not its sibling 15
    EXPECT_STREQ(b.b.progress_cpus, "6");
    EXPECT_EQ(a.b.numa_node, 0);
}

TEST_F(BindingTest, UnknownNicNumaGivesNoPreference) {
    Topo t = load_fixture("numa_unknown.xml");
    ASSERT_TRUE(t);
    Bound x = bind(t.get(), 1, 2); // GPU1 -> mlx5_1, both under the Machine
    ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(x.nic, "NIC1");
    EXPECT_EQ(x.path, "PHB");
    EXPECT_EQ(x.b.numa_node, -1);
    EXPECT_STREQ(x.b.nic_cpus, "0-15");
    // cores on socket 0 prefer the NIC whose locality is known
    Bound c = bind(t.get(), 0, 1, IBEX_BIND_GPU_NONE, "0-3");
    ASSERT_EQ(c.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(c.nic, "NIC0");
    EXPECT_EQ(c.b.numa_node, 0);
}

TEST_F(BindingTest, ThisMachineUsesThePlainNic) {
    Topo t = load_fixture("this_machine.xml");
    ASSERT_TRUE(t);
    Bound x = bind(t.get(), 0, 1);
    ASSERT_EQ(x.status, IBEX_OK) << ibex_last_error();
    EXPECT_EQ(x.nic, "NIC0");
    EXPECT_EQ(x.b.gpu, -1);
    EXPECT_EQ(x.b.numa_node, 0);
    EXPECT_STREQ(x.b.progress_cpus, "1");
}

TEST_F(BindingTest, BadRequests) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    EXPECT_EQ(bind(t.get(), 0, 1, 8).status, IBEX_ERR_INVALID_ARGUMENT); // no GPU8
    EXPECT_EQ(bind(t.get(), 2, 2).status, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bind(t.get(), 0, 1, 0, "100-200").status, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bind(t.get(), 0, 1, 0, "zero").status, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(bind(t.get(), 0, 1, 0, nullptr, 0).status, IBEX_ERR_INVALID_ARGUMENT);
    ibex_bind_request_t req{}; // not initialised
    ibex_binding_t b{};
    b.size = sizeof b;
    EXPECT_EQ(ibex_topo_bind(t.get(), &req, &b), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_topo_bind(t.get(), nullptr, &b), IBEX_OK) << ibex_last_error(); // defaults
    b.size = 0;
    EXPECT_EQ(ibex_topo_bind(t.get(), nullptr, &b), IBEX_ERR_INVALID_ARGUMENT);
}

} // namespace
} // namespace ibex::test
