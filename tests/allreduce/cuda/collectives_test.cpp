// Collectives with CUDA device buffers (forked ranks over shm and over udp:lo): results
// equal the host-buffer results. Skips on a host without a usable GPU. The GPU
// probe runs in a child: CUDA initialised in this process would not survive the forks.
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <cuda_runtime_api.h>

#include "allreduce/comm.h"
#include "runtime/base/cuda_memory.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

bool gpu_in_child(std::string *why) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        const bool ok = ibex::cuda::available();
        const char *r = ibex::cuda::unavailable_reason();
        [[maybe_unused]] ssize_t w = write(fds[1], r, std::strlen(r));
        _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    char buf[256] = {};
    [[maybe_unused]] ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    *why = buf;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#define REQUIRE_GPU_FOR_RANKS()                                                                        \
    do {                                                                                               \
        std::string why;                                                                               \
        if (!gpu_in_child(&why)) GTEST_SKIP() << "no usable GPU here (" << why << "): this test runs on a CUDA host"; \
    } while (0)

// Puts the rank on a GPU (rank modulo the GPUs there are) and creates its communicator.
int open_on_gpu(RankCtx &ctx, ibex_comm_t **comm) {
    int ndev = 0;
    RANK_CHECK(ctx, cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0, "rank %d: no GPU", ctx.rank);
    cudaSetDevice(ctx.rank % ndev);
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    return 0;
}

int device_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    if (int rc = open_on_gpu(ctx, &comm)) return rc;
    const size_t n = static_cast<size_t>(ctx.nranks);
    for (size_t count : {size_t(1), size_t(1000), size_t(300007)}) {
        std::vector<float> send(count), host_out(count), dev_out(count);
        for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((ctx.rank * 7 + i * 3) % 11) - 5;
        float *dsend = nullptr, *drecv = nullptr;
        RANK_CHECK(ctx, cudaMalloc(reinterpret_cast<void **>(&dsend), count * 4) == cudaSuccess && cudaMalloc(reinterpret_cast<void **>(&drecv), count * 4) == cudaSuccess,
                   "rank %d: cudaMalloc", ctx.rank);
        cudaMemcpy(dsend, send.data(), count * 4, cudaMemcpyHostToDevice);
        RANK_CHECK(ctx, ibex_memory_type(dsend) == IBEX_MEMORY_CUDA_DEVICE, "rank %d: not seen as GPU memory", ctx.rank);
        // Out of place on the GPU, then the same on the host: the same bits.
        RANK_CHECK_OK(ctx, ibex_allreduce(dsend, drecv, count, IBEX_F32, IBEX_SUM, comm, nullptr));
        RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), host_out.data(), count, IBEX_F32, IBEX_SUM, comm, nullptr));
        cudaMemcpy(dev_out.data(), drecv, count * 4, cudaMemcpyDeviceToHost);
        RANK_CHECK(ctx, std::memcmp(dev_out.data(), host_out.data(), count * 4) == 0,
                   "rank %d count %zu: GPU allreduce differs from host allreduce", ctx.rank, count);
        // In place, average.
        RANK_CHECK_OK(ctx, ibex_allreduce(dsend, dsend, count, IBEX_F32, IBEX_AVG, comm, nullptr));
        RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), send.data(), count, IBEX_F32, IBEX_AVG, comm, nullptr));
        cudaMemcpy(dev_out.data(), dsend, count * 4, cudaMemcpyDeviceToHost);
        RANK_CHECK(ctx, std::memcmp(dev_out.data(), send.data(), count * 4) == 0, "rank %d: in-place avg differs", ctx.rank);
        // Broadcast from the last rank and allgather into device memory.
        RANK_CHECK_OK(ctx, ibex_broadcast(drecv, drecv, count, IBEX_F32, ctx.nranks - 1, comm, nullptr));
        float *dall = nullptr;
        RANK_CHECK(ctx, cudaMalloc(reinterpret_cast<void **>(&dall), count * 4 * n) == cudaSuccess, "rank %d: cudaMalloc", ctx.rank);
        RANK_CHECK_OK(ctx, ibex_allgather(drecv, dall, count, IBEX_F32, comm, nullptr));
        std::vector<float> all(count * n);
        cudaMemcpy(all.data(), dall, count * 4 * n, cudaMemcpyDeviceToHost);
        for (size_t r = 0; r < n; ++r)
            RANK_CHECK(ctx, std::memcmp(&all[r * count], host_out.data(), count * 4) == 0,
                       "rank %d: allgather block %zu differs", ctx.rank, r);
        cudaFree(dall);
        cudaFree(dsend);
        cudaFree(drecv);
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

// Ranks of one host map each other's GPU buffers (CUDA IPC, allreduce/gpu_direct.h): the
// collectives read and write them on the GPU with no host copy, counted, and give the
// host's bits.
int mapped_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    if (int rc = open_on_gpu(ctx, &comm)) return rc;
    RANK_CHECK(ctx, comm->gpu_direct.enabled(), "rank %d: the mapped GPU path is off", ctx.rank);
    const size_t n = static_cast<size_t>(ctx.nranks), count = 300007, bytes = count * 4;
    std::vector<float> send(count * n), host(count * n), got(count * n);
    for (size_t i = 0; i < count * n; ++i) send[i] = static_cast<float>((ctx.rank * 7 + i * 3) % 11) * 0.37f - 1.5f;
    float *dsend = nullptr, *drecv = nullptr;
    RANK_CHECK(ctx, cudaMalloc(reinterpret_cast<void **>(&dsend), bytes * n) == cudaSuccess &&
                        cudaMalloc(reinterpret_cast<void **>(&drecv), bytes * n) == cudaSuccess,
               "rank %d: cudaMalloc", ctx.rank);
    cudaMemcpy(dsend, send.data(), bytes * n, cudaMemcpyHostToDevice);
    uint64_t ops = 0;
    for (ibex_redop_t op : {IBEX_SUM, IBEX_AVG}) {
        RANK_CHECK_OK(ctx, ibex_allreduce(dsend, drecv, count, IBEX_F32, op, comm, nullptr));
        RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), host.data(), count, IBEX_F32, op, comm, nullptr));
        cudaMemcpy(got.data(), drecv, bytes, cudaMemcpyDeviceToHost);
        RANK_CHECK(ctx, std::memcmp(got.data(), host.data(), bytes) == 0, "rank %d: mapped allreduce (op %d) differs",
                   ctx.rank, op);
        RANK_CHECK(ctx, comm->gpu_direct.taken() == ++ops, "rank %d: allreduce %d did not map the peers' buffers (%s%s)",
                   ctx.rank, static_cast<int>(ops), comm->gpu_direct.fallbacks() ? "it fell back to staging: " : "another path",
                   comm->gpu_direct.fallback_reason());
    }
    RANK_CHECK_OK(ctx, ibex_reduce_scatter(dsend, drecv, count, IBEX_F32, IBEX_SUM, comm, nullptr));
    RANK_CHECK_OK(ctx, ibex_reduce_scatter(send.data(), host.data(), count, IBEX_F32, IBEX_SUM, comm, nullptr));
    cudaMemcpy(got.data(), drecv, bytes, cudaMemcpyDeviceToHost);
    RANK_CHECK(ctx, std::memcmp(got.data(), host.data(), bytes) == 0, "rank %d: mapped reduce_scatter differs", ctx.rank);
    RANK_CHECK_OK(ctx, ibex_allgather(dsend, drecv, count, IBEX_F32, comm, nullptr));
    RANK_CHECK_OK(ctx, ibex_allgather(send.data(), host.data(), count, IBEX_F32, comm, nullptr));
    cudaMemcpy(got.data(), drecv, bytes * n, cudaMemcpyDeviceToHost);
    RANK_CHECK(ctx, std::memcmp(got.data(), host.data(), bytes * n) == 0, "rank %d: mapped allgather differs", ctx.rank);
    const bool root = ctx.rank == 0;
    RANK_CHECK_OK(ctx, ibex_reduce(dsend, root ? drecv : nullptr, count, IBEX_F32, IBEX_PROD, 0, comm, nullptr));
    RANK_CHECK_OK(ctx, ibex_reduce(send.data(), root ? host.data() : nullptr, count, IBEX_F32, IBEX_PROD, 0, comm, nullptr));
    if (root) {
        cudaMemcpy(got.data(), drecv, bytes, cudaMemcpyDeviceToHost);
        RANK_CHECK(ctx, std::memcmp(got.data(), host.data(), bytes) == 0, "rank 0: mapped reduce differs");
    }
    RANK_CHECK(ctx, comm->gpu_direct.taken() == ops + 3 && comm->gpu_direct.fallbacks() == 0,
               "rank %d: %llu mapped runs and %llu fallbacks of %llu ops", ctx.rank,
               static_cast<unsigned long long>(comm->gpu_direct.taken()),
               static_cast<unsigned long long>(comm->gpu_direct.fallbacks()), static_cast<unsigned long long>(ops + 3));
    // The ranks share this host's first GPU: rank 0 runs each op whole unless told not to.
    const bool whole = std::getenv("IBEX_GPU_DIRECT_LEADER") == nullptr || std::atoi(std::getenv("IBEX_GPU_DIRECT_LEADER")) != 0;
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (ndev == 1)
        RANK_CHECK(ctx, comm->gpu_direct.taken_whole() == (whole ? ops + 3 : 0), "rank %d: %llu ops run whole by rank 0, want %llu",
                   ctx.rank, static_cast<unsigned long long>(comm->gpu_direct.taken_whole()),
                   static_cast<unsigned long long>(whole ? ops + 3 : 0));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    cudaFree(dsend);
    cudaFree(drecv);
    return 0;
}

// Sends and receives between cudaMalloc buffers, as torch's send/recv and all_to_all pass
// them: a ring exchange in one batch beside a small host-to-GPU message and a GPU-to-host
// copy to itself, a blocking pair, and alltoallv between GPU buffers.
int p2p_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    if (int rc = open_on_gpu(ctx, &comm)) return rc;
    const int r = ctx.rank, n = ctx.nranks, to = (r + 1) % n, from = (r + n - 1) % n;
    const auto value = [](int rank, size_t i) { return static_cast<float>((rank * 13 + i * 7) % 101) - 50.0f; };
    constexpr size_t kCount = 300007, kSmall = 300;
    std::vector<float> send(kCount), got(kCount), small(kSmall), self_out(kSmall, -1.0f);
    for (size_t i = 0; i < kCount; ++i) send[i] = value(r, i);
    for (size_t i = 0; i < kSmall; ++i) small[i] = value(r, i) * 3;
    float *dsend = nullptr, *drecv = nullptr, *dsmall = nullptr;
    RANK_CHECK(ctx, cudaMalloc(reinterpret_cast<void **>(&dsend), kCount * 4) == cudaSuccess &&
                        cudaMalloc(reinterpret_cast<void **>(&drecv), kCount * 4) == cudaSuccess &&
                        cudaMalloc(reinterpret_cast<void **>(&dsmall), kSmall * 4) == cudaSuccess,
               "rank %d: cudaMalloc", r);
    cudaMemcpy(dsend, send.data(), kCount * 4, cudaMemcpyHostToDevice);
    const ibex_p2p_op_t ops[] = {{IBEX_P2P_RECV, from, drecv, kCount, IBEX_F32}, {IBEX_P2P_SEND, to, dsend, kCount, IBEX_F32},
                                 {IBEX_P2P_SEND, to, small.data(), kSmall, IBEX_F32}, {IBEX_P2P_RECV, from, dsmall, kSmall, IBEX_F32},
                                 {IBEX_P2P_SEND, r, dsend, kSmall, IBEX_F32}, {IBEX_P2P_RECV, r, self_out.data(), kSmall, IBEX_F32}};
    RANK_CHECK_OK(ctx, ibex_p2p_batch(ops, std::size(ops), comm, nullptr));
    cudaMemcpy(got.data(), drecv, kCount * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < kCount; ++i)
        RANK_CHECK(ctx, got[i] == value(from, i), "rank %d: element %zu from rank %d is %g", r, i, from, got[i]);
    cudaMemcpy(got.data(), dsmall, kSmall * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < kSmall; ++i) {
        RANK_CHECK(ctx, got[i] == value(from, i) * 3, "rank %d: small element %zu is %g", r, i, got[i]);
        RANK_CHECK(ctx, self_out[i] == value(r, i), "rank %d: own element %zu is %g", r, i, self_out[i]);
    }
    if (r == 0) RANK_CHECK_OK(ctx, ibex_send(drecv, kCount, IBEX_F32, 1, comm, nullptr));
    if (r == 1) {
        RANK_CHECK_OK(ctx, ibex_recv(dsend, kCount, IBEX_F32, 0, comm, nullptr));
        cudaMemcpy(got.data(), dsend, kCount * 4, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < kCount; ++i)
            RANK_CHECK(ctx, got[i] == value(n - 1, i), "rank 1: element %zu of the blocking receive is %g", i, got[i]);
    }
    const size_t block = kCount / static_cast<size_t>(n);
    std::vector<size_t> counts(static_cast<size_t>(n), block), displs(static_cast<size_t>(n));
    for (size_t q = 0; q < displs.size(); ++q) displs[q] = q * block;
    cudaMemcpy(dsend, send.data(), kCount * 4, cudaMemcpyHostToDevice);
    RANK_CHECK_OK(ctx, ibex_alltoallv(dsend, counts.data(), displs.data(), drecv, counts.data(), displs.data(), IBEX_F32,
                                      comm, nullptr));
    cudaMemcpy(got.data(), drecv, kCount * 4, cudaMemcpyDeviceToHost);
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < block; ++i) {
            const size_t at = static_cast<size_t>(q) * block + i, src = static_cast<size_t>(r) * block + i;
            RANK_CHECK(ctx, got[at] == value(q, src), "rank %d: alltoallv element %zu from rank %d is %g", r, i, q, got[at]);
        }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    cudaFree(dsend);
    cudaFree(drecv);
    cudaFree(dsmall);
    return 0;
}

TEST(CudaCollectives, SendsAndReceivesOnDeviceBuffers) {
    REQUIRE_GPU_FOR_RANKS();
    for (const char *shm : {"1", "0"})
        for (int n : {2, 3}) {
            SCOPED_TRACE(std::string("IBEX_SHM=") + shm + " ranks " + std::to_string(n));
            auto body = [shm](RankCtx &ctx) {
                setenv("IBEX_SHM", shm, 1);
                return p2p_body(ctx);
            };
            ibex::test::expect_all_passed(ibex::test::run_ranks(n, body, 120));
        }
}

TEST(CudaCollectives, OneHostsRanksMapEachOthersBuffers) {
    REQUIRE_GPU_FOR_RANKS();
    // Run whole by rank 0 (the default on one GPU), and in per-rank shares.
    for (const char *leader : {"1", "0"})
        for (int n : {2, 3, 4}) {
            SCOPED_TRACE(std::string("IBEX_GPU_DIRECT_LEADER=") + leader + ", ranks " + std::to_string(n));
            auto body = [leader](RankCtx &ctx) {
                setenv("IBEX_GPU_DIRECT_LEADER", leader, 1);
                return mapped_body(ctx);
            };
            ibex::test::expect_all_passed(ibex::test::run_ranks(n, body, 120));
        }
}

// A rank SIGKILLed while its peers have its GPU buffer mapped: the others fail well within
// the timeout, with no crash, and abort cleanly (closing their mappings).
TEST(CudaCollectives, ARankKilledWhileMappedFailsTheOthers) {
    REQUIRE_GPU_FOR_RANKS();
    ibex::test::run_with_victim(3, 1, [](RankCtx &ctx, std::atomic<int> *ready) {
        float *d = nullptr;
        RANK_CHECK(ctx, cudaMalloc(reinterpret_cast<void **>(&d), ibex::test::kKilledCount * 4) == cudaSuccess,
                   "rank %d: cudaMalloc", ctx.rank);
        cudaMemset(d, 0, ibex::test::kKilledCount * 4);
        // The communicator comes with a mapped allreduce done (every rank's buffer mapped by
        // rank 0, or by every rank in shares); the victim then dies before the next one,
        // which takes tens of microseconds once started.
        auto init_mapped = [d](RankCtx &c, ibex_comm_t **comm, int timeout_ms) {
            IBEX_TRY(ibex::test::init_comm(c, comm, timeout_ms));
            IBEX_TRY(ibex_allreduce(d, d, ibex::test::kKilledCount, IBEX_F32, IBEX_SUM, *comm, nullptr));
            if ((*comm)->gpu_direct.taken() != 1)
                return ibex::fail(IBEX_ERR_INTERNAL, "rank %d: the first allreduce did not map the peers' buffers (%s)", c.rank,
                                  (*comm)->gpu_direct.fallback_reason());
            return IBEX_OK;
        };
        const int rc = ibex::test::killed_body(ctx, 1, ready, init_mapped, d, false);
        cudaFree(d);
        return rc;
    });
}

TEST(CudaCollectives, DeviceBuffersGiveTheHostResults) {
    REQUIRE_GPU_FOR_RANKS();
    // Up to 8 ranks sharing one GPU (issue 17: 3 ranks crashed), joined over shm (the
    // default for ranks of one host) and over udp; GPU buffers are staged in chunks
    // (4 MiB by default; 256 KiB here, so 300007 floats take five). With IBEX_SHM=1 the
    // largest count maps the peers' buffers instead (allreduce/gpu_direct.h).
    for (const char *shm : {"1", "0"}) {
        for (int n : {2, 3, 4, 8}) {
            SCOPED_TRACE(std::string("IBEX_SHM=") + shm + " ranks " + std::to_string(n));
            auto body = [shm](RankCtx &ctx) {
                setenv("IBEX_SHM", shm, 1);
                setenv("IBEX_GPU_CHUNK", "262144", 1);
                return device_body(ctx);
            };
            ibex::test::expect_all_passed(ibex::test::run_ranks(n, body, 140));
        }
    }
}

} // namespace
