// Large collectives read and write straight in the peers' memory (allreduce/shm_direct.h),
// on forked ranks of one host: every collective, type and op at the threshold and at an
// odd count, in place and out of place, against the reference and with the same bits on
// every rank (rotating roots); one element below the threshold goes another way (the fast boxes); ranks calling different counts are
// told so; a killed rank fails the others; IBEX_SHM_DIRECT_MIN=0 on any rank turns the
// path off for all. The staged collectives (through peers' mapped staging) give the bits
// the process_vm_* ones do, are used up to IBEX_SHM_STAGE_BYTES, and are off for all when
// one rank turns them off.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/matrix/matrix.h"

namespace {

using ibex::test::ms_since;
using ibex::test::init_host_comm;
using ibex::test::RankCtx;
using namespace ibex::test::matrix;

constexpr size_t kMin = 4097;     // IBEX_SHM_DIRECT_MIN's default (4 KiB), above the fast boxes'
constexpr size_t kFastMax = 4096; // IBEX_FASTBOX_MAX's default, per rank

// The smallest count per rank that takes the direct path: the whole buffer at least kMin,
// and, for reduce-scatter and allgather (share = ranks), more per rank than the fast boxes
// take (they are asked first).
size_t first_direct_count(ibex_datatype_t type, size_t share) {
    const size_t e = ibex_datatype_size(type);
    const size_t c = ((kMin + e - 1) / e + share - 1) / share;
    return share > 1 ? std::max(c, kFastMax / e + 1) : c;
}

int matrix_body(RankCtx &ctx) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    RANK_CHECK(ctx, comm->direct.enabled() && comm->direct.min_bytes() == kMin, "direct path off (min %zu)",
               comm->direct.min_bytes());
    RANK_CHECK(ctx, std::strcmp(ibex_comm_allreduce_algo(comm, kMin), "direct") == 0 &&
                        std::strcmp(ibex_comm_allreduce_algo(comm, kMin - 1), "direct") != 0,
               "algorithm names: %s at the threshold, %s below", ibex_comm_allreduce_algo(comm, kMin),
               ibex_comm_allreduce_algo(comm, kMin - 1));
    const size_t n = static_cast<size_t>(ctx.nranks);
    // At the threshold (the whole buffer for reduce-scatter and allgather) and an odd count.
    const auto counts = [n](Coll coll, ibex_datatype_t type) {
        const size_t share = coll == Coll::reduce_scatter || coll == Coll::allgather ? n : 1;
        return std::vector<size_t>{first_direct_count(type, share), size_t(100003) / share};
    };
    const PathTally t = run_path_matrix(ctx, comm, "direct path", counts, [comm] { return comm->direct.taken(); });
    // The collectives went through the staging (all are under its size).
    RANK_CHECK(ctx, t.failures || comm->direct.staged() > 0, "nothing was staged (staging %zu bytes)",
               comm->direct.stage_bytes());
    int id = t.next_id, failures = t.failures;
    const uint64_t hash = t.hash, expect = comm->direct.taken();
    // One element below the threshold: another way (the fast boxes), still right.
    const Combo below{id++, Coll::allreduce, IBEX_U8, IBEX_SUM, kMin - 1, 0};
    std::vector<uint8_t> got;
    if (!failures && !run_combo(ctx, comm, below, false, &got)) ++failures;
    RANK_CHECK(ctx, comm->direct.taken() == expect, "%zu bytes read directly", kMin - 1);
    ctx.say("H %d %016llx", id, static_cast<unsigned long long>(hash));
    if (failures) {
        ibex_comm_abort(comm);
        return 12;
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

class ShmDirectMatrix : public ::testing::TestWithParam<int> {};

TEST_P(ShmDirectMatrix, EveryCollectiveTypeAndOpAtTheThresholdAndAnOddCount) {
    const auto out = ibex::test::run_ranks(GetParam(), matrix_body, 200);
    ibex::test::expect_all_passed(out);
    std::string first;
    for (size_t r = 0; r < out.size(); ++r) {
        const size_t at = out[r].text.find("H ");
        ASSERT_NE(at, std::string::npos) << "rank " << r << " reported no hash";
        const std::string h = out[r].text.substr(at, out[r].text.find('\n', at) - at);
        if (r == 0) first = h;
        EXPECT_EQ(h, first) << "rank " << r << " holds other bits";
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmDirectMatrix, ::testing::Values(2, 3, 4));

TEST(ShmDirect, MismatchedCountsAreNamed) {
    ibex::test::expect_mismatch_named(ibex::test::run_ranks(
        3, [](RankCtx &ctx) { return ibex::test::mismatched_count_body(ctx, 100000, 90000); }, 60));
}

int killed_body(RankCtx &ctx, std::atomic<int> *ready) {
    constexpr int kTimeoutMs = 20000, kVictim = 1;
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm, kTimeoutMs));
    std::vector<float> x(1 << 20, 1.0f), y(x.size());
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
    RANK_CHECK(ctx, comm->direct.taken() == 1, "the warm-up did not read directly");
    ready->fetch_add(1);
    if (ctx.rank == kVictim) ibex::test::die_when_all_ready(ctx, ready, 50);
    const auto t0 = std::chrono::steady_clock::now();
    const ibex_status_t st = ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr);
    const long took = ms_since(t0);
    RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT, "rank %d: allreduce returned %s (%s)", ctx.rank,
               ibex_strerror(st), ibex_last_error());
    ctx.say("rank %d: error after %ld ms: %s", ctx.rank, took, ibex_last_error());
    RANK_CHECK(ctx, took < kTimeoutMs / 2, "rank %d: error only after %ld ms", ctx.rank, took);
    ibex_comm_abort(comm);
    return 0;
}

TEST(ShmDirect, KilledRankFailsTheOthers) { ibex::test::run_with_victim(3, 1, killed_body); }

// The staged collectives against the ones that read and write with process_vm_readv/
// writev, on the same inputs: the same bits (both reduce in rank order), every collective,
// type and op, at the threshold and an odd count, in place and out of place, rotating
// roots; an allreduce above the staging size takes process_vm_readv.
TEST(ShmDirect, StagedAndCrossMemoryAttachGiveTheSameBits) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        3,
        [](RankCtx &ctx) {
            ibex_comm_t *staged = nullptr, *attach = nullptr, *small = nullptr;
            RANK_CHECK_OK(ctx, init_host_comm(ctx, &staged));
            ::setenv("IBEX_SHM_STAGE_BYTES", "0", 1);
            RANK_CHECK_OK(ctx, ibex_comm_split(staged, 0, ctx.rank, &attach));
            ::setenv("IBEX_SHM_STAGE_BYTES", "131072", 1);
            RANK_CHECK_OK(ctx, ibex_comm_split(staged, 0, ctx.rank, &small));
            ::unsetenv("IBEX_SHM_STAGE_BYTES");
            RANK_CHECK(ctx, staged->direct.stage_bytes() >= (1u << 20) && attach->direct.enabled() &&
                                attach->direct.stage_bytes() == 0 && small->direct.stage_bytes() == 131072,
                       "staging %zu, %zu (direct %d), %zu bytes", staged->direct.stage_bytes(),
                       attach->direct.stage_bytes(), attach->direct.enabled(), small->direct.stage_bytes());
            int id = 0, failures = 0;
            const size_t n = static_cast<size_t>(ctx.nranks);
            for (Coll coll : {Coll::allreduce, Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce}) {
                // The whole buffer at the threshold, and an odd count.
                const size_t share = coll == Coll::reduce_scatter || coll == Coll::allgather ? n : 1;
                for (int ty = 0; ty < IBEX_DATATYPE_COUNT && !failures; ++ty) {
                    const auto type = static_cast<ibex_datatype_t>(ty);
                    for (int op = 0; op < (reduces(coll) ? IBEX_REDOP_COUNT : 1) && !failures; ++op) {
                        for (size_t count : {first_direct_count(type, share), size_t(100003) / share}) {
                            for (bool in_place : {false, true}) {
                                const Combo c{id++, coll, type, static_cast<ibex_redop_t>(op), count, id % ctx.nranks};
                                const uint64_t before = staged->direct.staged();
                                std::vector<uint8_t> a, b;
                                if (!run_combo(ctx, staged, c, in_place, &a) ||
                                    !run_combo(ctx, attach, c, in_place, &b)) {
                                    ++failures;
                                    break;
                                }
                                RANK_CHECK(ctx, staged->direct.staged() == before + 1,
                                           "%s %s %s count %zu: staged %llu times", name(coll), ibex_datatype_name(type),
                                           ibex_redop_name(c.op), count,
                                           static_cast<unsigned long long>(staged->direct.staged() - before));
                                RANK_CHECK(ctx, a == b, "%s %s %s count %zu %s: staged and process_vm_readv differ",
                                           name(coll), ibex_datatype_name(type), ibex_redop_name(c.op), count,
                                           in_place ? "in place" : "out of place");
                            }
                        }
                    }
                }
            }
            RANK_CHECK(ctx, !failures, "a collective failed");
            RANK_CHECK(ctx, attach->direct.staged() == 0 && attach->direct.taken() > 0, "attach: %llu staged of %llu",
                       static_cast<unsigned long long>(attach->direct.staged()),
                       static_cast<unsigned long long>(attach->direct.taken()));
            // Above the staging size: process_vm_readv; within it: staged.
            std::vector<float> x(1 << 18, 1.0f), y(x.size());
            RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, small, nullptr));
            RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), 1 << 15, IBEX_F32, IBEX_SUM, small, nullptr));
            RANK_CHECK(ctx, y.front() == 3.0f && y[(1 << 18) - 1] == 3.0f && small->direct.taken() == 2 &&
                                small->direct.staged() == 1,
                       "sums %g %g, %llu taken, %llu staged", static_cast<double>(y.front()),
                       static_cast<double>(y.back()), static_cast<unsigned long long>(small->direct.taken()),
                       static_cast<unsigned long long>(small->direct.staged()));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(small));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(attach));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(staged));
            return 0;
        },
        120));
}

// var=0 on rank 1 alone turns its part off on every rank (IBEX_SHM_DIRECT_MIN: the whole
// direct path; IBEX_SHM_STAGE_BYTES: its staging), and the allreduce still runs by what
// is left.
void expect_off_for_all(const char *var) {
    const bool whole = std::strcmp(var, "IBEX_SHM_DIRECT_MIN") == 0;
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        2,
        [var, whole](RankCtx &ctx) {
            if (ctx.rank == 1) ::setenv(var, "0", 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
            RANK_CHECK(ctx, comm->direct.enabled() != whole && comm->direct.stage_bytes() == 0,
                       "rank %d: direct path %d, staging %zu bytes", ctx.rank, comm->direct.enabled(),
                       comm->direct.stage_bytes());
            std::vector<float> x(1 << 18, 1.0f), y(x.size());
            RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
            RANK_CHECK(ctx, y.back() == 2.0f && comm->direct.taken() == (whole ? 0u : 1u) && comm->direct.staged() == 0,
                       "sum %g, taken %llu, staged %llu", static_cast<double>(y.back()),
                       static_cast<unsigned long long>(comm->direct.taken()),
                       static_cast<unsigned long long>(comm->direct.staged()));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        60));
}

TEST(ShmDirect, OffOnOneRankIsOffForAll) { expect_off_for_all("IBEX_SHM_DIRECT_MIN"); }

TEST(ShmDirect, StagingOffOnOneRankIsOffForAll) { expect_off_for_all("IBEX_SHM_STAGE_BYTES"); }

// Where process_vm_readv is refused (IBEX_SHM_COPY=ring stands in for ptrace scope, another
// user or PID namespace), the staging alone still takes what it can: every collective up
// to IBEX_SHM_STAGE_BYTES; anything larger goes the scheduled way. All of them right.
TEST(ShmDirect, StagingAloneWhereCrossMemoryAttachIsRefused) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        3,
        [](RankCtx &ctx) {
            ::setenv("IBEX_SHM_COPY", "ring", 1);
            ::setenv("IBEX_SHM_STAGE_BYTES", "262144", 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
            RANK_CHECK(ctx, comm->direct.enabled() && !comm->direct.cross_memory_attach() &&
                                comm->direct.stage_bytes() == 262144,
                       "direct %d, process_vm_readv %d, staging %zu bytes", comm->direct.enabled(),
                       comm->direct.cross_memory_attach(), comm->direct.stage_bytes());
            RANK_CHECK(ctx, std::strcmp(ibex_comm_allreduce_algo(comm, 262144), "direct") == 0 &&
                                std::strcmp(ibex_comm_allreduce_algo(comm, 262148), "direct") != 0,
                       "algorithm names: %s at the staging size, %s above", ibex_comm_allreduce_algo(comm, 262144),
                       ibex_comm_allreduce_algo(comm, 262148));
            int id = 0;
            for (Coll coll : {Coll::allreduce, Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce}) {
                // The whole buffer: 192 KiB (staged), then 384 KiB (too large).
                for (size_t whole : {size_t(196608), size_t(393216)}) {
                    const size_t share = coll == Coll::reduce_scatter || coll == Coll::allgather ? 3 : 1;
                    const Combo c{id++, coll, IBEX_F32, IBEX_SUM, whole / 4 / share, id % 3};
                    const uint64_t taken = comm->direct.taken(), staged = comm->direct.staged();
                    std::vector<uint8_t> got;
                    RANK_CHECK(ctx, run_combo(ctx, comm, c, id % 2 == 0, &got), "%s of %zu bytes failed", name(coll),
                               whole);
                    const bool here = whole <= 262144;
                    RANK_CHECK(ctx, comm->direct.taken() == taken + here && comm->direct.staged() == staged + here,
                               "%s of %zu bytes: taken +%llu, staged +%llu", name(coll), whole,
                               static_cast<unsigned long long>(comm->direct.taken() - taken),
                               static_cast<unsigned long long>(comm->direct.staged() - staged));
                }
            }
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        },
        120));
}

// A communicator whose own device is shm (ibex.torch's choice on one host) reaches its
// peers over shm like any other: one shm link, the fast boxes for small collectives and the
// direct path for large ones. With IBEX_SHM=0 it stays on the scheduled algorithms.
TEST(ShmDirect, DeviceShmTakesTheFastPaths) {
    for (const char *shm_env : {"1", "0"}) {
        ibex::test::expect_all_passed(ibex::test::run_ranks(
            3,
            [shm_env](RankCtx &ctx) {
                ::setenv("IBEX_SHM", shm_env, 1);
                const bool on = *shm_env == '1';
                ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
                cfg.device = "shm";
                cfg.timeout_ms = 20000;
                ibex_comm_t *comm = nullptr;
                RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg));
                RANK_CHECK(ctx, comm->exec.links() == 1 &&
                                    std::strcmp(ibex_context_device_name(comm->exec.context(0)), "shm") == 0,
                           "%d links, the first %s", comm->exec.links(), ibex_context_device_name(comm->exec.context(0)));
                const char *small = ibex_comm_allreduce_algo(comm, 8), *large = ibex_comm_allreduce_algo(comm, 1 << 20);
                RANK_CHECK(ctx, (std::strcmp(small, "fastbox") == 0) == on && (std::strcmp(large, "direct") == 0) == on,
                           "IBEX_SHM=%s: %s at 8 B, %s at 1 MiB", shm_env, small, large);
                for (size_t count : {size_t(2), size_t(1) << 18}) {
                    std::vector<float> x(count, float(ctx.rank + 1)), y(count, 0.0f);
                    const uint64_t taken = comm->direct.taken();
                    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), count, IBEX_F32, IBEX_SUM, comm, nullptr));
                    RANK_CHECK(ctx, y.front() == 6.0f && y.back() == 6.0f, "%zu floats: sum %g", count,
                               static_cast<double>(y.back()));
                    const bool direct = on && count * sizeof(float) >= kMin;
                    RANK_CHECK(ctx, comm->direct.taken() == taken + direct, "%zu floats: %llu taken directly", count,
                               static_cast<unsigned long long>(comm->direct.taken() - taken));
                }
                RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
                return 0;
            },
            60));
    }
}

} // namespace
