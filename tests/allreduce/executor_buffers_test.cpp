// The executor's own buffers that peers write into (staging slots for slices reduced on
// arrival, eager rings) come from ibex_mem_alloc, so over the shm device a slice, a WRITE
// with immediate, is copied by its sender straight into the peer's mapping (counted as
// `map` by the sender's shm context), not pulled by the peer with process_vm_readv.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/ranks.h"
#include "transport/shm/engine.h"

namespace {

using ibex::test::init_host_comm;
using ibex::test::RankCtx;

int body(RankCtx &ctx) {
    // The fast boxes and the direct path off: every collective runs a schedule.
    ::setenv("IBEX_FASTBOX_MAX", "0", 1);
    ::setenv("IBEX_SHM_DIRECT_MIN", "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    const int peer = 1 - ctx.rank;
    const int link = comm->exec.link_of(peer);
    RANK_CHECK(ctx, link >= 0, "no QP to rank %d", peer);
    // A region's fd reaches the peer a moment after it is offered (sooner or later, see
    // ShmRkeyPtr.MoreAllocationsThanThePeersSocketQueuesAreAllMapped); until then its
    // slices go another way. A few collectives first let every fd arrive.
    std::vector<float> warm(256 << 10, 1.0f);
    for (int i = 0; i < 20; ++i)
        RANK_CHECK_OK(ctx, ibex_allreduce(warm.data(), warm.data(), i % 2 ? warm.size() : 256, IBEX_F32, IBEX_SUM,
                                          comm, nullptr));
    ibex::shm::CopyStats before{}, after{};
    RANK_CHECK(ctx, ibex::shm::copy_stats(comm->exec.context(link), &before), "the peer's link is not shm");
    // 1 KiB: eager slices. 1 MiB: 128 KiB slices, reduced on arrival.
    for (size_t count : {size_t(256), size_t(256) << 10}) {
        std::vector<float> x(count, static_cast<float>(ctx.rank + 1)), y(count, 0.0f);
        RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), count, IBEX_F32, IBEX_SUM, comm, nullptr));
        for (float v : y) RANK_CHECK(ctx, v == 3.0f, "count %zu: got %g", count, static_cast<double>(v));
        RANK_CHECK(ctx, ibex::shm::copy_stats(comm->exec.context(link), &after), "copy statistics");
        const uint64_t mapped = after.map_bytes - before.map_bytes, attached = after.cma_bytes - before.cma_bytes;
        // Checked by the parent over both ranks (check_counts): who copies depends on
        // timing, what memory the bytes go through does not.
        ctx.say("count %zu: %llu bytes mapped, %llu attached, %llu through the ring\n", count,
                static_cast<unsigned long long>(mapped), static_cast<unsigned long long>(attached),
                static_cast<unsigned long long>(after.ring_bytes - before.ring_bytes));
        before = after;
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

// Each rank's half of an op goes into the peer's ring (the small op) or staging slots (the
// large op's reduce-scatter half), ibex_mem_alloc memory: copied by its sender into its
// mapping, or, when a request of the sender's QP that was not placed is still in flight
// (RC order), sent as a request that the target serves out of its own mapping of the
// sender's allocation. Either way `map`, counted by whichever context copied, so the
// counts are summed over both ranks. The large op's allgather half lands in the peer's
// receive buffer, ordinary memory, which the peer pulls with process_vm_readv. Eager
// slices must mostly not go that way: a few do on a loaded host (an allocation whose fd is
// still on its way).
void check_counts(const std::vector<ibex::test::RankOutcome> &out) {
    for (size_t count : {size_t(256), size_t(256) << 10}) {
        unsigned long long mapped = 0, attached = 0;
        for (const auto &o : out) {
            const std::string key = "count " + std::to_string(count) + ": ";
            const size_t at = o.text.find(key);
            ASSERT_NE(at, std::string::npos) << o.text;
            unsigned long long m = 0, a = 0;
            ASSERT_EQ(std::sscanf(o.text.c_str() + at + key.size(), "%llu bytes mapped, %llu attached", &m, &a), 2) << o.text;
            mapped += m;
            attached += a;
        }
        const unsigned long long halves = out.size() * count * sizeof(float) / 2;
        if (count == 256) {
            EXPECT_GE(mapped + attached, halves) << "count 256: bytes unaccounted for";
            EXPECT_LT(attached, halves / 2) << "eager slices went by process_vm_readv";
        } else {
            EXPECT_GE(mapped, halves) << "count " << count << ": too little went into mapped memory";
        }
    }
}

TEST(ExecutorBuffers, PeersWriteSlotsAndRingsThroughTheirMappings) {
    const auto out = ibex::test::run_ranks(2, body);
    ibex::test::expect_all_passed(out);
    check_counts(out);
}

// The shm device hands each allocation to every same-host peer. A rank's slots, rings and
// send buffers for all its channels are one allocation each, so a rank maps three
// allocations of each peer here (its eager rings, its eager send buffers, which a peer
// copies out of when it serves a slice as a request, and its staging slots; the fast boxes
// and the staged path, which add one each, are off), not one per channel of that peer's
// as well, which grew as the square of the ranks (14-19 mapped of 25+ offered at 6 ranks,
// against 6-12 now).
constexpr int kSharedRanks = 6;
constexpr size_t kRegionsPerRank = 3;

int count_body(RankCtx &ctx) {
    // Schedules only (the fast boxes and the direct path off), so that every channel's
    // slice of the slots and rings is written.
    ::setenv("IBEX_FASTBOX_MAX", "0", 1);
    ::setenv("IBEX_SHM_DIRECT_MIN", "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_host_comm(ctx, &comm));
    const int link = comm->exec.link_of((ctx.rank + 1) % ctx.nranks);
    RANK_CHECK(ctx, link >= 0, "no QP to the next rank");
    for (size_t count : {size_t(1) << 8, size_t(1) << 20}) {
        std::vector<float> x(count, static_cast<float>(ctx.rank + 1)), y(count, 0.0f);
        const float want = static_cast<float>(ctx.nranks * (ctx.nranks + 1) / 2);
        RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), count, IBEX_F32, IBEX_SUM, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
            RANK_CHECK(ctx, y[i] == want, "count %zu: element %zu is %g, not %g", count, i, static_cast<double>(y[i]),
                       static_cast<double>(want));
    }
    // An offer that found this rank's socket queue full is made again from its sender's
    // progress pass: a few barriers let the late ones in.
    size_t mapped = 0;
    for (int round = 0; round < 8; ++round) {
        RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
        RANK_CHECK(ctx, ibex::shm::mapped_peer_allocs(comm->exec.context(link), &mapped), "the link is not shm");
    }
    const size_t peers = static_cast<size_t>(ctx.nranks - 1);
    ctx.say("%zu peer allocations mapped (%zu peers)", mapped, peers);
    RANK_CHECK(ctx, mapped >= peers, "only %zu peer allocations mapped for %zu peers", mapped, peers);
    RANK_CHECK(ctx, mapped <= kRegionsPerRank * peers, "%zu peer allocations mapped for %zu peers (at most %zu each)",
               mapped, peers, kRegionsPerRank);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(ExecutorBuffers, EachPeerSharesAFewAllocationsWhateverTheRankCount) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(kSharedRanks, count_body, 120));
}

} // namespace
