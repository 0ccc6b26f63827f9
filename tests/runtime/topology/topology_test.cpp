// Discovery and path types on the hwloc XML fixtures of tests/data/topology.
#include "tests/runtime/topology/fixture.h"

#include <cstring>
#include <string>
#include <vector>

namespace ibex::test {
namespace {

class TopologyTest : public ::testing::Test {
  protected:
    ScopedEnv no_file_{"IBEX_TOPO_FILE", std::nullopt};
};

int index_of(const ibex_topology_t *t, const char *name) {
    int i = -1;
    EXPECT_EQ(ibex_topo_find(t, name, &i), IBEX_OK) << name << ": " << ibex_last_error();
    return i;
}

std::string path(const ibex_topology_t *t, const char *a, const char *b) {
    ibex_path_type_t p = IBEX_PATH_NONE;
    EXPECT_EQ(ibex_topo_path(t, index_of(t, a), index_of(t, b), &p), IBEX_OK);
    return ibex_path_type_str(p);
}

ibex_topo_device_t device(const ibex_topology_t *t, const char *name) {
    ibex_topo_device_t d{};
    d.size = sizeof d;
    EXPECT_EQ(ibex_topo_device(t, index_of(t, name), &d), IBEX_OK) << ibex_last_error();
    return d;
}

// Issue 16's fix: an AMD-vendor VGA function with DRM nodes only (the ATI ES1000 BMC chip)
// used to be GPU0 and get a rank. Only compute OS devices or 3D controllers make GPUs.
TEST_F(TopologyTest, OnboardVgaIsNotAGpuButComputeDevicesAre) {
    Topo t = load_fixture("onboard_vga.xml");
    ASSERT_TRUE(t);
    ASSERT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_GPU), 3);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_NIC), 1);
    const char *busids[3] = {"0000:02:00.0", "0000:03:00.0", "0000:04:00.0"};
    const char *models[3] = {"NVIDIA A100-SXM4-80GB", "AMD Instinct MI210", "NVIDIA H100 80GB HBM3"};
    for (int g = 0; g < 3; ++g) {
        const std::string name = "GPU" + std::to_string(g);
        ibex_topo_device_t d = device(t.get(), name.c_str());
        EXPECT_STREQ(d.pci_busid, busids[g]) << name; // never the ES1000 at 0000:01:00.0
        EXPECT_STREQ(d.model, models[g]) << name;
    }
    // The compute API's name where one exists (CUDA; for the Instinct, its OpenCL device).
    EXPECT_STREQ(device(t.get(), "GPU0").name, "cuda0");
    EXPECT_STREQ(device(t.get(), "GPU1").name, "opencl0d0");
}

TEST_F(TopologyTest, DgxLikeHasEightGpusFourNicsTwoNodes) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_GPU), 8); // the ASPEED BMC display is not a GPU
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_NIC), 4);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_NUMA), 2);
    EXPECT_EQ(ibex_topo_device_count(t.get()), 14);
    EXPECT_STREQ(ibex_topo_hostname(t.get()), "dgx-like");

    ibex_topo_device_t nic = device(t.get(), "NIC2");
    EXPECT_EQ(nic.kind, IBEX_TOPO_NIC);
    EXPECT_EQ(nic.ordinal, 2);
    EXPECT_STREQ(nic.rdma_device, "mlx5_2");
    EXPECT_STREQ(nic.netdev, "enp134s0np0");
    EXPECT_STREQ(nic.pci_busid, "0000:86:00.0");
    EXPECT_STREQ(nic.cpus, "8-15,24-31");
    EXPECT_EQ(nic.numa_node, 1);
    EXPECT_EQ(nic.link_width, 16);
    EXPECT_NEAR(nic.link_speed_gbs, 31.5, 0.1);

    ibex_topo_device_t gpu = device(t.get(), "GPU0");
    EXPECT_STREQ(gpu.name, "cuda0");
    EXPECT_STREQ(gpu.model, "NVIDIA A100-SXM4-80GB");
    EXPECT_STREQ(gpu.cpus, "0-7,16-23");
    EXPECT_STREQ(gpu.numa_nodes, "0");

    ibex_topo_device_t node = device(t.get(), "NUMA1");
    EXPECT_EQ(node.kind, IBEX_TOPO_NUMA);
    EXPECT_EQ(node.numa_node, 1);
    EXPECT_STREQ(node.cpus, "8-15,24-31");
}

TEST_F(TopologyTest, DgxLikePathTypes) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    const ibex_topology_t *x = t.get();
    EXPECT_EQ(path(x, "GPU0", "GPU0"), "X");
    EXPECT_EQ(path(x, "GPU0", "NIC0"), "PIX"); // one switch
    EXPECT_EQ(path(x, "GPU6", "mlx5_3"), "PIX");
    EXPECT_EQ(path(x, "GPU1", "NIC0"), "PXB"); // two levels of switches
    EXPECT_EQ(path(x, "GPU0", "GPU1"), "PXB");
    EXPECT_EQ(path(x, "GPU0", "GPU2"), "PHB"); // same host bridge, other root port
    EXPECT_EQ(path(x, "NIC0", "NIC1"), "PHB");
    EXPECT_EQ(path(x, "GPU4", "GPU6"), "NODE"); // socket 1 has two host bridges
    EXPECT_EQ(path(x, "NIC2", "enp198s0np0"), "NODE");
    EXPECT_EQ(path(x, "GPU0", "GPU4"), "SYS");
    EXPECT_EQ(path(x, "GPU3", "NIC3"), "SYS");
    EXPECT_EQ(path(x, "GPU0", "NUMA0"), "PHB");
    EXPECT_EQ(path(x, "GPU0", "NUMA1"), "SYS");
    EXPECT_EQ(path(x, "NUMA0", "NUMA1"), "SYS");
    // the matrix is symmetric
    for (int i = 0; i < ibex_topo_device_count(x); ++i)
        for (int j = 0; j < ibex_topo_device_count(x); ++j) {
            ibex_path_type_t a, b;
            ASSERT_EQ(ibex_topo_path(x, i, j, &a), IBEX_OK);
            ASSERT_EQ(ibex_topo_path(x, j, i, &b), IBEX_OK);
            EXPECT_EQ(a, b) << i << "," << j;
        }
}

TEST_F(TopologyTest, FindsDevicesByEveryName) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    int a = index_of(t.get(), "NIC1");
    EXPECT_EQ(index_of(t.get(), "mlx5_1"), a);
    EXPECT_EQ(index_of(t.get(), "enp17s0np0"), a);
    EXPECT_EQ(index_of(t.get(), "0000:11:00.0"), a);
    EXPECT_EQ(index_of(t.get(), "nvml3"), index_of(t.get(), "cuda3"));
    int idx = -1;
    ASSERT_EQ(ibex_topo_index(t.get(), IBEX_TOPO_NIC, 1, &idx), IBEX_OK);
    EXPECT_EQ(idx, a);
    EXPECT_EQ(ibex_topo_find(t.get(), "mlx5_9", &idx), IBEX_ERR_NO_DEVICE);
    EXPECT_NE(std::strstr(ibex_last_error(), "mlx5_9"), nullptr);
    EXPECT_EQ(ibex_topo_index(t.get(), IBEX_TOPO_GPU, 8, &idx), IBEX_ERR_NO_DEVICE);
    ibex_path_type_t p;
    EXPECT_EQ(ibex_topo_path(t.get(), 0, 99, &p), IBEX_ERR_INVALID_ARGUMENT);
    ibex_topo_device_t d{};
    EXPECT_EQ(ibex_topo_device(t.get(), 0, &d), IBEX_ERR_INVALID_ARGUMENT); // size not set
}

TEST_F(TopologyTest, SingleSocketOneNic) {
    Topo t = load_fixture("single_nic.xml");
    ASSERT_TRUE(t);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_GPU), 2);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_NIC), 1);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_NUMA), 1);
    EXPECT_EQ(path(t.get(), "GPU0", "mlx5_0"), "PHB");
    EXPECT_EQ(path(t.get(), "GPU1", "mlx5_0"), "NODE");
    EXPECT_EQ(path(t.get(), "GPU0", "GPU1"), "NODE");
    EXPECT_EQ(device(t.get(), "NIC0").numa_node, 0);
}

// sysfs numa_node -1: hwloc attaches the host bridge to the Machine. On a two-node host
// that is "unknown", never node 0.
TEST_F(TopologyTest, UnknownNumaNodeIsNotNodeZero) {
    Topo t = load_fixture("numa_unknown.xml");
    ASSERT_TRUE(t);
    ibex_topo_device_t nic = device(t.get(), "mlx5_1");
    EXPECT_EQ(nic.numa_node, -1);
    EXPECT_STREQ(nic.numa_nodes, "N/A");
    EXPECT_STREQ(nic.cpus, "0-15");
    EXPECT_EQ(device(t.get(), "GPU1").numa_node, -1);
    EXPECT_EQ(device(t.get(), "mlx5_0").numa_node, 0);
    EXPECT_EQ(path(t.get(), "GPU1", "NIC1"), "PHB"); // same host bridge: known regardless
    EXPECT_EQ(path(t.get(), "GPU0", "NIC1"), "SYS");
    EXPECT_EQ(path(t.get(), "NIC1", "NUMA0"), "SYS");
    EXPECT_EQ(path(t.get(), "NIC1", "NUMA1"), "SYS");
    EXPECT_EQ(path(t.get(), "GPU0", "NIC0"), "PIX");
}

// The development VM: one node, a virtio NIC without RDMA whose sysfs numa_node is -1.
// With a single node the locality is not in doubt.
TEST_F(TopologyTest, ThisMachineFixture) {
    Topo t = load_fixture("this_machine.xml");
    ASSERT_TRUE(t);
    EXPECT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_GPU), 0);
    ASSERT_EQ(ibex_topo_count(t.get(), IBEX_TOPO_NIC), 1);
    ibex_topo_device_t nic = device(t.get(), "NIC0");
    EXPECT_STREQ(nic.netdev, "eth0");
    EXPECT_STREQ(nic.rdma_device, "");
    EXPECT_EQ(nic.numa_node, 0);
    EXPECT_STREQ(nic.cpus, "0-1");
}

TEST_F(TopologyTest, LiveMachineLoads) {
    ibex_topology_t *raw = nullptr;
    ASSERT_EQ(ibex_topo_load(nullptr, &raw), IBEX_OK) << ibex_last_error();
    Topo t(raw);
    EXPECT_STREQ(ibex_topo_source(t.get()), "");
    EXPECT_GE(ibex_topo_count(t.get(), IBEX_TOPO_NUMA), 1);
}

TEST_F(TopologyTest, TopoFileFromEnvironment) {
    ScopedEnv file("IBEX_TOPO_FILE", topo_data("single_nic.xml"));
    ibex_topology_t *raw = nullptr;
    ASSERT_EQ(ibex_topo_load(nullptr, &raw), IBEX_OK) << ibex_last_error();
    Topo t(raw);
    EXPECT_EQ(ibex_topo_source(t.get()), topo_data("single_nic.xml"));
    EXPECT_STREQ(ibex_topo_hostname(t.get()), "single-nic");
}

TEST_F(TopologyTest, MissingFileIsNoDevice) {
    ibex_topology_t *raw = reinterpret_cast<ibex_topology_t *>(0x1);
    EXPECT_EQ(ibex_topo_load(topo_data("no_such_file.xml").c_str(), &raw), IBEX_ERR_NO_DEVICE);
    EXPECT_EQ(raw, nullptr);
    EXPECT_NE(std::strstr(ibex_last_error(), "no_such_file.xml"), nullptr) << ibex_last_error();
    EXPECT_NE(std::strstr(ibex_last_error(), "No such file"), nullptr) << ibex_last_error();
}

TEST_F(TopologyTest, MalformedFileIsInvalidArgument) {
    ibex_topology_t *raw = nullptr;
    EXPECT_EQ(ibex_topo_load(topo_data("malformed.xml").c_str(), &raw), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(raw, nullptr);
    EXPECT_NE(std::strstr(ibex_last_error(), "malformed.xml"), nullptr) << ibex_last_error();
    EXPECT_NE(std::strstr(ibex_last_error(), "not a valid hwloc XML"), nullptr) << ibex_last_error();
}

TEST_F(TopologyTest, MissingFileFromEnvironmentIsReported) {
    ScopedEnv file("IBEX_TOPO_FILE", std::string("/nonexistent/ibex-topo.xml"));
    ibex_topology_t *raw = nullptr;
    EXPECT_EQ(ibex_topo_load(nullptr, &raw), IBEX_ERR_NO_DEVICE);
    EXPECT_NE(std::strstr(ibex_last_error(), "/nonexistent/ibex-topo.xml"), nullptr);
}

TEST_F(TopologyTest, ExportRoundTrips) {
    Topo t = load_fixture("dgx_like.xml");
    ASSERT_TRUE(t);
    std::string out = ::testing::TempDir() + "/ibex_topo_export.xml";
    ASSERT_EQ(ibex_topo_export_xml(t.get(), out.c_str()), IBEX_OK) << ibex_last_error();
    ibex_topology_t *raw = nullptr;
    ASSERT_EQ(ibex_topo_load(out.c_str(), &raw), IBEX_OK) << ibex_last_error();
    Topo again(raw);
    EXPECT_EQ(path(again.get(), "GPU1", "NIC0"), "PXB");
    EXPECT_EQ(device(again.get(), "NIC0").link_width, 16);
    std::remove(out.c_str());
}

TEST_F(TopologyTest, NullArguments) {
    EXPECT_EQ(ibex_topo_load(nullptr, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_topo_device_count(nullptr), -1);
    ibex_topo_free(nullptr);
    EXPECT_STREQ(ibex_path_type_str(IBEX_PATH_NONE), "-");
    EXPECT_STREQ(ibex_path_type_str(IBEX_PATH_NODE), "NODE");
}

} // namespace
} // namespace ibex::test
