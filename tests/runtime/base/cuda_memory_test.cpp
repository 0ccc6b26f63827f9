// CUDA IPC and dma-buf exports of device allocations (runtime/base/cuda_memory.h) on a
// real GPU, from the thread that allocated and from a thread that has made no CUDA call
// yet: a communicator's progress thread is one, and an export there once failed with
// CUDA_ERROR_INVALID_CONTEXT (the driver's entry points do not bind a context themselves),
// which staged the collectives that rank 0 ran whole on one GPU.
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/status.h"
#include "tests/allreduce/cuda/gpu.h"

namespace {

using ibex::cuda::IpcExport;

struct Exported {
    ibex_status_t status = IBEX_ERR_INTERNAL;
    std::string detail;
    IpcExport x{};
};

Exported export_on_a_new_thread(const void *p) {
    Exported e;
    std::thread([&] {
        e.status = ibex::cuda::ipc_export(p, &e.x);
        if (e.status != IBEX_OK) e.detail = ibex_last_error();
    }).join();
    return e;
}

TEST(CudaMemory, ExportsFromAThreadWithoutACurrentContext) {
    IBEX_REQUIRE_GPU();
    constexpr size_t kBytes = 3u << 20; // more than the 2 MiB that cudaMalloc rounds small buffers to
    ibex::test::DeviceBuffer buf(kBytes);
    ASSERT_NE(buf.p, nullptr);
    auto *inside = static_cast<uint8_t *>(buf.p) + 12345;
    const Exported there = export_on_a_new_thread(inside);
    ASSERT_EQ(there.status, IBEX_OK) << there.detail;
    EXPECT_EQ(there.x.base, reinterpret_cast<uintptr_t>(buf.p));
    EXPECT_GE(there.x.size, kBytes);
    EXPECT_EQ(there.x.device, 0);
    EXPECT_NE(there.x.gpu_key, 0u);
    IpcExport here{};
    ASSERT_EQ(ibex::cuda::ipc_export(inside, &here), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(std::memcmp(here.handle, there.x.handle, sizeof here.handle), 0) << "one allocation, one handle";
    EXPECT_EQ(here.base, there.x.base);
    EXPECT_EQ(here.gpu_key, there.x.gpu_key);
}

TEST(CudaMemory, HostMemoryIsRefusedWithAReason) {
    IBEX_REQUIRE_GPU();
    std::vector<uint8_t> host(4096);
    const Exported e = export_on_a_new_thread(host.data());
    EXPECT_NE(e.status, IBEX_OK);
    EXPECT_NE(e.detail.find("not GPU memory"), std::string::npos) << e.detail;
}

TEST(CudaMemory, DmabufExportsFromAThreadWithoutACurrentContext) {
    IBEX_REQUIRE_GPU();
    if (!ibex::cuda::dmabuf_supported(0)) GTEST_SKIP() << "GPU 0 cannot export dma-buf handles (driver or kernel too old)";
    constexpr size_t kBytes = 4u << 20;
    ibex::test::DeviceBuffer buf(kBytes);
    ASSERT_NE(buf.p, nullptr);
    ibex_status_t st = IBEX_ERR_INTERNAL;
    std::string detail;
    int fd = -1;
    std::thread([&] {
        st = ibex::cuda::export_dmabuf(reinterpret_cast<uintptr_t>(buf.p), kBytes, &fd);
        if (st != IBEX_OK) detail = ibex_last_error();
    }).join();
    ASSERT_EQ(st, IBEX_OK) << detail;
    EXPECT_GE(fd, 0);
    if (fd >= 0) ::close(fd);
}

} // namespace
