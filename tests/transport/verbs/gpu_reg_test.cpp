// GPU memory registration path selection and dma-buf range alignment.
#include <cstdlib>

#include <gtest/gtest.h>

#include "tests/transport/verbs/fixture.h"
#include "transport/verbs/gpu_reg.h"

namespace ibex::verbs {
namespace {

RegPlan plan(bool device, bool dmabuf, bool peermem, GpuRegMode mode = GpuRegMode::kAuto) {
    GpuRegFacts f;
    f.device_memory = device;
    f.cuda_dmabuf = dmabuf;
    f.peermem = peermem;
    f.mode = mode;
    return plan_registration(f);
}

TEST(VerbsGpuReg, HostMemoryAlwaysTakesIbvRegMr) {
    for (bool d : {false, true})
        for (bool p : {false, true}) {
            const RegPlan r = plan(false, d, p, GpuRegMode::kDmabuf);
            ASSERT_EQ(r.count, 1);
            EXPECT_EQ(r.paths[0], RegPath::kHost);
        }
}

TEST(VerbsGpuReg, AutoPrefersDmabufThenPeerMemory) {
    RegPlan r = plan(true, true, true);
    ASSERT_EQ(r.count, 2);
    EXPECT_EQ(r.paths[0], RegPath::kDmabuf);
    EXPECT_EQ(r.paths[1], RegPath::kPeerMem);
    r = plan(true, true, false);
    ASSERT_EQ(r.count, 1);
    EXPECT_EQ(r.paths[0], RegPath::kDmabuf);
    r = plan(true, false, true);
    ASSERT_EQ(r.count, 1);
    EXPECT_EQ(r.paths[0], RegPath::kPeerMem);
    r = plan(true, false, false);
    EXPECT_EQ(r.count, 0);
    EXPECT_NE(r.why.find("nvidia_peermem"), std::string::npos) << r.why;
}

TEST(VerbsGpuReg, ForcedModes) {
    RegPlan r = plan(true, true, true, GpuRegMode::kPeerMem);
    ASSERT_EQ(r.count, 1);
    EXPECT_EQ(r.paths[0], RegPath::kPeerMem);
    r = plan(true, true, true, GpuRegMode::kDmabuf);
    ASSERT_EQ(r.count, 1);
    EXPECT_EQ(r.paths[0], RegPath::kDmabuf);
    EXPECT_EQ(plan(true, false, true, GpuRegMode::kDmabuf).count, 0); // no silent fallback when forced
    EXPECT_EQ(plan(true, true, false, GpuRegMode::kPeerMem).count, 0);
}

TEST(VerbsGpuReg, DmabufRangeIsPageAligned) {
    DmabufRange r = dmabuf_range(0x7f0000001234, 100, 4096);
    EXPECT_EQ(r.base, 0x7f0000001000u);
    EXPECT_EQ(r.offset, 0x234u);
    EXPECT_EQ(r.size, 4096u);
    r = dmabuf_range(0x7f0000001f00, 0x200, 4096); // crosses a page boundary
    EXPECT_EQ(r.base, 0x7f0000001000u);
    EXPECT_EQ(r.size, 8192u);
    r = dmabuf_range(0x7f0000002000, 0x4000, 4096); // already aligned
    EXPECT_EQ(r.base, 0x7f0000002000u);
    EXPECT_EQ(r.offset, 0u);
    EXPECT_EQ(r.size, 0x4000u);
    r = dmabuf_range(0x10000, 1, 65536);
    EXPECT_EQ(r.size, 65536u);
}

TEST(VerbsGpuReg, PeermemDetectionFromSysfs) {
    EXPECT_TRUE(peermem_loaded(*test::fixture_root("peermem")));
    EXPECT_FALSE(peermem_loaded(*test::fixture_root("connectx")));
}

TEST(VerbsGpuReg, ModeFromEnvironment) {
    GpuRegMode m;
    std::string err;
    unsetenv("IBEX_GPU_REG");
    ASSERT_TRUE(gpu_reg_mode_from_env(&m, &err));
    EXPECT_EQ(m, GpuRegMode::kAuto);
    setenv("IBEX_GPU_REG", "peermem", 1);
    ASSERT_TRUE(gpu_reg_mode_from_env(&m, &err));
    EXPECT_EQ(m, GpuRegMode::kPeerMem);
    setenv("IBEX_GPU_REG", "dmabuf", 1);
    ASSERT_TRUE(gpu_reg_mode_from_env(&m, &err));
    EXPECT_EQ(m, GpuRegMode::kDmabuf);
    setenv("IBEX_GPU_REG", "nvlink", 1);
    EXPECT_FALSE(gpu_reg_mode_from_env(&m, &err));
    EXPECT_NE(err.find("nvlink"), std::string::npos);
    unsetenv("IBEX_GPU_REG");
}

} // namespace
} // namespace ibex::verbs
