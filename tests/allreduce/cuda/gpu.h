// GPU test helpers: the skip every GPU test starts with, and device buffers that free
// themselves.
#pragma once

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include "runtime/base/cuda_memory.h"

#define IBEX_REQUIRE_GPU()                                                                             \
    do {                                                                                               \
        if (!::ibex::cuda::available())                                                                \
            GTEST_SKIP() << "no usable GPU here (" << ::ibex::cuda::unavailable_reason()               \
                         << "): this test runs on a CUDA host";                                        \
    } while (0)

namespace ibex::test {

struct DeviceBuffer {
    void *p = nullptr;
    size_t bytes = 0;
    explicit DeviceBuffer(size_t n) : bytes(n) {
        EXPECT_EQ(cudaMalloc(&p, n ? n : 1), cudaSuccess);
    }
    ~DeviceBuffer() {
        if (p) cudaFree(p);
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    uint8_t *bytes_at(size_t off) const { return static_cast<uint8_t *>(p) + off; }
    void upload(const void *src, size_t n, size_t off = 0) {
        ASSERT_EQ(cudaMemcpy(bytes_at(off), src, n, cudaMemcpyHostToDevice), cudaSuccess);
    }
    void download(void *dst, size_t n, size_t off = 0) const {
        ASSERT_EQ(cudaMemcpy(dst, bytes_at(off), n, cudaMemcpyDeviceToHost), cudaSuccess);
    }
};

} // namespace ibex::test
