// Each allreduce algorithm, forced with IBEX_ALGO, on real ranks (forked processes over
// udp:lo): correct sums for rank counts that are and are not powers of two, for counts of
// 0, 1, fewer than the ranks, not divisible by them and spanning many slices, in place and
// out of place, also with packets lost, reordered and duplicated; every rank ends with the
// same bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

uint64_t fnv(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t *>(p)[i]) * 1099511628211ull;
    return h;
}

// Values whose sums are exact in float whatever the order, plus a random-ish float pass
// whose hash is compared across ranks (same bits everywhere).
int allreduce_body(RankCtx &ctx, const char *algo, bool lossy = false) {
    setenv("IBEX_ALGO", algo, 1);
    if (lossy) {
        // Retransmissions re-read source buffers and duplicates hit staging slots again:
        // results must not change.
        setenv("IBEX_FAULT_LOSS", "0.02", 1);
        setenv("IBEX_FAULT_REORDER", "0.01", 1);
        setenv("IBEX_FAULT_DUPLICATE", "0.01", 1);
        setenv("IBEX_FAULT_SEED", std::to_string(1000 + ctx.rank).c_str(), 1);
    }
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    RANK_CHECK(ctx, std::strcmp(ibex_comm_allreduce_algo(comm, 1 << 20), algo) == 0,
               "rank %d: algo %s reported, %s forced", ctx.rank, ibex_comm_allreduce_algo(comm, 1 << 20), algo);
    const size_t n = static_cast<size_t>(ctx.nranks);
    for (size_t count : {size_t(0), size_t(1), n - 1, size_t(7), size_t(1000), size_t(40009)}) {
        for (bool in_place : {false, true}) {
            std::vector<float> send(count + 1), recv(count + 1, -1.0f);
            for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((ctx.rank * 7 + i * 3) % 11) - 5;
            float *out = in_place ? send.data() : recv.data();
            RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), out, count, IBEX_F32, IBEX_SUM, comm, nullptr));
            for (size_t i = 0; i < count; ++i) {
                float want = 0;
                for (size_t r = 0; r < n; ++r) want += static_cast<float>((r * 7 + i * 3) % 11) - 5;
                RANK_CHECK(ctx, out[i] == want, "rank %d %s count %zu %s: [%zu] = %g, want %g", ctx.rank, algo, count,
                           in_place ? "in-place" : "out-of-place", i, out[i], want);
            }
            RANK_CHECK(ctx, out[count] == (in_place ? 0.0f : -1.0f), "rank %d: wrote past the end", ctx.rank);
        }
    }
    // Rounded sums: report a hash, the parent compares them.
    std::vector<float> x(5003), y(5003);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / static_cast<float>(ctx.rank * 31 + i + 3);
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
    ctx.say("hash %016llx", static_cast<unsigned long long>(fnv(y.data(), y.size() * 4)));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

void run(const char *algo, int n, bool lossy = false) {
    SCOPED_TRACE(std::string(algo) + " n=" + std::to_string(n) + (lossy ? " lossy" : ""));
    auto out = ibex::test::run_ranks(n, [&](RankCtx &ctx) { return allreduce_body(ctx, algo, lossy); }, 60);
    ibex::test::expect_all_passed(out);
    for (size_t r = 1; r < out.size(); ++r) EXPECT_EQ(out[r].text, out[0].text) << "rank " << r << " got other bits";
}

TEST(AlgorithmsForced, Ring) {
    for (int n : {3, 4, 5}) run("ring", n);
}
TEST(AlgorithmsForced, Rhd) {
    for (int n : {3, 5, 6}) run("rhd", n);
}
TEST(AlgorithmsForced, Tree) {
    for (int n : {2, 5, 6}) run("tree", n);
}
// 8 ranks declared on a BiGraph of 2 switches per layer, 2 hosts each: rhd with the
// BiGraph placement (every step pairs ranks of the two layers).
TEST(AlgorithmsForced, BiGraph) {
    setenv("IBEX_BIGRAPH_HOSTS_PER_SWITCH", "2", 1);
    run("bigraph", 8);
    unsetenv("IBEX_BIGRAPH_HOSTS_PER_SWITCH");
}

// Forced without a layout it can map, the communicator refuses to start, saying why.
TEST(AlgorithmsForced, BiGraphWithoutAFittingLayoutIsRefused) {
    for (const char *per : {"", "4"}) { // none; 4 ranks of 4 on a switch fill half a layer
        SCOPED_TRACE(std::string("IBEX_BIGRAPH_HOSTS_PER_SWITCH=") + per);
        auto out = ibex::test::run_ranks(
            4,
            [&](RankCtx &ctx) {
                setenv("IBEX_ALGO", "bigraph", 1);
                if (*per) setenv("IBEX_BIGRAPH_HOSTS_PER_SWITCH", per, 1);
                ibex_comm_t *comm = nullptr;
                const ibex_status_t st = ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr);
                RANK_CHECK(ctx, st == IBEX_ERR_INVALID_ARGUMENT, "rank %d: status %s", ctx.rank, ibex_strerror(st));
                RANK_CHECK(ctx, std::strstr(ibex_last_error(), "IBEX_ALGO=bigraph") != nullptr, "rank %d: %s", ctx.rank,
                           ibex_last_error());
                return 0;
            },
            60);
        ibex::test::expect_all_passed(out);
    }
}

TEST(AlgorithmsForced, UnderPacketLoss) {
    for (const char *algo : {"ring", "rhd", "tree", "gdraa"}) run(algo, 3, true);
}

TEST(AlgorithmsForced, Gdraa) {
    for (int n : {2, 3, 5}) run("gdraa", n);
}

// GDRAA's handshakes, counted: each rank announces its recvbuf to each peer when it
// changes, and sends nothing else; ring sends a credit for every slice it receives (above
// the eager size).
int control_body(RankCtx &ctx, const char *algo) {
    ::setenv("IBEX_SHM_DIRECT_MIN", "0", 1);
    ::setenv("IBEX_ALGO", algo, 1);
    const size_t peers = static_cast<size_t>(ctx.nranks - 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
    std::vector<float> x(64 << 10, 1.0f), y(64 << 10), z(64 << 10);
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
    const uint64_t before = comm->exec.control_messages();
    constexpr int kOps = 10;
    for (int i = 0; i < kOps; ++i)
        RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
    const uint64_t same = comm->exec.control_messages() - before;
    RANK_CHECK(ctx, y[0] == static_cast<float>(ctx.nranks), "%s: got %g", algo, static_cast<double>(y[0]));
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), z.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
    const uint64_t changed = comm->exec.control_messages() - before - same;
    RANK_CHECK(ctx, z.back() == static_cast<float>(ctx.nranks), "%s: got %g", algo, static_cast<double>(z.back()));
    if (std::strcmp(algo, "gdraa") == 0) {
        RANK_CHECK(ctx, same == 0, "gdraa sent %llu control messages in %d allreduces on the same buffers",
                   static_cast<unsigned long long>(same), kOps);
        RANK_CHECK(ctx, changed == peers, "gdraa sent %llu control messages for a new recvbuf, not %zu",
                   static_cast<unsigned long long>(changed), peers);
    } else {
        RANK_CHECK(ctx, same >= 2 * peers * kOps, "ring sent only %llu control messages in %d 256 KiB allreduces",
                   static_cast<unsigned long long>(same), kOps);
    }
    ctx.say("%s: %.1f control messages per allreduce\n", algo, static_cast<double>(same) / kOps);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(AlgorithmsForced, GdraaAnnouncesBuffersOnceAndSendsNoCredits) {
    for (int n : {2, 4})
        for (const char *algo : {"gdraa", "ring"}) {
            SCOPED_TRACE(std::string(algo) + " n=" + std::to_string(n));
            const auto out = ibex::test::run_ranks(n, [algo](RankCtx &ctx) { return control_body(ctx, algo); }, 60);
            ibex::test::expect_all_passed(out);
            std::printf("%d ranks, rank 0, %s", n, out[0].text.c_str());
        }
}

} // namespace
