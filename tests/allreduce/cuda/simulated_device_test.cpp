// GPU buffers through the collectives, on any host: the buffers are simulated device
// memory (runtime/base/simulated_device.h), a view the CPU cannot touch (PROT_NONE) backed
// by host bytes that only the staging copies reach. Like cudaMalloc memory, each buffer
// starts inside a page (cudaMalloc aligns to 256 bytes, not to pages) and the bytes
// before it belong to no allocation. The collectives stage GPU buffers through pinned
// host memory chunk by chunk (allreduce/gpu_staging.h), so any CPU access to the device
// view (by a transport, the executor or a reduction) faults here as it would on a GPU.
//
// Issue 17's 3-rank crash was such an access: with 3, 5 and 7 ranks and 300007 floats,
// ring slices start at odd offsets inside the buffer. Every result is compared with the
// same collective on host buffers, over udp and over shm, with one chunk and with many
// (IBEX_GPU_CHUNK), and with copies that finish late.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "runtime/base/cuda_memory.h"
#include "runtime/base/simulated_device.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

constexpr size_t kCount = 300007;
constexpr size_t kPage = 4096;

// A simulated cudaMalloc of `bytes`, `lead` bytes into its first page.
class SimulatedBuffer {
public:
    SimulatedBuffer(size_t bytes, size_t lead) : bytes_(bytes), backing_(bytes) {
        map_bytes_ = (lead + bytes + kPage - 1) / kPage * kPage;
        map_ = mmap(nullptr, map_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map_ == MAP_FAILED) {
            map_ = nullptr;
            return;
        }
        view_ = static_cast<uint8_t *>(map_) + lead;
        if (!ibex::cuda::simulated::add_range(view_, bytes, backing_.data())) view_ = nullptr;
    }
    ~SimulatedBuffer() {
        if (map_) munmap(map_, map_bytes_);
    }
    SimulatedBuffer(const SimulatedBuffer &) = delete;
    SimulatedBuffer &operator=(const SimulatedBuffer &) = delete;
    bool ok() const { return view_ != nullptr; }
    float *data() const { return reinterpret_cast<float *>(view_); }
    void upload(const void *src, size_t n) { std::memcpy(backing_.data(), src, n); }
    void download(void *dst, size_t n) const { std::memcpy(dst, backing_.data(), n); }

private:
    size_t bytes_;
    std::vector<uint8_t> backing_;
    void *map_ = nullptr;
    size_t map_bytes_ = 0;
    uint8_t *view_ = nullptr;
};

float value(int rank, size_t i) { return static_cast<float>((rank * 7 + i * 3) % 11) - 5; }

int body(RankCtx &ctx, bool all_collectives, bool expect_direct) {
    const size_t n = static_cast<size_t>(ctx.nranks), bytes = kCount * 4;
    // Leads like the crash's: 0xe00 puts chunk 2 of a 3-rank ring at page offset 0x314.
    SimulatedBuffer dsend(bytes, 0xe00), drecv(bytes, 0x500), dall(bytes * n, 0x100);
    RANK_CHECK(ctx, dsend.ok() && drecv.ok() && dall.ok(), "rank %d: cannot map simulated GPU memory", ctx.rank);
    RANK_CHECK(ctx, ibex_memory_type(dsend.data() + 5) == IBEX_MEMORY_CUDA_DEVICE, "rank %d: not seen as GPU memory",
               ctx.rank);
    RANK_CHECK(ctx, ibex_memory_type(reinterpret_cast<uint8_t *>(dsend.data()) - 1) == IBEX_MEMORY_HOST,
               "rank %d: the bytes before the buffer must not be GPU memory", ctx.rank);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    std::vector<float> send(kCount), host_out(kCount), got(kCount);
    for (size_t i = 0; i < kCount; ++i) send[i] = value(ctx.rank, i);
    dsend.upload(send.data(), bytes);

    RANK_CHECK_OK(ctx, ibex_allreduce(dsend.data(), drecv.data(), kCount, IBEX_F32, IBEX_SUM, comm, nullptr));
    // Over shm with the cost model's choice, the staged chunks are read directly
    // (allreduce/shm_direct.h): the staging memory is reachable from the peers.
    RANK_CHECK(ctx, !expect_direct || comm->direct.taken() > 0, "rank %d: the GPU allreduce's chunks were not read directly",
               ctx.rank);
    RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), host_out.data(), kCount, IBEX_F32, IBEX_SUM, comm, nullptr));
    drecv.download(got.data(), bytes);
    for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int r = 0; r < ctx.nranks; ++r) want += value(r, i);
        RANK_CHECK(ctx, host_out[i] == want, "rank %d: host allreduce [%zu] = %g, want %g", ctx.rank, i, host_out[i], want);
        RANK_CHECK(ctx, got[i] == want, "rank %d: GPU allreduce [%zu] = %g, want %g", ctx.rank, i, got[i], want);
    }
    // In place, average: the same bits as on the host.
    RANK_CHECK_OK(ctx, ibex_allreduce(dsend.data(), dsend.data(), kCount, IBEX_F32, IBEX_AVG, comm, nullptr));
    RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), send.data(), kCount, IBEX_F32, IBEX_AVG, comm, nullptr));
    dsend.download(got.data(), bytes);
    RANK_CHECK(ctx, std::memcmp(got.data(), send.data(), bytes) == 0, "rank %d: in-place avg differs", ctx.rank);

    // Mixed: a host send buffer into a GPU receive buffer.
    RANK_CHECK_OK(ctx, ibex_allreduce(host_out.data(), drecv.data(), kCount, IBEX_F32, IBEX_MAX, comm, nullptr));
    drecv.download(got.data(), bytes);
    RANK_CHECK(ctx, std::memcmp(got.data(), host_out.data(), bytes) == 0, "rank %d: host-to-GPU max differs", ctx.rank);

    if (all_collectives) {
        // Reduce onto rank 0 only; the other ranks pass no receive buffer.
        RANK_CHECK_OK(ctx, ibex_reduce(drecv.data(), ctx.rank == 0 ? dsend.data() : nullptr, kCount, IBEX_F32, IBEX_SUM,
                                       0, comm, nullptr));
        if (ctx.rank == 0) {
            dsend.download(got.data(), bytes);
            for (size_t i = 0; i < kCount; ++i)
                RANK_CHECK(ctx, got[i] == host_out[i] * static_cast<float>(n), "rank 0: reduce [%zu] = %g, want %g", i,
                           got[i], host_out[i] * static_cast<float>(n));
        }
        RANK_CHECK_OK(ctx, ibex_broadcast(drecv.data(), drecv.data(), kCount, IBEX_F32, ctx.nranks - 1, comm, nullptr));
        RANK_CHECK_OK(ctx, ibex_allgather(drecv.data(), dall.data(), kCount, IBEX_F32, comm, nullptr));
        std::vector<float> all(kCount * n);
        dall.download(all.data(), bytes * n);
        for (size_t r = 0; r < n; ++r)
            RANK_CHECK(ctx, std::memcmp(&all[r * kCount], host_out.data(), bytes) == 0,
                       "rank %d: allgather block %zu differs", ctx.rank, r);
        // Reduce-scatter: block r of every rank's dall (all equal) summed onto rank r.
        const size_t block = kCount / n;
        RANK_CHECK_OK(ctx, ibex_reduce_scatter(dall.data(), drecv.data(), block, IBEX_F32, IBEX_SUM, comm, nullptr));
        drecv.download(got.data(), block * 4);
        for (size_t i = 0; i < block; ++i) {
            const float want = host_out[static_cast<size_t>(ctx.rank) * block + i] * static_cast<float>(n);
            RANK_CHECK(ctx, got[i] == want, "rank %d: reduce_scatter [%zu] = %g, want %g", ctx.rank, i, got[i], want);
        }
        // Small enough for the fast boxes (allreduce/fastbox.h): every rank must take them,
        // whatever its buffers are and whatever it passes for a buffer it does not use
        // (off the root, a broadcast's send buffer; here GPU memory on some ranks).
        constexpr size_t kSmall = 1000;
        std::vector<float> mine(kSmall);
        for (size_t i = 0; i < kSmall; ++i) mine[i] = value(ctx.rank, i) * 2;
        const void *unused = ctx.rank % 2 ? static_cast<const void *>(dsend.data()) : nullptr;
        RANK_CHECK_OK(ctx, ibex_broadcast(ctx.rank == 0 ? mine.data() : unused, drecv.data(), kSmall, IBEX_F32, 0, comm,
                                          nullptr));
        drecv.download(got.data(), kSmall * 4);
        for (size_t i = 0; i < kSmall; ++i)
            RANK_CHECK(ctx, got[i] == value(0, i) * 2, "rank %d: small broadcast [%zu] = %g, want %g", ctx.rank, i,
                       got[i], value(0, i) * 2);
        dsend.upload(mine.data(), kSmall * 4);
        RANK_CHECK_OK(ctx, ibex_broadcast(dsend.data(), dsend.data(), kSmall, IBEX_F32, ctx.nranks - 1, comm, nullptr));
        dsend.download(got.data(), kSmall * 4);
        for (size_t i = 0; i < kSmall; ++i)
            RANK_CHECK(ctx, got[i] == value(ctx.nranks - 1, i) * 2, "rank %d: small in-place broadcast [%zu] = %g",
                       ctx.rank, i, got[i]);
        RANK_CHECK_OK(ctx, ibex_allreduce(dsend.data(), drecv.data(), kSmall, IBEX_F32, IBEX_SUM, comm, nullptr));
        drecv.download(got.data(), kSmall * 4);
        for (size_t i = 0; i < kSmall; ++i)
            RANK_CHECK(ctx, got[i] == value(ctx.nranks - 1, i) * 2 * static_cast<float>(n),
                       "rank %d: small allreduce [%zu] = %g", ctx.rank, i, got[i]);
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

// late_copies > 0: staging copies finish only at that many looks (a busy copy engine),
// so chunks wait for their copies while others are on the wire. shm: the ranks (one host)
// join over shm, else over udp. chunk: IBEX_GPU_CHUNK (0: the default, one chunk here).
void run(int n, const char *algo, bool shm, size_t chunk, int late_copies = 0) {
    SCOPED_TRACE(std::string(algo) + " ranks " + std::to_string(n) + (shm ? " shm" : " udp") + " chunk " +
                 std::to_string(chunk) + " late copies " + std::to_string(late_copies));
    auto out = ibex::test::run_ranks(
        n,
        [&](RankCtx &ctx) {
            setenv("IBEX_ALGO", algo, 1);
            setenv("IBEX_SHM", shm ? "1" : "0", 1);
            if (chunk) setenv("IBEX_GPU_CHUNK", std::to_string(chunk).c_str(), 1);
            ibex::cuda::simulated::set_deferred_copies(late_copies);
            const bool automatic = std::strcmp(algo, "auto") == 0;
            return body(ctx, std::strcmp(algo, "ring") == 0 || automatic, automatic && shm);
        },
        150);
    ibex::test::expect_all_passed(out);
}

TEST(SimulatedGpuBuffers, OddCountsOnThreeFiveAndSevenRanks) {
    for (int n : {3, 5, 7}) run(n, "ring", false, 0);
}

TEST(SimulatedGpuBuffers, OverShmInManyChunks) {
    // 300007 floats in chunks of at least 65540 bytes, at most 16: 16 chunks, the last short.
    for (int n : {2, 3, 4}) run(n, "ring", true, 65540);
    // The cost model's choice; small collectives take the fast boxes (a forced algorithm
    // turns them off).
    for (int n : {2, 3}) run(n, "auto", true, 65540);
}

TEST(SimulatedGpuBuffers, EveryAllreduceAlgorithmOnThreeRanks) {
    for (const char *algo : {"rhd", "tree"}) run(3, algo, false, 65536);
}

// IBEX_GPU_STAGING_PROFILE=1: at destroy, each rank writes where its staged ops' time went
// (queuing the input copies, waiting for them, the chunks' collectives, the last copies back) and counts
// the ops and chunks: 300007 floats in chunks of 65536 bytes or more, at most 16, are 16.
TEST(SimulatedGpuBuffers, StagingProfileSaysWhereTheTimeWent) {
    auto out = ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            setenv("IBEX_SHM", "0", 1);
            setenv("IBEX_GPU_CHUNK", "65536", 1);
            setenv("IBEX_GPU_STAGING_PROFILE", "1", 1);
            ibex::cuda::simulated::set_deferred_copies(2);
            SimulatedBuffer dsend(kCount * 4, 0), drecv(kCount * 4, 0);
            RANK_CHECK(ctx, dsend.ok() && drecv.ok(), "rank %d: cannot map simulated GPU memory", ctx.rank);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
            for (int i = 0; i < 3; ++i)
                RANK_CHECK_OK(ctx, ibex_allreduce(dsend.data(), drecv.data(), kCount, IBEX_F32, IBEX_SUM, comm, nullptr));
            testing::internal::CaptureStderr();
            const ibex_status_t st = ibex_comm_destroy(comm);
            const std::string err = testing::internal::GetCapturedStderr();
            RANK_CHECK_OK(ctx, st);
            const std::string want = "ibex GPU-staging profile, rank " + std::to_string(ctx.rank) + ": 3 ops (48 chunks, 0 prefetched), mean us: queue ";
            RANK_CHECK(ctx, err.find(want) != std::string::npos, "rank %d: no profile line like \"%s\" in: %s", ctx.rank,
                       want.c_str(), err.c_str());
            RANK_CHECK(ctx, err.find(" input ") != std::string::npos && err.find(" collectives ") != std::string::npos &&
                                err.find(" output ") != std::string::npos,
                       "rank %d: the profile names its steps: %s", ctx.rank, err.c_str());
            return 0;
        },
        120);
    ibex::test::expect_all_passed(out);
}

TEST(SimulatedGpuBuffers, PipelinedStagingWithLateCopies) {
    for (int n : {3, 5}) run(n, "ring", false, 65536, 3);
    run(3, "ring", true, 65536, 3);
}

// Sends and receives on GPU buffers: each rank sends a GPU buffer to the next rank and
// receives into a GPU buffer from the one before, in one batch, with a small message
// (mailbox-sized on one host) from host memory into GPU memory beside it and a copy to
// itself from GPU to host; then alltoallv between GPU buffers. Over shm (mailboxes: small
// ones whole, large ones read out of the pinned staging) and over udp, with copies that
// finish late.
int p2p_body(RankCtx &ctx) {
    const int r = ctx.rank, n = ctx.nranks, to = (r + 1) % n, from = (r + n - 1) % n;
    constexpr size_t kSmall = 300;
    const size_t bytes = kCount * 4;
    SimulatedBuffer dsend(bytes, 0xe00), drecv(bytes, 0x500), dsmall(kSmall * 4, 0x40), dself(kSmall * 4, 0x80);
    RANK_CHECK(ctx, dsend.ok() && drecv.ok() && dsmall.ok() && dself.ok(), "rank %d: cannot map simulated GPU memory", r);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    std::vector<float> send(kCount), got(kCount), small(kSmall), self_out(kSmall, -1.0f);
    for (size_t i = 0; i < kCount; ++i) send[i] = value(r, i);
    for (size_t i = 0; i < kSmall; ++i) small[i] = value(r, i) * 3;
    dsend.upload(send.data(), bytes);
    dself.upload(small.data(), kSmall * 4);
    const ibex_p2p_op_t ops[] = {
        {IBEX_P2P_RECV, from, drecv.data(), kCount, IBEX_F32}, {IBEX_P2P_SEND, to, dsend.data(), kCount, IBEX_F32},
        {IBEX_P2P_SEND, to, small.data(), kSmall, IBEX_F32},   {IBEX_P2P_RECV, from, dsmall.data(), kSmall, IBEX_F32},
        {IBEX_P2P_SEND, r, dself.data(), kSmall, IBEX_F32},    {IBEX_P2P_RECV, r, self_out.data(), kSmall, IBEX_F32}};
    RANK_CHECK_OK(ctx, ibex_p2p_batch(ops, std::size(ops), comm, nullptr));
    drecv.download(got.data(), bytes);
    for (size_t i = 0; i < kCount; ++i)
        RANK_CHECK(ctx, got[i] == value(from, i), "rank %d: element %zu from rank %d is %g", r, i, from, got[i]);
    dsmall.download(got.data(), kSmall * 4);
    for (size_t i = 0; i < kSmall; ++i) {
        RANK_CHECK(ctx, got[i] == value(from, i) * 3, "rank %d: small element %zu is %g", r, i, got[i]);
        RANK_CHECK(ctx, self_out[i] == value(r, i) * 3, "rank %d: own element %zu is %g", r, i, self_out[i]);
    }
    // A blocking send of a GPU buffer and its receive into another.
    if (r == 0) RANK_CHECK_OK(ctx, ibex_send(drecv.data(), kCount, IBEX_F32, 1, comm, nullptr));
    if (r == 1) {
        RANK_CHECK_OK(ctx, ibex_recv(dsend.data(), kCount, IBEX_F32, 0, comm, nullptr));
        dsend.download(got.data(), bytes);
        for (size_t i = 0; i < kCount; ++i)
            RANK_CHECK(ctx, got[i] == value(n - 1, i), "rank 1: element %zu of the blocking receive is %g", i, got[i]);
    }
    // alltoallv: kCount / n floats from each rank's GPU buffer to each, into GPU memory.
    const size_t block = kCount / static_cast<size_t>(n);
    std::vector<size_t> counts(static_cast<size_t>(n), block), displs(static_cast<size_t>(n));
    for (size_t q = 0; q < displs.size(); ++q) displs[q] = q * block;
    dsend.upload(send.data(), bytes);
    RANK_CHECK_OK(ctx, ibex_alltoallv(dsend.data(), counts.data(), displs.data(), drecv.data(), counts.data(),
                                      displs.data(), IBEX_F32, comm, nullptr));
    drecv.download(got.data(), bytes);
    for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < block; ++i) {
            const size_t at = static_cast<size_t>(q) * block + i, src = static_cast<size_t>(r) * block + i;
            RANK_CHECK(ctx, got[at] == value(q, src), "rank %d: alltoallv element %zu from rank %d is %g", r, i, q,
                       got[at]);
        }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(SimulatedGpuBuffers, SendsAndReceivesOverShmAndUdp) {
    for (bool shm : {true, false})
        for (int late : {0, 3}) {
            SCOPED_TRACE(std::string(shm ? "shm" : "udp") + ", late copies " + std::to_string(late));
            auto out = ibex::test::run_ranks(
                3,
                [&](RankCtx &ctx) {
                    setenv("IBEX_SHM", shm ? "1" : "0", 1);
                    ibex::cuda::simulated::set_deferred_copies(late);
                    return p2p_body(ctx);
                },
                150);
            ibex::test::expect_all_passed(out);
        }
}

// Staged collectives issued without waiting overlap their copies (allreduce/gpu_staging.h):
// the input of the op queued behind the running one is copied while it runs, and an op's
// results copy back while the next one runs. Rank 0 issues everything before its peers
// join (they start 50 ms late), so its first op is running with the rest queued behind it:
// the second op's input must be prefetched. Four allreduces on separate buffers, then one
// in place on the last one's output (its input is that op's result, so it must not be
// prefetched), then a host allreduce. Waiting for the host op alone must find every GPU
// op done (requests complete in order), and every result is the host's.
int back_to_back_body(RankCtx &ctx, bool chained_only) {
    constexpr size_t kN = 65536, kOps = 4;
    const size_t bytes = kN * 4;
    const float n = static_cast<float>(ctx.nranks);
    std::vector<std::unique_ptr<SimulatedBuffer>> send, recv;
    for (size_t i = 0; i < kOps; ++i) {
        send.push_back(std::make_unique<SimulatedBuffer>(bytes, 0x100 * (i + 1)));
        recv.push_back(std::make_unique<SimulatedBuffer>(bytes, 0x80 * (i + 1)));
        RANK_CHECK(ctx, send.back()->ok() && recv.back()->ok(), "rank %d: cannot map simulated GPU memory", ctx.rank);
    }
    std::vector<float> mine(kN), host_in(kN, static_cast<float>(ctx.rank)), host_out(kN), got(kN);
    for (size_t i = 0; i < kOps; ++i) {
        for (size_t j = 0; j < kN; ++j) mine[j] = value(ctx.rank, j + i);
        send[i]->upload(mine.data(), bytes);
    }
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
    if (ctx.rank != 0) usleep(50000);
    std::vector<ibex_request_t *> gpu_reqs;
    const size_t independent = chained_only ? 1 : kOps;
    for (size_t i = 0; i < independent; ++i) {
        ibex_request_t *r = nullptr;
        RANK_CHECK_OK(ctx, ibex_allreduce(send[i]->data(), recv[i]->data(), kN, IBEX_F32, IBEX_SUM, comm, &r));
        gpu_reqs.push_back(r);
    }
    float *last = recv[independent - 1]->data();
    ibex_request_t *r = nullptr;
    RANK_CHECK_OK(ctx, ibex_allreduce(last, last, kN, IBEX_F32, IBEX_SUM, comm, &r));
    gpu_reqs.push_back(r);
    ibex_request_t *host = nullptr;
    RANK_CHECK_OK(ctx, ibex_allreduce(host_in.data(), host_out.data(), kN, IBEX_F32, IBEX_SUM, comm, &host));
    RANK_CHECK_OK(ctx, ibex_wait(host));
    for (size_t i = 0; i < gpu_reqs.size(); ++i)
        RANK_CHECK(ctx, ibex::coll::request_done(gpu_reqs[i]), "rank %d: GPU op %zu not done when the host op after it was",
                   ctx.rank, i);
    for (ibex_request_t *q : gpu_reqs) RANK_CHECK_OK(ctx, ibex_wait(q));
    const uint64_t prefetched = comm->gpu.prefetched();
    RANK_CHECK(ctx, ctx.rank != 0 || chained_only || prefetched >= 1,
               "rank 0: no op's input was prefetched with %zu queued behind a running one", kOps);
    RANK_CHECK(ctx, !chained_only || prefetched == 0, "rank %d: an op whose input is the running op's output was prefetched",
               ctx.rank);
    for (size_t j = 0; j < kN; ++j)
        RANK_CHECK(ctx, host_out[j] == n * (n - 1) / 2, "rank %d: host allreduce [%zu] = %g", ctx.rank, j, host_out[j]);
    for (size_t i = 0; i < independent; ++i) {
        recv[i]->download(got.data(), bytes);
        for (size_t j = 0; j < kN; ++j) {
            float want = 0;
            for (int q = 0; q < ctx.nranks; ++q) want += value(q, j + i);
            if (i + 1 == independent) want *= n; // the in-place op ran over it
            RANK_CHECK(ctx, got[j] == want, "rank %d: op %zu [%zu] = %g, want %g", ctx.rank, i, j, got[j], want);
        }
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(SimulatedGpuBuffers, BackToBackOpsOverlapTheirCopiesAndCompleteInOrder) {
    for (int n : {2, 3})
        // 200: the results of the last GPU op reach the GPU long after the host op behind
        // it could have finished, had it not waited its turn.
        for (int late : {0, 3, 200})
            for (bool chained_only : {false, true}) {
                SCOPED_TRACE(std::to_string(n) + " ranks, late copies " + std::to_string(late) +
                             (chained_only ? ", chained" : ", independent"));
                auto out = ibex::test::run_ranks(
                    n,
                    [&](RankCtx &ctx) {
                        setenv("IBEX_SHM", "0", 1);
                        ibex::cuda::simulated::set_deferred_copies(late);
                        return back_to_back_body(ctx, chained_only);
                    },
                    120);
                ibex::test::expect_all_passed(out);
            }
}

// A rank dies while the others have staged GPU ops queued: the op it finished with them
// completes with its result, and the rest fail, in order, well within the timeout (5 s
// here): from the transport's retry limit or from the bootstrap connection, whichever
// comes first. (A driver with ops queued behind its running one once never napped, so
// never looked at the bootstrap connections, and a survivor that had nothing outstanding
// to the dead rank learned of it only at the timeout, in about one run of eight.)
// The survivors issue four allreduces without waiting (the third is prefetched once the
// first's results have landed, while the second waits on the dead rank, and is dropped
// with the queue when the error comes); the victim joins the first alone, waits for it
// and dies once every rank has the first one's result. (Dying as soon as the others had
// issued theirs, it could take its last WRITE of the first op with it: a rank's op is done
// when its own result is in, not when its peers have what it sent, and under a loaded
// ctest -j4 a survivor's first op once failed so.)
int killed_behind_queued_body(RankCtx &ctx, int victim, std::atomic<int> *have_first) {
    constexpr size_t kN = 65536, kOps = 4;
    constexpr int kTimeoutMs = 5000;
    const size_t bytes = kN * 4;
    std::vector<std::unique_ptr<SimulatedBuffer>> send, recv;
    for (size_t i = 0; i < kOps; ++i) {
        send.push_back(std::make_unique<SimulatedBuffer>(bytes, 0x40 * (i + 1)));
        recv.push_back(std::make_unique<SimulatedBuffer>(bytes, 0x20 * (i + 1)));
        RANK_CHECK(ctx, send.back()->ok() && recv.back()->ok(), "rank %d: cannot map simulated GPU memory", ctx.rank);
    }
    std::vector<float> mine(kN), got(kN);
    for (size_t j = 0; j < kN; ++j) mine[j] = value(ctx.rank, j);
    for (auto &b : send) b->upload(mine.data(), bytes);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex::test::init_comm(ctx, &comm, kTimeoutMs));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<ibex_request_t *> reqs;
    const size_t count = ctx.rank == victim ? 1 : kOps;
    for (size_t i = 0; i < count; ++i) {
        ibex_request_t *r = nullptr;
        RANK_CHECK_OK(ctx, ibex_allreduce(send[i]->data(), recv[i]->data(), kN, IBEX_F32, IBEX_SUM, comm, &r));
        reqs.push_back(r);
    }
    RANK_CHECK_OK(ctx, ibex_wait(reqs[0]));
    have_first->fetch_add(1);
    if (ctx.rank == victim) ibex::test::die_when_all_ready(ctx, have_first, 0);
    recv[0]->download(got.data(), bytes);
    for (size_t j = 0; j < kN; ++j) {
        float want = 0;
        for (int q = 0; q < ctx.nranks; ++q) want += value(q, j);
        RANK_CHECK(ctx, got[j] == want, "rank %d: the first op [%zu] = %g, want %g", ctx.rank, j, got[j], want);
    }
    for (size_t i = 1; i < kOps; ++i) {
        const ibex_status_t st = ibex_wait(reqs[i]);
        RANK_CHECK(ctx, st != IBEX_OK, "rank %d: op %zu succeeded without the dead rank", ctx.rank, i);
    }
    const long took = ibex::test::ms_since(t0);
    ctx.say("rank %d: the queued ops failed after %ld ms: %s", ctx.rank, took, ibex_last_error());
    RANK_CHECK(ctx, took < kTimeoutMs / 2, "rank %d: the queued ops failed only after %ld ms", ctx.rank, took);
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

TEST(SimulatedGpuBuffersFailure, ARankKilledBehindQueuedOpsFailsTheRestInOrder) {
    for (int late : {0, 3}) {
        SCOPED_TRACE("late copies " + std::to_string(late));
        ibex::test::run_with_victim(3, 2, [&](RankCtx &ctx, std::atomic<int> *issued) {
            setenv("IBEX_SHM", "0", 1);
            ibex::cuda::simulated::set_deferred_copies(late);
            return killed_behind_queued_body(ctx, 2, issued);
        });
    }
}

} // namespace
