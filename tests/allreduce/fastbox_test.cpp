// The fast boxes (allreduce/fastbox.h) on forked ranks of one host: every collective x type
// x op at sizes from one element to the limit, against the reference, with the same bits
// on every rank; the boxes' counter shows each of those took the fast path and that one
// element past the limit did not. Thousands of back-to-back collectives (the slots'
// parity reused many times, blocking and queued, mixed with scheduled ones); a rank
// killed while the others wait in a fast collective; the switches that turn them off.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/killed_rank.h"
#include "transport/shm/engine.h"
#include "tests/allreduce/matrix/matrix.h"

namespace {

using ibex::test::ms_since;
using ibex::test::init_host_comm;
using ibex::test::RankCtx;
using namespace ibex::test::matrix;

constexpr size_t kLimit = 4096; // IBEX_FASTBOX_MAX's default

// Element counts from one to the limit (per rank's slot), and one past it.
std::vector<size_t> counts_for(ibex_datatype_t t) {
    const size_t most = kLimit / ibex_datatype_size(t);
    return {1, 3, most / 2 + 1, most};
}

// Every combination at every size up to the limit, out of place and in place; then the
// first size past the limit. Each rank reports "H <id> <hash>" for results all ranks hold.
int matrix_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    RANK_CHECK(ctx, comm->fast.max_bytes() == kLimit, "fast boxes limit %zu, expected %zu", comm->fast.max_bytes(),
               kLimit);
    RANK_CHECK(ctx, std::strcmp(ibex_comm_allreduce_algo(comm, kLimit), "fastbox") == 0 &&
                        std::strcmp(ibex_comm_allreduce_algo(comm, kLimit + 1), "fastbox") != 0,
               "algorithm names: %s at the limit, %s past it", ibex_comm_allreduce_algo(comm, kLimit),
               ibex_comm_allreduce_algo(comm, kLimit + 1));
    const PathTally t = run_path_matrix(
        ctx, comm, "fast boxes", [](Coll, ibex_datatype_t type) { return counts_for(type); },
        [comm] { return comm->fast.taken(); });
    int id = t.next_id, failures = t.failures;
    const uint64_t shared_hash = t.hash, shared = t.shared;
    // One element past the limit goes another way (the direct path, whose announce and
    // closing barrier are two fast-box ops of their own), and is still right.
    const auto own_fast_ops = [comm] { return comm->fast.taken() - 2 * comm->direct.taken(); };
    const uint64_t expect_taken = own_fast_ops();
    for (Coll coll : {Coll::allreduce, Coll::allgather}) {
        const Combo c{id++, coll, IBEX_F32, IBEX_SUM, kLimit / 4 + 1, 0};
        std::vector<uint8_t> oop;
        if (failures == 0 && !run_combo(ctx, comm, c, false, &oop)) ++failures;
        RANK_CHECK(ctx, own_fast_ops() == expect_taken, "%s of %zu bytes took the fast boxes", name(coll),
                   (kLimit / 4 + 1) * 4);
    }
    RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
    RANK_CHECK(ctx, own_fast_ops() == expect_taken + 1, "barrier did not take the fast boxes");
    ctx.say("H %llu %016llx", static_cast<unsigned long long>(shared), static_cast<unsigned long long>(shared_hash));
    if (failures) {
        ibex_comm_abort(comm);
        return 12;
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

// Every rank reported the same hash over the same number of shared results.
void expect_same_hashes(const std::vector<ibex::test::RankOutcome> &out) {
    std::vector<std::string> hashes(out.size());
    std::vector<unsigned long long> counts(out.size(), 0);
    for (size_t r = 0; r < out.size(); ++r) {
        std::istringstream in(out[r].text);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            std::string tag;
            if (ls >> tag >> counts[r] >> hashes[r] && tag == "H") break;
        }
    }
    EXPECT_GT(counts[0], 100u) << "rank 0 reported too few shared results";
    for (size_t r = 1; r < out.size(); ++r) {
        EXPECT_EQ(counts[r], counts[0]) << "rank " << r;
        EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r << " holds other bits";
    }
}

class FastboxMatrix : public ::testing::TestWithParam<int> {};

TEST_P(FastboxMatrix, EveryCollectiveTypeOpAndSizeUpToTheLimit) {
    const auto out = ibex::test::run_ranks(GetParam(), matrix_body, 150);
    ibex::test::expect_all_passed(out);
    expect_same_hashes(out);
}

INSTANTIATE_TEST_SUITE_P(Ranks, FastboxMatrix, ::testing::Values(2, 3, 4),
                         [](const auto &info) { return std::to_string(info.param) + "_ranks"; });

// Thousands of collectives back to back: blocking ones (run by the caller) and bursts of
// queued ones (run by whoever drives the stream), with a scheduled one now and then. Each
// result is checked exactly (integer sums of values that differ per rank, op and element).
int back_to_back_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    const int n = ctx.nranks;
    constexpr int kOps = 3000, kBurst = 7;
    constexpr size_t kMost = kLimit / 8;
    auto value = [](int r, int k, size_t i) { return static_cast<int64_t>((r + 1) * 1000003LL + k * 131LL + i); };
    auto expected = [&](int k, size_t i) {
        int64_t s = 0;
        for (int r = 0; r < n; ++r) s += value(r, k, i);
        return s;
    };
    std::vector<std::vector<int64_t>> in(kBurst), outb(kBurst);
    std::vector<ibex_request_t *> reqs(kBurst, nullptr);
    std::vector<int64_t> big(kMost + 1000), big_out(kMost + 1000);
    uint64_t small = 0;
    const uint64_t before = comm->fast.taken(), direct_before = comm->direct.taken();
    for (int k = 0; k < kOps;) {
        // A burst of queued ones, then as many blocking ones.
        const bool queued = (k / kBurst) % 2 == 0;
        int burst = 0;
        for (; burst < kBurst && k + burst < kOps; ++burst) {
            const int op = k + burst;
            const size_t count = 1 + static_cast<size_t>(op * 7) % kMost;
            in[burst].resize(count);
            outb[burst].assign(count, -1);
            for (size_t i = 0; i < count; ++i) in[burst][i] = value(ctx.rank, op, i);
            RANK_CHECK_OK(ctx, ibex_allreduce(in[burst].data(), outb[burst].data(), count, IBEX_I64, IBEX_SUM, comm,
                                              queued ? &reqs[burst] : nullptr));
            ++small;
        }
        for (int b = 0; b < burst; ++b) {
            if (queued) RANK_CHECK_OK(ctx, ibex_wait(reqs[b]));
            for (size_t i = 0; i < outb[b].size(); ++i)
                RANK_CHECK(ctx, outb[b][i] == expected(k + b, i), "rank %d: op %d element %zu: %lld, expected %lld",
                           ctx.rank, k + b, i, static_cast<long long>(outb[b][i]),
                           static_cast<long long>(expected(k + b, i)));
        }
        k += burst;
        if (k % 500 < kBurst) { // a large one between fast ones
            for (size_t i = 0; i < big.size(); ++i) big[i] = value(ctx.rank, -k, i);
            RANK_CHECK_OK(ctx, ibex_allreduce(big.data(), big_out.data(), big.size(), IBEX_I64, IBEX_SUM, comm, nullptr));
            for (size_t i = 0; i < big.size(); ++i)
                RANK_CHECK(ctx, big_out[i] == expected(-k, i), "rank %d: scheduled allreduce after op %d wrong at %zu",
                           ctx.rank, k, i);
        }
    }
    // The large ones took the direct path, whose announce and barrier are fast-box ops.
    const uint64_t fast = comm->fast.taken() - before - 2 * (comm->direct.taken() - direct_before);
    RANK_CHECK(ctx, fast == small, "rank %d: %llu fast collectives, expected %llu", ctx.rank,
               static_cast<unsigned long long>(fast), static_cast<unsigned long long>(small));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

// A reduce-scatter both paths could take (12 KiB per rank fits the boxes; the whole 24 KiB
// is past the direct path's threshold): rank 0 issues it behind a queued allreduce (the
// stream decides), rank 1 blocking on an idle stream (its caller decides). Both must
// choose the fast boxes; when the stream asked the direct path first, the ranks named
// each other's different calls.
int queued_and_inline_body(RankCtx &ctx) {
    ::setenv("IBEX_FASTBOX_MAX", "16384", 1);
    ::setenv("IBEX_SHM_DIRECT_MIN", "16385", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    const size_t per_rank = 3072; // floats: 12 KiB
    RANK_CHECK(ctx, per_rank * 4 <= comm->fast.max_bytes() && 2 * per_rank * 4 >= comm->direct.min_bytes(),
               "limits %zu and %zu do not overlap here", comm->fast.max_bytes(), comm->direct.min_bytes());
    std::vector<float> big(1 << 18, 1.0f), big_out(big.size()), in(2 * per_rank), out(per_rank);
    for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((ctx.rank + 1) * (i % 7 + round));
        const uint64_t fast = comm->fast.taken(), direct = comm->direct.taken();
        if (ctx.rank == 0) {
            ibex_request_t *a = nullptr, *b = nullptr;
            RANK_CHECK_OK(ctx, ibex_allreduce(big.data(), big_out.data(), big.size(), IBEX_F32, IBEX_SUM, comm, &a));
            RANK_CHECK_OK(ctx, ibex_reduce_scatter(in.data(), out.data(), per_rank, IBEX_F32, IBEX_SUM, comm, &b));
            RANK_CHECK_OK(ctx, ibex_wait(a));
            RANK_CHECK_OK(ctx, ibex_wait(b));
        } else {
            RANK_CHECK_OK(ctx, ibex_allreduce(big.data(), big_out.data(), big.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
            RANK_CHECK_OK(ctx, ibex_reduce_scatter(in.data(), out.data(), per_rank, IBEX_F32, IBEX_SUM, comm, nullptr));
        }
        for (size_t i = 0; i < per_rank; ++i) {
            const size_t at = static_cast<size_t>(ctx.rank) * per_rank + i;
            RANK_CHECK(ctx, out[i] == static_cast<float>(3 * (at % 7 + round)), "round %d element %zu: %g", round, i,
                       static_cast<double>(out[i]));
        }
        // The allreduce went directly (an announce and a barrier through the boxes), the
        // reduce-scatter through the boxes.
        RANK_CHECK(ctx, comm->direct.taken() - direct == 1 && comm->fast.taken() - fast == 3,
                   "round %d: %llu direct, %llu fast-box ops", round,
                   static_cast<unsigned long long>(comm->direct.taken() - direct),
                   static_cast<unsigned long long>(comm->fast.taken() - fast));
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Fastbox, QueuedAndInlineCallsChooseTheSamePath) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, queued_and_inline_body, 60));
}

TEST(Fastbox, ThousandsBackToBackBlockingAndQueued) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, back_to_back_body, 120));
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, back_to_back_body, 120));
}

// Long bursts issued without waiting (more than a thread keeps of finished requests, and
// enough to grow the stream's queue while it wraps), waited last to first, or tested in
// turn until done: every result exact, and each request's status its own.
int long_burst_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    const int n = ctx.nranks;
    constexpr int kBurst = 1500;
    auto value = [](int r, int k, size_t i) { return static_cast<int64_t>((r + 1) * 7919LL + k * 17LL + i); };
    std::vector<std::vector<int64_t>> in(kBurst), out(kBurst);
    std::vector<ibex_request_t *> reqs(kBurst, nullptr);
    for (int round = 0; round < 2; ++round) {
        for (int k = 0; k < kBurst; ++k) {
            const size_t count = 1 + static_cast<size_t>(k % 5);
            in[k].resize(count);
            out[k].assign(count, -1);
            for (size_t i = 0; i < count; ++i) in[k][i] = value(ctx.rank, k + round, i);
            RANK_CHECK_OK(ctx, ibex_allreduce(in[k].data(), out[k].data(), count, IBEX_I64, IBEX_SUM, comm, &reqs[k]));
        }
        if (round == 0) {
            for (int k = kBurst - 1; k >= 0; --k) RANK_CHECK_OK(ctx, ibex_wait(reqs[k]));
        } else {
            // ibex_test on each in turn until all are done (a bounded number of sweeps).
            int left = kBurst;
            for (int sweep = 0; left > 0 && sweep < 1000000; ++sweep)
                for (auto &r : reqs) {
                    if (!r) continue;
                    int done = 0;
                    RANK_CHECK_OK(ctx, ibex_test(r, &done));
                    if (done) {
                        r = nullptr;
                        --left;
                    }
                }
            RANK_CHECK(ctx, left == 0, "rank %d: %d requests never finished", ctx.rank, left);
        }
        for (int k = 0; k < kBurst; ++k)
            for (size_t i = 0; i < out[k].size(); ++i) {
                int64_t want = 0;
                for (int r = 0; r < n; ++r) want += value(r, k + round, i);
                RANK_CHECK(ctx, out[k][i] == want, "rank %d round %d: op %d element %zu: %lld, expected %lld",
                           ctx.rank, round, k, i, static_cast<long long>(out[k][i]), static_cast<long long>(want));
            }
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Fastbox, LongBurstsWaitedLastToFirstOrTestedInTurn) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(2, long_burst_body, 120));
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, long_burst_body, 120));
}

// The victim dies while the others wait in a fast allreduce for its word: they fail well
// within the timeout, and the communicator stays failed.
// queued: the others' last allreduce is a request they wait on (driven by the stream's
// loop), else a blocking call (run by the caller).
int killed_body(RankCtx &ctx, std::atomic<int> *ready, bool queued) {
    constexpr int kTimeoutMs = 20000, kVictim = 1;
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm, kTimeoutMs));
    int64_t x = ctx.rank, y = 0;
    for (int i = 0; i < 10; ++i) RANK_CHECK_OK(ctx, ibex_allreduce(&x, &y, 1, IBEX_I64, IBEX_SUM, comm, nullptr));
    const uint64_t before = comm->fast.taken();
    RANK_CHECK(ctx, before >= 10, "the warm-up did not take the fast boxes");
    ready->fetch_add(1);
    if (ctx.rank == kVictim) ibex::test::die_when_all_ready(ctx, ready, 50);
    const auto t0 = std::chrono::steady_clock::now();
    ibex_request_t *req = nullptr;
    ibex_status_t st = ibex_allreduce(&x, &y, 1, IBEX_I64, IBEX_SUM, comm, queued ? &req : nullptr);
    if (st == IBEX_OK && req) st = ibex_wait(req);
    const long took = ms_since(t0);
    RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT, "rank %d: allreduce returned %s (%s)", ctx.rank,
               ibex_strerror(st), ibex_last_error());
    RANK_CHECK(ctx, comm->fast.taken() == before + 1, "the last allreduce did not take the fast boxes");
    ctx.say("rank %d: error after %ld ms: %s", ctx.rank, took, ibex_last_error());
    RANK_CHECK(ctx, took < kTimeoutMs / 2, "rank %d: error only after %ld ms", ctx.rank, took);
    RANK_CHECK(ctx, ibex_allreduce(&x, &y, 1, IBEX_I64, IBEX_SUM, comm, nullptr) != IBEX_OK,
               "an allreduce on the failed communicator succeeded");
    req = reinterpret_cast<ibex_request_t *>(&x); // must come back NULL
    RANK_CHECK(ctx, ibex_allreduce(&x, &y, 1, IBEX_I64, IBEX_SUM, comm, &req) != IBEX_OK && req == nullptr,
               "a request-taking allreduce on the failed communicator was accepted");
    RANK_CHECK(ctx, std::strstr(ibex_last_error(), "error state") != nullptr, "detail: %s", ibex_last_error());
    RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
    return 0;
}

TEST(Fastbox, RankKilledWhileOthersWaitInAFastCollective) {
    for (bool queued : {false, true})
        ibex::test::run_with_victim(
            3, 1, [&](RankCtx &ctx, std::atomic<int> *ready) { return killed_body(ctx, ready, queued); },
            queued ? "queued: " : "blocking: ");
}

// A rank that never joins: the others time out, naming it.
int silent_body(RankCtx &ctx) {
    constexpr int kTimeoutMs = 800;
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm, kTimeoutMs));
    if (ctx.rank == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3 * kTimeoutMs));
        ibex_comm_abort(comm);
        return 0;
    }
    int32_t x = 1;
    const auto t0 = std::chrono::steady_clock::now();
    const ibex_status_t st = ibex_allreduce(&x, &x, 1, IBEX_I32, IBEX_SUM, comm, nullptr);
    const long took = ms_since(t0);
    const std::string why = ibex_last_error();
    ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), took, why.c_str());
    // The first to time out names rank 2; the other may hear of that failure first.
    RANK_CHECK(ctx, st == IBEX_ERR_TIMEOUT || st == IBEX_ERR_REMOTE, "rank %d: %s", ctx.rank, ibex_strerror(st));
    RANK_CHECK(ctx, st != IBEX_ERR_TIMEOUT || why.find("waiting on rank 2") != std::string::npos,
               "the timeout does not name rank 2: %s", why.c_str());
    RANK_CHECK(ctx, took >= kTimeoutMs - 100 && took < 3 * kTimeoutMs, "took %ld ms", took);
    ibex_comm_abort(comm);
    return 0;
}

TEST(Fastbox, SilentRankTimesOutNamed) {
    const auto out = ibex::test::run_ranks(3, silent_body, 60);
    ibex::test::expect_all_passed(out, true);
    bool named = false;
    for (const auto &o : out) named = named || o.text.find("waiting on rank 2") != std::string::npos;
    EXPECT_TRUE(named) << "no rank named the silent one";
}

// Ranks whose calls differ are named from the description in each slot, on every rank.
TEST(Fastbox, MismatchedCallsAreNamed) {
    ibex::test::expect_mismatch_named(
        ibex::test::run_ranks(3, [](RankCtx &ctx) { return ibex::test::mismatched_count_body(ctx, 8, 5); }, 60));
}

// IBEX_FASTBOX_MAX=0, and an algorithm forced by IBEX_ALGO, keep every collective on the
// scheduled path.
int off_body(RankCtx &ctx, const char *var, const char *value) {
    ::setenv(var, value, 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    RANK_CHECK(ctx, comm->fast.max_bytes() == 0, "%s=%s: fast boxes on", var, value);
    int64_t x = ctx.rank + 1, y = 0;
    for (int i = 0; i < 20; ++i) RANK_CHECK_OK(ctx, ibex_allreduce(&x, &y, 1, IBEX_I64, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, y == ctx.nranks * (ctx.nranks + 1) / 2, "sum %lld", static_cast<long long>(y));
    RANK_CHECK(ctx, comm->fast.taken() == 0, "%s=%s: a collective took the fast boxes", var, value);
    RANK_CHECK(ctx, std::strcmp(ibex_comm_allreduce_algo(comm, 8), "fastbox") != 0, "8 bytes named fastbox");
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Fastbox, OffWithZeroLimitOrAForcedAlgorithm) {
    ibex::test::expect_all_passed(
        ibex::test::run_ranks(2, [](RankCtx &ctx) { return off_body(ctx, "IBEX_FASTBOX_MAX", "0"); }, 60));
    ibex::test::expect_all_passed(
        ibex::test::run_ranks(2, [](RankCtx &ctx) { return off_body(ctx, "IBEX_ALGO", "ring"); }, 60));
}

// The boxes are written through this process's mappings of the peers' boxes: a fast
// collective posts no WRITE on the shm QPs (the provider counts no post of this rank's),
// and still sums right. With IBEX_FASTBOX_MAP=0 (the path of a box that cannot be mapped)
// every op WRITEs to each peer's box, and sums as right. Only this rank's posts count, not
// the copies it makes serving its peers' requests (one served late would count as ours).
int boxes_body(RankCtx &ctx, bool mapped) {
    if (!mapped) ::setenv("IBEX_FASTBOX_MAP", "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    const int link = comm->exec.link_of((ctx.rank + 1) % ctx.nranks);
    RANK_CHECK(ctx, link >= 0, "no QP to the next rank");
    ibex::shm::CopyStats before{}, after{};
    RANK_CHECK(ctx, ibex::shm::copy_stats(comm->exec.context(link), &before), "the link is not shm");
    const uint64_t taken = comm->fast.taken();
    constexpr int kOps = 200;
    for (int i = 0; i < kOps; ++i) {
        std::vector<float> x(64, static_cast<float>(ctx.rank + i)), y(64, 0.0f);
        RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
        const float want = static_cast<float>(ctx.nranks * (ctx.nranks - 1) / 2 + ctx.nranks * i);
        RANK_CHECK(ctx, y[0] == want && y[63] == want, "op %d: %g, not %g", i, static_cast<double>(y[63]),
                   static_cast<double>(want));
    }
    RANK_CHECK(ctx, ibex::shm::copy_stats(comm->exec.context(link), &after), "copy statistics");
    RANK_CHECK(ctx, comm->fast.taken() - taken == kOps, "%llu of %d took the boxes",
               static_cast<unsigned long long>(comm->fast.taken() - taken), kOps);
    const uint64_t posted = (after.locked_posts - before.locked_posts) + (after.lane_ops - before.lane_ops);
    if (mapped)
        RANK_CHECK(ctx, posted == 0, "%llu WRITEs went through the provider for %d fast collectives",
                   static_cast<unsigned long long>(posted), kOps);
    else
        RANK_CHECK(ctx, posted >= uint64_t(kOps) * uint64_t(ctx.nranks - 1),
                   "%llu WRITEs went through the provider for %d fast collectives to %d peers",
                   static_cast<unsigned long long>(posted), kOps, ctx.nranks - 1);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Fastbox, WrittenThroughTheMappingsOfThePeersBoxes) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return boxes_body(ctx, true); }, 60));
}

TEST(Fastbox, WrittenWithWritesWhereNotMapped) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return boxes_body(ctx, false); }, 60));
}

// Ranks that ask for different limits use the smallest.
TEST(Fastbox, RanksAgreeOnTheSmallestLimit) {
    const auto out = ibex::test::run_ranks(2, [](RankCtx &ctx) {
        ::setenv("IBEX_FASTBOX_MAX", ctx.rank == 0 ? "1024" : "2048", 1);
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
        RANK_CHECK(ctx, comm->fast.max_bytes() == 1024, "limit %zu", comm->fast.max_bytes());
        std::vector<float> x(512, 1.0f), y(512, 0.0f);
        RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), 256, IBEX_F32, IBEX_SUM, comm, nullptr));
        RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), 512, IBEX_F32, IBEX_SUM, comm, nullptr));
        RANK_CHECK(ctx, comm->fast.taken() == 1 && y[511] == 2.0f, "taken %llu, y %g",
                   static_cast<unsigned long long>(comm->fast.taken()), static_cast<double>(y[511]));
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    }, 60);
    ibex::test::expect_all_passed(out);
}

} // namespace
