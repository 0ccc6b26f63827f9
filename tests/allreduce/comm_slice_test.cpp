// The slice a communicator cuts long transfers into: longer over the udp port than
// elsewhere, and one for every rank even where ranks were told different ones (their
// schedules must cut transfers alike, or a credit names a length the sender does not send).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

TEST(CommSlice, ADeviceWhoseMessagesCostMoreLengthensTheSlice) {
    using ibex::coll::comm_slice_bytes;
    EXPECT_EQ(comm_slice_bytes(0), size_t(128) << 10) << "no device said";
    EXPECT_EQ(comm_slice_bytes(16 << 10), size_t(128) << 10) << "shm";
    EXPECT_EQ(comm_slice_bytes(64 << 10), size_t(128) << 10) << "memif, an RNIC";
    EXPECT_EQ(comm_slice_bytes(512 << 10), size_t(512) << 10) << "the udp port with GSO";
    EXPECT_EQ(comm_slice_bytes(300000), size_t(299008)) << "whole pages";
    EXPECT_EQ(comm_slice_bytes(uint64_t(1) << 40), size_t(4) << 20) << "capped";
}

TEST(CommSlice, StagingStaysNearAMebibytePerPeer) {
    EXPECT_EQ(ibex::coll::comm_staging_slots(size_t(128) << 10), 8);
    EXPECT_EQ(ibex::coll::comm_staging_slots(size_t(512) << 10), 2);
    EXPECT_EQ(ibex::coll::comm_staging_slots(size_t(256) << 10), 4);
    // Two at least (one landing while the other is reduced), eight at most.
    EXPECT_EQ(ibex::coll::comm_staging_slots(size_t(4) << 20), 2);
    EXPECT_EQ(ibex::coll::comm_staging_slots(4096), 8);
}

// slices[r]: rank r's IBEX_COMM_SLICE ("" for none). Every rank must end with `want`, and
// an allreduce long enough to take several slices of it (odd, so the last is short) must
// give every rank the exact sums.
int agreeing_body(RankCtx &ctx, const std::vector<std::string> &slices, size_t want, bool over_shm = false) {
    ::setenv("IBEX_SHM", over_shm ? "1" : "0", 1); // else the ranks reach each other over the udp port
    ::setenv("IBEX_FASTBOX_MAX", "0", 1);
    if (slices[static_cast<size_t>(ctx.rank)].empty())
        ::unsetenv("IBEX_COMM_SLICE");
    else
        ::setenv("IBEX_COMM_SLICE", slices[static_cast<size_t>(ctx.rank)].c_str(), 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
    RANK_CHECK(ctx, comm->opt.exec.slice_bytes == want, "rank %d slices by %zu bytes, expected %zu", ctx.rank,
               comm->opt.exec.slice_bytes, want);
    RANK_CHECK(ctx, comm->exec.params().slots == ibex::coll::comm_staging_slots(want),
               "rank %d has %d staging slots per peer for slices of %zu bytes", ctx.rank, comm->exec.params().slots, want);
    const size_t count = 3 * want / sizeof(int32_t) + 7;
    std::vector<int32_t> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(i % 1000) + ctx.rank;
    RANK_CHECK_OK(ctx, ibex_allreduce(v.data(), v.data(), count, IBEX_I32, IBEX_SUM, comm, nullptr));
    const int n = ctx.nranks;
    for (size_t i = 0; i < count; ++i) {
        const int32_t expect = n * static_cast<int32_t>(i % 1000) + n * (n - 1) / 2;
        RANK_CHECK(ctx, v[i] == expect, "rank %d: element %zu is %d, want %d", ctx.rank, i, v[i], expect);
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(CommSlice, OverTheUdpPortTheDefaultIsHalfAMebibyte) {
    const std::vector<std::string> none{"", ""};
    ibex::test::expect_all_passed(
        ibex::test::run_ranks(2, [&](RankCtx &ctx) { return agreeing_body(ctx, none, size_t(512) << 10); }, 60));
}

TEST(CommSlice, PeersAllOnShmKeepTheShortSliceWhateverTheDevice) {
    // The udp port is the communicator's device but carries none of its traffic.
    const std::vector<std::string> none{"", ""};
    ibex::test::expect_all_passed(ibex::test::run_ranks(
        2, [&](RankCtx &ctx) { return agreeing_body(ctx, none, size_t(128) << 10, true); }, 60));
}

TEST(CommSlice, RanksToldDifferentSlicesAllTakeTheLargest) {
    // One rank set, the other by default; then both set, differently, with three ranks.
    const std::vector<std::string> one{"65536", ""};
    ibex::test::expect_all_passed(
        ibex::test::run_ranks(2, [&](RankCtx &ctx) { return agreeing_body(ctx, one, size_t(512) << 10); }, 60));
    const std::vector<std::string> three{"65536", "1048576", "131072"};
    ibex::test::expect_all_passed(
        ibex::test::run_ranks(3, [&](RankCtx &ctx) { return agreeing_body(ctx, three, size_t(1) << 20); }, 60));
}

} // namespace
