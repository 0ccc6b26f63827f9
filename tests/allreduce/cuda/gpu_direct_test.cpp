// Collectives on GPU buffers mapped across processes (allreduce/gpu_direct.h), on any host:
// the buffers are simulated device memory (runtime/base/simulated_device.h) whose host
// backing lies in one shared mapping made before the ranks fork, and a fake CUDA IPC
// exports a buffer as its backing's address and "opens" it as a new device view of the same
// bytes. So a rank reaches a peer's buffer only through what the path maps, as CUDA IPC
// gives it on a GPU, and any CPU access to a view faults. Checked: allreduce, reduce,
// reduce-scatter, allgather and broadcast on 2, 3 and 4 ranks, in place and not, bit for
// bit against the same call on host buffers; each peer allocation mapped once however many
// calls use it; a refused export or a refused open makes every rank stage the op instead
// (counted), with the same results. On a GPU, tests/allreduce/cuda/collectives_test.cpp
// runs the real CUDA IPC.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "allreduce/gpu_direct.h"
#include "runtime/base/simulated_device.h"
#include "runtime/base/status.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;
namespace sim = ibex::cuda::simulated;

constexpr size_t kCount = 300007; // odd: segments of unequal length
constexpr size_t kMaxRanks = 4;
constexpr size_t kPage = 4096;
// Per rank: a send, a receive and an n-block buffer, each page-rounded, in the shared backing.
constexpr size_t kBufBytes = (kCount * 4 + kPage - 1) / kPage * kPage;
constexpr size_t kAllBytes = (kCount * 4 * kMaxRanks + kPage - 1) / kPage * kPage;
constexpr size_t kPerRank = 2 * kBufBytes + kAllBytes;

uint8_t *g_shared = nullptr; // made by the parent, inherited by every rank

// The fake CUDA IPC, per process: the simulated buffers of this rank, and the views it
// opened onto peers' backings.
struct Buffer {
    uint8_t *view;
    size_t bytes;
    uint8_t *backing;
};
std::vector<Buffer> g_mine;
std::map<void *, size_t> g_opened;
int g_opens = 0;
bool g_refuse_export = false, g_refuse_open = false;
uint32_t g_generation = 0; // bumped: this rank's buffers stand for new allocations at the same addresses
uint32_t g_gpu_key = 0;     // the GPU the exports name (0: unknown, so never "one GPU")

uint8_t *new_view(size_t bytes, uint8_t *backing) {
    void *v = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) return nullptr;
    if (!sim::add_range(v, bytes, backing)) {
        munmap(v, bytes);
        return nullptr;
    }
    return static_cast<uint8_t *>(v);
}

ibex_status_t fake_export(const void *p, ibex::cuda::IpcExport *out) {
    if (g_refuse_export) return ibex::fail(IBEX_ERR_NOT_SUPPORTED, "fake IPC: this allocation cannot be exported");
    const auto *b = static_cast<const uint8_t *>(p);
    for (const Buffer &m : g_mine) {
        if (b < m.view || b >= m.view + m.bytes) continue;
        *out = ibex::cuda::IpcExport{};
        std::memcpy(out->handle, &m.backing, sizeof m.backing);
        std::memcpy(out->handle + sizeof m.backing, &g_generation, sizeof g_generation);
        out->base = reinterpret_cast<uintptr_t>(m.view);
        out->size = m.bytes;
        out->device = 0;
        out->gpu_key = g_gpu_key;
        return IBEX_OK;
    }
    return ibex::fail(IBEX_ERR_INVALID_ARGUMENT, "fake IPC: not a buffer of this test");
}

ibex_status_t fake_open(const ibex::cuda::IpcExport &e, void **out) {
    if (g_refuse_open) return ibex::fail(IBEX_ERR_REMOTE, "fake IPC: stale handle");
    uint8_t *backing = nullptr;
    std::memcpy(&backing, e.handle, sizeof backing);
    uint8_t *v = new_view(e.size, backing);
    if (!v) return ibex::fail(IBEX_ERR_NO_MEMORY, "fake IPC: no view");
    g_opened[v] = e.size;
    ++g_opens;
    *out = v;
    return IBEX_OK;
}

void fake_close(void *p) {
    sim::remove_range(p);
    munmap(p, g_opened[p]);
    g_opened.erase(p);
}

const ibex::coll::GpuDirect::Ipc kFakeIpc{fake_export, {fake_open, fake_close}};

// Rank `rank`'s simulated buffer `which` (0 send, 1 receive, 2 the n-block one).
uint8_t *make_buffer(int rank, int which) {
    const size_t off = static_cast<size_t>(rank) * kPerRank + (which == 0 ? 0 : which == 1 ? kBufBytes : 2 * kBufBytes);
    const size_t bytes = which == 2 ? kAllBytes : kBufBytes;
    uint8_t *v = new_view(bytes, g_shared + off);
    if (v) g_mine.push_back({v, bytes, g_shared + off});
    return v;
}

uint8_t *backing_of(const void *view) { return sim::backing(view); }

float value(int rank, size_t i) { return static_cast<float>(static_cast<int>((rank * 7 + i * 3) % 11) - 5) * 0.37f; }

struct Expect {
    bool direct = true;    // the path ran each op
    bool fell_back = false; // ... or every op fell back to the staging
    bool one_gpu = false;   // every rank's buffers on one GPU (else one GPU each)
    bool whole = false;     // ... and rank 0 runs each op whole
};

int body(RankCtx &ctx, Expect want) {
    const size_t n = static_cast<size_t>(ctx.nranks), bytes = kCount * 4;
    const int r = ctx.rank;
    ibex::coll::GpuDirect::set_ipc_for_tests(&kFakeIpc);
    g_gpu_key = 0x80000001u + (want.one_gpu ? 0u : static_cast<uint32_t>(r));
    uint8_t *dsend = make_buffer(r, 0), *drecv = make_buffer(r, 1), *dall = make_buffer(r, 2);
    RANK_CHECK(ctx, dsend && drecv && dall, "rank %d: cannot map simulated GPU memory", r);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, r, nullptr));
    RANK_CHECK(ctx, comm->gpu_direct.enabled(), "rank %d: the mapped GPU path is off", r);

    std::vector<float> send(kCount), host(kCount * n), got(kCount * n);
    for (size_t i = 0; i < kCount; ++i) send[i] = value(r, i);
    uint64_t ops = 0;
    auto check_path = [&](const char *what) -> bool {
        ++ops;
        if (want.direct && comm->gpu_direct.taken() != ops) {
            ctx.say("rank %d: %s did not map the peers' buffers (taken %llu of %llu)", r, what,
                    static_cast<unsigned long long>(comm->gpu_direct.taken()), static_cast<unsigned long long>(ops));
            return false;
        }
        if (want.fell_back && (comm->gpu_direct.fallbacks() != ops || comm->gpu_direct.taken() != 0)) {
            ctx.say("rank %d: %s: %llu fallbacks and %llu mapped runs, want %llu and 0", r, what,
                    static_cast<unsigned long long>(comm->gpu_direct.fallbacks()),
                    static_cast<unsigned long long>(comm->gpu_direct.taken()), static_cast<unsigned long long>(ops));
            return false;
        }
        return true;
    };

    // Allreduce out of place: sum, then max; twice each, so the second finds its mappings.
    for (ibex_redop_t op : {IBEX_SUM, IBEX_MAX}) {
        for (int round = 0; round < 2; ++round) {
            std::memcpy(backing_of(dsend), send.data(), bytes);
            RANK_CHECK_OK(ctx, ibex_allreduce(dsend, drecv, kCount, IBEX_F32, op, comm, nullptr));
            RANK_CHECK(ctx, check_path("allreduce"), "path");
            RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), host.data(), kCount, IBEX_F32, op, comm, nullptr));
            RANK_CHECK(ctx, std::memcmp(backing_of(drecv), host.data(), bytes) == 0,
                       "rank %d: GPU allreduce (op %d, round %d) differs from the host's", r, op, round);
        }
    }
    // Per rank, each maps its peers' buffers; run whole, only rank 0 does.
    const int opens_after_allreduce = g_opens, want_opens = want.whole && r != 0 ? 0 : 2 * (ctx.nranks - 1);
    if (want.direct)
        RANK_CHECK(ctx, opens_after_allreduce == want_opens,
                   "rank %d: %d opens of %d peers' send and receive buffers, want %d", r, opens_after_allreduce,
                   ctx.nranks - 1, want_opens);

    // In place, average (the fold lands in rank 0's buffer for ranks >= 2).
    std::memcpy(backing_of(dsend), send.data(), bytes);
    std::vector<float> inplace = send;
    RANK_CHECK_OK(ctx, ibex_allreduce(dsend, dsend, kCount, IBEX_F32, IBEX_AVG, comm, nullptr));
    RANK_CHECK(ctx, check_path("in-place allreduce"), "path");
    RANK_CHECK_OK(ctx, ibex_allreduce(inplace.data(), inplace.data(), kCount, IBEX_F32, IBEX_AVG, comm, nullptr));
    RANK_CHECK(ctx, std::memcmp(backing_of(dsend), inplace.data(), bytes) == 0,
               "rank %d: in-place GPU avg differs from the host's", r);

    // Allgather, out of place then in place (this rank's block already at its place).
    std::memcpy(backing_of(dsend), send.data(), bytes);
    RANK_CHECK_OK(ctx, ibex_allgather(dsend, dall, kCount, IBEX_F32, comm, nullptr));
    RANK_CHECK(ctx, check_path("allgather"), "path");
    RANK_CHECK_OK(ctx, ibex_allgather(send.data(), host.data(), kCount, IBEX_F32, comm, nullptr));
    RANK_CHECK(ctx, std::memcmp(backing_of(dall), host.data(), bytes * n) == 0, "rank %d: GPU allgather differs", r);
    std::memset(backing_of(dall), 0, bytes * n);
    std::memcpy(backing_of(dall) + static_cast<size_t>(r) * bytes, send.data(), bytes);
    RANK_CHECK_OK(ctx, ibex_allgather(dall + static_cast<size_t>(r) * bytes, dall, kCount, IBEX_F32, comm, nullptr));
    RANK_CHECK(ctx, check_path("in-place allgather"), "path");
    RANK_CHECK(ctx, std::memcmp(backing_of(dall), host.data(), bytes * n) == 0, "rank %d: in-place GPU allgather differs",
               r);

    // Reduce-scatter of the gathered blocks (each rank's are the same numbers, so scale
    // them by the rank first): out of place, then in place (NCCL's: recvbuf at block r).
    const size_t block = kCount;
    std::vector<float> mine(block * n);
    for (size_t i = 0; i < block * n; ++i) mine[i] = host[i] * static_cast<float>(r + 1);
    std::memcpy(backing_of(dall), mine.data(), bytes * n);
    RANK_CHECK_OK(ctx, ibex_reduce_scatter(dall, drecv, block, IBEX_F32, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, check_path("reduce_scatter"), "path");
    RANK_CHECK_OK(ctx, ibex_reduce_scatter(mine.data(), host.data(), block, IBEX_F32, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, std::memcmp(backing_of(drecv), host.data(), block * 4) == 0, "rank %d: GPU reduce_scatter differs",
               r);
    uint8_t *at = dall + static_cast<size_t>(r) * block * 4;
    RANK_CHECK_OK(ctx, ibex_reduce_scatter(dall, at, block, IBEX_F32, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, check_path("in-place reduce_scatter"), "path");
    RANK_CHECK(ctx, std::memcmp(backing_of(at), host.data(), block * 4) == 0, "rank %d: in-place GPU reduce_scatter differs",
               r);

    // Reduce onto the last rank (the others pass no receive buffer), then in place onto
    // rank 0; product, so the order of the fold shows in the bits.
    std::memcpy(backing_of(dsend), send.data(), bytes);
    const bool last = r == ctx.nranks - 1;
    RANK_CHECK_OK(ctx, ibex_reduce(dsend, last ? drecv : nullptr, kCount, IBEX_F32, IBEX_PROD, ctx.nranks - 1, comm, nullptr));
    RANK_CHECK(ctx, check_path("reduce"), "path");
    RANK_CHECK_OK(ctx, ibex_reduce(send.data(), last ? host.data() : nullptr, kCount, IBEX_F32, IBEX_PROD, ctx.nranks - 1,
                                   comm, nullptr));
    if (last)
        RANK_CHECK(ctx, std::memcmp(backing_of(drecv), host.data(), bytes) == 0, "rank %d: GPU reduce differs", r);
    std::vector<float> in_place = send;
    RANK_CHECK_OK(ctx, ibex_reduce(dsend, r == 0 ? dsend : nullptr, kCount, IBEX_F32, IBEX_SUM, 0, comm, nullptr));
    RANK_CHECK(ctx, check_path("in-place reduce"), "path");
    RANK_CHECK_OK(ctx, ibex_reduce(in_place.data(), r == 0 ? in_place.data() : nullptr, kCount, IBEX_F32, IBEX_SUM, 0,
                                   comm, nullptr));
    RANK_CHECK(ctx, std::memcmp(backing_of(dsend), in_place.data(), bytes) == 0, "rank %d: in-place GPU reduce differs", r);

    // Broadcast from the last rank, out of place and in place.
    std::memcpy(backing_of(dsend), send.data(), bytes);
    RANK_CHECK_OK(ctx, ibex_broadcast(dsend, drecv, kCount, IBEX_F32, ctx.nranks - 1, comm, nullptr));
    RANK_CHECK(ctx, check_path("broadcast"), "path");
    std::vector<float> from(kCount);
    for (size_t i = 0; i < kCount; ++i) from[i] = value(ctx.nranks - 1, i);
    RANK_CHECK(ctx, std::memcmp(backing_of(drecv), from.data(), bytes) == 0, "rank %d: GPU broadcast differs", r);
    RANK_CHECK_OK(ctx, ibex_broadcast(dsend, dsend, kCount, IBEX_F32, 0, comm, nullptr));
    RANK_CHECK(ctx, check_path("in-place broadcast"), "path");
    for (size_t i = 0; i < kCount; ++i) from[i] = value(0, i);
    RANK_CHECK(ctx, std::memcmp(backing_of(dsend), from.data(), bytes) == 0, "rank %d: in-place GPU broadcast differs", r);

    if (want.direct)
        RANK_CHECK(ctx, g_opens <= 3 * (ctx.nranks - 1), "rank %d: %d opens, want at most one per peer allocation", r,
                   g_opens);
    // A rank that fell back says why: its own refusal, or that another rank's (rank 0's, run
    // whole) stopped it.
    const std::string why = comm->gpu_direct.fallback_reason();
    if (want.fell_back)
        RANK_CHECK(ctx, why.find("fake IPC") != std::string::npos || why.find("another rank could not") != std::string::npos ||
                            why.find("rank 0 could not map") != std::string::npos,
                   "rank %d: the fallback's reason is \"%s\"", r, why.c_str());
    else
        RANK_CHECK(ctx, why.empty(), "rank %d: no op fell back, yet the reason is \"%s\"", r, why.c_str());
    RANK_CHECK(ctx, comm->gpu_direct.taken_whole() == (want.whole ? comm->gpu_direct.taken() : 0),
               "rank %d: %llu of %llu ops run whole by rank 0, want %s", r,
               static_cast<unsigned long long>(comm->gpu_direct.taken_whole()),
               static_cast<unsigned long long>(comm->gpu_direct.taken()), want.whole ? "all" : "none");
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    RANK_CHECK(ctx, g_opened.empty(), "rank %d: %zu peer mappings left open after destroy", r, g_opened.size());
    return 0;
}

class GpuDirectSimulated : public ::testing::Test {
protected:
    void SetUp() override {
        void *p = mmap(nullptr, kPerRank * kMaxRanks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(p, MAP_FAILED);
        g_shared = static_cast<uint8_t *>(p);
    }
    void TearDown() override { munmap(g_shared, kPerRank * kMaxRanks); }
};

TEST_F(GpuDirectSimulated, EveryCollectiveOnTwoThreeAndFourRanksGivesTheHostBits) {
    for (bool one_gpu : {false, true})
        for (int n : {2, 3, 4}) {
            SCOPED_TRACE(std::string(one_gpu ? "one GPU" : "a GPU each") + ", ranks " + std::to_string(n));
            auto out = ibex::test::run_ranks(
                n, [one_gpu](RankCtx &ctx) { return body(ctx, Expect{true, false, one_gpu, one_gpu}); }, 120);
            ibex::test::expect_all_passed(out);
        }
}

// IBEX_GPU_DIRECT_LEADER=0 on one rank keeps every rank's share on one GPU too.
TEST_F(GpuDirectSimulated, OneGpuWithoutALeaderKeepsThePerRankShares) {
    auto out = ibex::test::run_ranks(
        3,
        [](RankCtx &ctx) {
            if (ctx.rank == 2) setenv("IBEX_GPU_DIRECT_LEADER", "0", 1);
            return body(ctx, Expect{true, false, true, false});
        },
        120);
    ibex::test::expect_all_passed(out);
}

TEST_F(GpuDirectSimulated, AnExportRefusedOnOneRankStagesTheOpOnEveryRank) {
    auto out = ibex::test::run_ranks(
        3,
        [](RankCtx &ctx) {
            g_refuse_export = ctx.rank == 1;
            return body(ctx, Expect{false, true});
        },
        120);
    ibex::test::expect_all_passed(out);
}

TEST_F(GpuDirectSimulated, AnOpenRefusedOnOneRankStagesTheOpOnEveryRank) {
    // One GPU each: rank 2 maps its peers; on one GPU only rank 0 maps anything.
    for (bool one_gpu : {false, true}) {
        SCOPED_TRACE(one_gpu ? "one GPU" : "a GPU each");
        auto out = ibex::test::run_ranks(
            3,
            [one_gpu](RankCtx &ctx) {
                g_refuse_open = ctx.rank == (one_gpu ? 0 : 2);
                return body(ctx, Expect{false, true, one_gpu, false});
            },
            120);
        ibex::test::expect_all_passed(out);
    }
}

// A rank SIGKILLed while its peers have its buffers mapped (and it theirs): the others fail
// well within the timeout, through the fast-box round that waits on it, with no crash.
TEST(GpuDirectSimulatedFailure, ARankKilledWhileMappedFailsTheOthers) {
    constexpr int kRanks = 3;
    const size_t bytes = ibex::test::kKilledCount * 4;
    void *p = mmap(nullptr, bytes * kRanks, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    uint8_t *shared = static_cast<uint8_t *>(p);
    ibex::test::run_with_victim(kRanks, 1, [&](RankCtx &ctx, std::atomic<int> *ready) {
        ibex::coll::GpuDirect::set_ipc_for_tests(&kFakeIpc);
        uint8_t *backing = shared + static_cast<size_t>(ctx.rank) * bytes;
        uint8_t *view = new_view(bytes, backing);
        RANK_CHECK(ctx, view, "rank %d: cannot map simulated GPU memory", ctx.rank);
        g_mine.push_back({view, bytes, backing});
        return ibex::test::killed_body(ctx, 1, ready, {}, reinterpret_cast<float *>(view));
    });
    munmap(p, bytes * kRanks);
}

// One rank passes GPU buffers where the other passes host memory to the same call: the
// paths differ (the mapped one needs every rank's buffers on a GPU), and both ranks get an
// error naming the mismatch within the timeout instead of hanging.
TEST_F(GpuDirectSimulated, GpuBuffersOnOneRankAndHostOnTheOtherAreAClearError) {
    auto out = ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            ibex::coll::GpuDirect::set_ipc_for_tests(&kFakeIpc);
            uint8_t *d = make_buffer(ctx.rank, 0);
            RANK_CHECK(ctx, d, "rank %d: cannot map simulated GPU memory", ctx.rank);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_comm(ctx, &comm, 5000));
            std::vector<float> host(kCount, 1.0f);
            void *buf = ctx.rank == 0 ? static_cast<void *>(d) : host.data();
            const auto t0 = std::chrono::steady_clock::now();
            const ibex_status_t st = ibex_allreduce(buf, buf, kCount, IBEX_F32, IBEX_SUM, comm, nullptr);
            RANK_CHECK(ctx, st != IBEX_OK, "rank %d: a mixed allreduce succeeded", ctx.rank);
            RANK_CHECK(ctx, std::strstr(ibex_last_error(), "GPU buffers where others passed host memory"),
                       "rank %d: the error does not name the cause: %s", ctx.rank, ibex_last_error());
            ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), ibex::test::ms_since(t0),
                    ibex_last_error());
            RANK_CHECK(ctx, ibex::test::ms_since(t0) < 5000, "rank %d: the error took %ld ms", ctx.rank,
                       ibex::test::ms_since(t0));
            RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
            return 0;
        },
        60);
    ibex::test::expect_all_passed(out, true);
}

// A peer frees a buffer and gets a new allocation at the same address (a new handle): the
// others map the new one and close the old mapping at once, rather than keep it open.
TEST_F(GpuDirectSimulated, AReallocatedPeerBufferIsMappedAnewAndTheOldMappingClosed) {
    auto out = ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            ibex::coll::GpuDirect::set_ipc_for_tests(&kFakeIpc);
            uint8_t *dsend = make_buffer(ctx.rank, 0), *drecv = make_buffer(ctx.rank, 1);
            RANK_CHECK(ctx, dsend && drecv, "rank %d: cannot map simulated GPU memory", ctx.rank);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
            std::vector<float> send(kCount), want(kCount);
            for (size_t i = 0; i < kCount; ++i) {
                send[i] = value(ctx.rank, i);
                want[i] = value(0, i) + value(1, i);
            }
            for (int round = 0; round < 3; ++round) {
                if (round == 2 && ctx.rank == 1) ++g_generation;
                const int opens = g_opens;
                const size_t open_now = g_opened.size();
                std::memcpy(backing_of(dsend), send.data(), kCount * 4);
                RANK_CHECK_OK(ctx, ibex_allreduce(dsend, drecv, kCount, IBEX_F32, IBEX_SUM, comm, nullptr));
                RANK_CHECK(ctx, std::memcmp(backing_of(drecv), want.data(), kCount * 4) == 0, "rank %d round %d: wrong sums",
                           ctx.rank, round);
                const int want_opens = round == 0 || (round == 2 && ctx.rank == 0) ? 2 : 0;
                RANK_CHECK(ctx, g_opens - opens == want_opens, "rank %d round %d: %d opens, want %d", ctx.rank, round,
                           g_opens - opens, want_opens);
                RANK_CHECK(ctx, g_opened.size() == (round == 0 ? open_now + 2 : open_now),
                           "rank %d round %d: %zu mappings open, %zu before", ctx.rank, round, g_opened.size(), open_now);
            }
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60);
    ibex::test::expect_all_passed(out);
}

// The local phase's copies finish only at their third look (a busy copy engine): the ranks
// wait for them before the barrier, get the right bytes, and do not nap meanwhile (the
// GPU's event wakes no descriptor: a nap would cost up to 100 ms a look, so 30 collectives
// would take 6 s or more; polled, they take milliseconds, so the 3 s bound is a stall check,
// not a speed test). Spinning is off, so any idle pass that does not know to yield naps.
TEST_F(GpuDirectSimulated, LateCopiesAreWaitedForWithoutNapping) {
    auto out = ibex::test::run_ranks(
        3,
        [](RankCtx &ctx) {
            ibex::coll::GpuDirect::set_ipc_for_tests(&kFakeIpc);
            sim::set_deferred_copies(3);
            // No spinning after the last movement: an idle pass naps at once unless it knows
            // better, as it would on a GPU whose kernel outlasts the spin.
            setenv("IBEX_COMM_SPIN_US", "0", 1);
            setenv("IBEX_COMM_WAIT_SPIN_US", "0", 1);
            uint8_t *dsend = make_buffer(ctx.rank, 0), *dall = make_buffer(ctx.rank, 2);
            RANK_CHECK(ctx, dsend && dall, "rank %d: cannot map simulated GPU memory", ctx.rank);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
            const size_t n = static_cast<size_t>(ctx.nranks), count = kCount;
            std::vector<float> send(count), got(count * n);
            for (size_t i = 0; i < count; ++i) send[i] = value(ctx.rank, i);
            std::memcpy(backing_of(dsend), send.data(), count * 4);
            const auto t0 = std::chrono::steady_clock::now();
            for (int round = 0; round < 30; ++round) {
                std::memset(backing_of(dall), 0, count * 4 * n);
                RANK_CHECK_OK(ctx, ibex_allgather(dsend, dall, count, IBEX_F32, comm, nullptr));
                std::memcpy(got.data(), backing_of(dall), count * 4 * n);
                for (size_t r = 0; r < n; ++r)
                    RANK_CHECK(ctx, got[r * count + 7] == value(static_cast<int>(r), 7) &&
                                        got[r * count + count - 1] == value(static_cast<int>(r), count - 1),
                               "rank %d round %d: block %zu wrong", ctx.rank, round, r);
            }
            const long ms = ibex::test::ms_since(t0);
            RANK_CHECK(ctx, comm->gpu_direct.taken() == 30, "rank %d: %llu of 30 mapped", ctx.rank,
                       static_cast<unsigned long long>(comm->gpu_direct.taken()));
            RANK_CHECK(ctx, ms < 3000, "rank %d: 30 allgathers took %ld ms: the driver napped on the GPU's work",
                       ctx.rank, ms);
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60);
    ibex::test::expect_all_passed(out);
}

TEST_F(GpuDirectSimulated, OffWhenTheEnvironmentSaysSo) {
    auto out = ibex::test::run_ranks(
        2,
        [](RankCtx &ctx) {
            if (ctx.rank == 1) setenv("IBEX_GPU_DIRECT", "0", 1);
            ibex::coll::GpuDirect::set_ipc_for_tests(&kFakeIpc);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
            RANK_CHECK(ctx, !comm->gpu_direct.enabled(), "rank %d: on, though rank 1 turned it off", ctx.rank);
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60);
    ibex::test::expect_all_passed(out);
}

} // namespace
