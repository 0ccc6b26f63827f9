// ibex_send, ibex_recv and ibex_p2p_batch on real ranks: a buffer passed down a pipeline
// of ranks, an exchange between every rank and the one two places on (pairs no collective
// connected get their QP then, with only the two ranks taking part), sends matched to
// receives in issue order, lengths that disagree and a killed peer as errors, and the
// argument checks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/one_rank.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

ibex_p2p_op_t send_op(int peer, const void *buf, size_t count, ibex_datatype_t type) {
    return {IBEX_P2P_SEND, peer, const_cast<void *>(buf), count, type};
}
ibex_p2p_op_t recv_op(int peer, void *buf, size_t count, ibex_datatype_t type) {
    return {IBEX_P2P_RECV, peer, buf, count, type};
}

// A rank's communicator on udp:lo, its peers of this host over shm QPs or over the udp port.
ibex_status_t open_comm(RankCtx &ctx, bool over_shm, ibex_comm_t **comm) {
    ::setenv("IBEX_SHM", over_shm ? "1" : "0", 1);
    return ibex::test::init_host_comm(ctx, comm);
}

// Element i of what rank r sends to rank p: distinct for every (r, p, i).
int64_t value(int r, int p, size_t i) { return static_cast<int64_t>(r) * 1000003 + p * 7919 + static_cast<int64_t>(i); }

// Rank 0 fills a buffer, every rank after it receives it from the rank before, adds one to
// every element and sends it on (blocking calls: each rank's receive waits for the send).
int pipeline(RankCtx &ctx, ibex_comm_t *comm, size_t count) {
    const int r = ctx.rank, n = ctx.nranks;
    std::vector<float> buf(count + 1, -7.0f);
    if (r == 0)
        for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(i % 1024) * 0.5f;
    else
        RANK_CHECK_OK(ctx, ibex_recv(buf.data(), count, IBEX_F32, r - 1, comm, nullptr));
    for (size_t i = 0; i < count; ++i)
        RANK_CHECK(ctx, buf[i] == static_cast<float>(i % 1024) * 0.5f + static_cast<float>(r),
                   "rank %d, count %zu: element %zu is %g", r, count, i, buf[i]);
    RANK_CHECK(ctx, buf[count] == -7.0f, "rank %d: written past the end", r);
    for (size_t i = 0; i < count; ++i) buf[i] += 1.0f;
    if (r + 1 < n) RANK_CHECK_OK(ctx, ibex_send(buf.data(), count, IBEX_F32, r + 1, comm, nullptr));
    return 0;
}

int pipeline_and_far_pairs(RankCtx &ctx, bool over_shm) {
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, open_comm(ctx, over_shm, &comm));
    const int r = ctx.rank, n = ctx.nranks, to = (r + 2) % n, from = (r - 2 + n) % n;
    const bool had_to = comm->exec.connected_to(to), had_from = comm->exec.connected_to(from);
    // One element, a few, 12 KiB (past the eager limit: eager-sized slices), many slices.
    for (size_t count : {size_t(1), size_t(7), size_t(3000), size_t(300007)})
        if (int rc = pipeline(ctx, comm, count)) return rc;
    // One batch: 2 MiB to the rank two places on (and a small message after it), the same
    // from the rank two places back, and a copy to this rank itself.
    const size_t big = 262144, small = 13;
    std::vector<int64_t> out(big), in(big + 1, -1), out_small(small), in_small(small, -1), mine(99), back(99, -1);
    for (size_t i = 0; i < big; ++i) out[i] = value(r, to, i);
    for (size_t i = 0; i < small; ++i) out_small[i] = -value(r, to, i);
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(r, r, i);
    const ibex_p2p_op_t ops[] = {send_op(to, out.data(), big, IBEX_I64),
                                 recv_op(from, in.data(), big, IBEX_I64),
                                 send_op(r, mine.data(), mine.size(), IBEX_I64),
                                 send_op(to, out_small.data(), small, IBEX_I64),
                                 recv_op(r, back.data(), back.size(), IBEX_I64),
                                 recv_op(from, in_small.data(), small, IBEX_I64)};
    RANK_CHECK_OK(ctx, ibex_p2p_batch(ops, std::size(ops), comm, nullptr));
    for (size_t i = 0; i < big; ++i)
        RANK_CHECK(ctx, in[i] == value(from, r, i), "rank %d: element %zu from rank %d is %lld", r, i, from,
                   static_cast<long long>(in[i]));
    RANK_CHECK(ctx, in[big] == -1, "rank %d: written past the receive", r);
    for (size_t i = 0; i < small; ++i)
        RANK_CHECK(ctx, in_small[i] == -value(from, r, i), "rank %d: small message element %zu", r, i);
    RANK_CHECK(ctx, back == mine, "rank %d: the copy to itself differs", r);
    RANK_CHECK(ctx, comm->exec.connected_to(to) && comm->exec.connected_to(from), "rank %d: no QP to %d or %d", r, to,
               from);
    ctx.say("rank %d: QP to rank %d %s, from rank %d %s", r, to, had_to ? "from the start" : "connected for the batch",
            from, had_from ? "from the start" : "connected for the batch");
    // The collectives still agree, over old channels and new.
    std::vector<double> x(100003, r + 1.0);
    RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), x.data(), x.size(), IBEX_F64, IBEX_SUM, comm, nullptr));
    const double want = n * (n + 1) / 2.0;
    RANK_CHECK(ctx, x[0] == want && x.back() == want, "rank %d: allreduce after the batch gave %g", r, x[0]);
    // And alltoall connects whatever pairs are still apart.
    std::vector<int32_t> a(static_cast<size_t>(n) * 5, r), b(a.size(), -1);
    RANK_CHECK_OK(ctx, ibex_alltoall(a.data(), b.data(), 5, IBEX_I32, comm, nullptr));
    for (int q = 0; q < n; ++q) RANK_CHECK(ctx, b[static_cast<size_t>(q) * 5] == q, "rank %d: alltoall block %d", r, q);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(P2p, APipelineAndFarPairsOverTheUdpPort) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(6, [](RankCtx &ctx) { return pipeline_and_far_pairs(ctx, false); }),
                                  true);
}

TEST(P2p, APipelineAndFarPairsOverShm) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(5, [](RankCtx &ctx) { return pipeline_and_far_pairs(ctx, true); }),
                                  true);
}

// The first pair of ranks with no QP between them (agreed through an allgather of every
// rank's QPs) exchanges 1 MiB each way while every other rank already waits in a barrier
// (rank 0, whose bootstrap connection relays the pair's addresses, among them unless it is
// in the pair): the two connect alone, then join the barrier.
// (Over the udp port: ranks of one host over shm hold a QP to each other from creation.)
TEST(P2p, APairNoCollectiveConnectedConnectsAlone) {
    const auto out = ibex::test::run_ranks(6, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, open_comm(ctx, false, &comm));
        const int r = ctx.rank, n = ctx.nranks;
        uint64_t mine = 0;
        for (int p = 0; p < n; ++p)
            if (comm->exec.connected_to(p)) mine |= uint64_t(1) << p;
        std::vector<uint64_t> all(static_cast<size_t>(n));
        RANK_CHECK_OK(ctx, ibex_allgather(&mine, all.data(), 1, IBEX_I64, comm, nullptr));
        int a = -1, b = -1;
        for (int x = 1; x < n && a < 0; ++x) // rank 0 stays out when it can: it relays
            for (int y = x + 1; y < n && a < 0; ++y)
                if (!(all[static_cast<size_t>(x)] >> y & 1)) a = x, b = y;
        RANK_CHECK(ctx, a >= 0, "rank %d: every pair of 6 ranks is connected at creation: nothing to test", r);
        if (r == a || r == b) {
            const int peer = r == a ? b : a;
            const size_t count = 1 << 18;
            std::vector<float> out_buf(count, static_cast<float>(r)), in_buf(count, -1.0f);
            const ibex_p2p_op_t ops[] = {recv_op(peer, in_buf.data(), count, IBEX_F32),
                                         send_op(peer, out_buf.data(), count, IBEX_F32)};
            RANK_CHECK_OK(ctx, ibex_p2p_batch(ops, 2, comm, nullptr));
            RANK_CHECK(ctx, in_buf[0] == static_cast<float>(peer) && in_buf[count - 1] == static_cast<float>(peer),
                       "rank %d: got %g from rank %d", r, in_buf[0], peer);
            RANK_CHECK(ctx, comm->exec.connected_to(peer), "rank %d: no QP to rank %d after the batch", r, peer);
            ctx.say("rank %d: connected to rank %d alone, while the others waited in a barrier", r, peer);
        }
        RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
        for (int p = 0; p < n; ++p)
            RANK_CHECK(ctx, (r == a && p == b) || (r == b && p == a) || comm->exec.connected_to(p) == (mine >> p & 1),
                       "rank %d: its QP to rank %d changed, though it took no part", r, p);
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out, true);
}

// One batch per rank with a message to every other rank and one from each: every rank
// connects each pair it lacks, one after the other in ascending order of the peer, and no
// two ranks wait on each other in opposite orders. An alltoall afterwards finds nothing
// left to connect.
TEST(P2p, EveryRankToEveryOtherInOneBatch) {
    const auto out = ibex::test::run_ranks(6, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, open_comm(ctx, false, &comm));
        const int r = ctx.rank, n = ctx.nranks;
        const size_t count = 1000;
        int lacked = 0;
        std::vector<std::vector<int64_t>> outs, ins;
        std::vector<ibex_p2p_op_t> ops;
        for (int q = 0; q < n; ++q) {
            if (q == r) continue;
            lacked += !comm->exec.connected_to(q);
            outs.emplace_back(count);
            for (size_t i = 0; i < count; ++i) outs.back()[i] = value(r, q, i);
            ins.emplace_back(count, -1);
        }
        for (int q = 0, k = 0; q < n; ++q)
            if (q != r) {
                ops.push_back(send_op(q, outs[static_cast<size_t>(k)].data(), count, IBEX_I64));
                ops.push_back(recv_op(q, ins[static_cast<size_t>(k++)].data(), count, IBEX_I64));
            }
        RANK_CHECK_OK(ctx, ibex_p2p_batch(ops.data(), ops.size(), comm, nullptr));
        for (int q = 0, k = 0; q < n; ++q) {
            if (q == r) continue;
            const std::vector<int64_t> &got = ins[static_cast<size_t>(k++)];
            for (size_t i = 0; i < count; ++i)
                RANK_CHECK(ctx, got[i] == value(q, r, i), "rank %d: element %zu from rank %d is %lld", r, i, q,
                           static_cast<long long>(got[i]));
            RANK_CHECK(ctx, comm->exec.connected_to(q), "rank %d: no QP to rank %d after the batch", r, q);
        }
        ctx.say("rank %d: %d pairs connected for the batch", r, lacked);
        std::vector<int32_t> a(static_cast<size_t>(n) * 3, r), b(a.size(), -1);
        const size_t channels = comm->exec.channels();
        RANK_CHECK_OK(ctx, ibex_alltoall(a.data(), b.data(), 3, IBEX_I32, comm, nullptr));
        for (int q = 0; q < n; ++q) RANK_CHECK(ctx, b[static_cast<size_t>(q) * 3] == q, "rank %d: alltoall block %d", r, q);
        RANK_CHECK(ctx, comm->exec.channels() == channels, "rank %d: alltoall added channels", r);
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out, true);
}

// Sends issued without waiting are received in the order issued, whatever the sizes (an
// eager one, one of many slices, a byte or three) and whatever order the requests are
// waited in; an exchange of 8 MiB each way needs both ends in one batch; a collective
// queued behind a send waits for it.
TEST(P2p, SendsMatchReceivesInIssueOrder) {
    const auto out = ibex::test::run_ranks(2, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, open_comm(ctx, false, &comm));
        const int r = ctx.rank, peer = 1 - r;
        const size_t sizes[] = {1000, 1310721, 3};
        std::vector<std::vector<uint8_t>> bufs;
        for (size_t k = 0; k < std::size(sizes); ++k) {
            bufs.emplace_back(sizes[k] + 1, uint8_t(0xEE));
            if (r == 0)
                for (size_t i = 0; i < sizes[k]; ++i) bufs[k][i] = static_cast<uint8_t>(i * 31 + k * 7);
        }
        ibex_request_t *req[3] = {};
        for (size_t k = 0; k < 3; ++k)
            RANK_CHECK_OK(ctx, r == 0 ? ibex_send(bufs[k].data(), sizes[k], IBEX_U8, peer, comm, &req[k])
                                      : ibex_recv(bufs[k].data(), sizes[k], IBEX_U8, peer, comm, &req[k]));
        for (int k = 2; k >= 0; --k) RANK_CHECK_OK(ctx, ibex_wait(req[k]));
        for (size_t k = 0; k < 3; ++k) {
            for (size_t i = 0; i < sizes[k]; ++i)
                RANK_CHECK(ctx, bufs[k][i] == static_cast<uint8_t>(i * 31 + k * 7), "rank %d: message %zu, byte %zu",
                           r, k, i);
            RANK_CHECK(ctx, bufs[k][sizes[k]] == 0xEE, "rank %d: message %zu written past its end", r, k);
        }
        // Both ways at once, each far larger than the credits a rank gives ahead.
        const size_t count = 2 << 20;
        std::vector<float> mine(count, static_cast<float>(r + 1)), theirs(count, 0.0f);
        const ibex_p2p_op_t ops[] = {send_op(peer, mine.data(), count, IBEX_F32),
                                     recv_op(peer, theirs.data(), count, IBEX_F32)};
        RANK_CHECK_OK(ctx, ibex_p2p_batch(ops, 2, comm, nullptr));
        RANK_CHECK(ctx, theirs[0] == static_cast<float>(peer + 1) && theirs[count - 1] == static_cast<float>(peer + 1),
                   "rank %d: exchange gave %g", r, theirs[0]);
        // Queued: a send, then an allreduce of what it sent on the sender and of what was
        // received on the receiver, which must wait for the receive to land.
        std::vector<float> v(65537, r == 0 ? 3.0f : 0.0f);
        ibex_request_t *p = nullptr, *a = nullptr;
        RANK_CHECK_OK(ctx, r == 0 ? ibex_send(v.data(), v.size(), IBEX_F32, 1, comm, &p)
                                  : ibex_recv(v.data(), v.size(), IBEX_F32, 0, comm, &p));
        RANK_CHECK_OK(ctx, ibex_allreduce(v.data(), v.data(), v.size(), IBEX_F32, IBEX_SUM, comm, &a));
        RANK_CHECK_OK(ctx, ibex_wait(a));
        RANK_CHECK_OK(ctx, ibex_wait(p));
        RANK_CHECK(ctx, v[0] == 6.0f && v.back() == 6.0f, "rank %d: allreduce behind the send gave %g", r, v[0]);
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

// Rank 0 sends fewer bytes than rank 1 receives (in one slice, in a few eager-sized ones,
// and in many): rank 1 fails,
// and rank 0 too, at the latest at its next call; neither hangs, and nothing lands past
// the receive buffer.
TEST(P2p, LengthsThatDisagreeFailBothRanks) {
    for (size_t count : {size_t(1000), size_t(5000), size_t(600000)}) {
        SCOPED_TRACE(std::to_string(count) + " floats received");
        const auto out = ibex::test::run_ranks(2, [count](RankCtx &ctx) {
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, 5000));
            std::vector<float> buf(count + 100, -1.0f);
            const auto t0 = std::chrono::steady_clock::now();
            ibex_status_t st = ctx.rank == 0 ? ibex_send(buf.data(), count - 10, IBEX_F32, 1, comm, nullptr)
                                             : ibex_recv(buf.data(), count, IBEX_F32, 0, comm, nullptr);
            RANK_CHECK(ctx, st != IBEX_OK || ctx.rank == 0, "rank 1: a short message went unnoticed");
            if (st == IBEX_OK) st = ibex_barrier(comm, nullptr);
            ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), ibex::test::ms_since(t0),
                    ibex_last_error());
            RANK_CHECK(ctx, st != IBEX_OK, "rank %d: lengths that disagree went unnoticed", ctx.rank);
            // The rank that found it says what differs; the other may hear it from that rank, or
            // see its QP flushed first.
            RANK_CHECK(ctx,
                       st != IBEX_ERR_INVALID_ARGUMENT ||
                           std::string(ibex_last_error()).find("a send and its receive differ in length") != std::string::npos,
                       "rank %d: the error does not say what differs", ctx.rank);
            RANK_CHECK(ctx, ibex::test::ms_since(t0) < 4500, "rank %d: error only after %ld ms", ctx.rank,
                       ibex::test::ms_since(t0));
            for (size_t i = count; i < buf.size(); ++i)
                RANK_CHECK(ctx, buf[i] == -1.0f, "rank %d: element %zu past the buffer was written", ctx.rank, i);
            RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
            return 0;
        });
        ibex::test::expect_all_passed(out, true);
    }
}

// Rank 1 dies while rank 0 waits for its send: an error on rank 0 well inside the timeout.
TEST(P2p, APeerKilledBeforeItsSendFailsTheReceiver) {
    ibex::test::run_with_victim(2, 1, [](RankCtx &ctx, std::atomic<int> *ready) {
        constexpr int kTimeoutMs = 20000;
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, kTimeoutMs));
        std::vector<float> buf(1 << 20, 1.0f);
        RANK_CHECK_OK(ctx, ibex_allreduce(buf.data(), buf.data(), 64, IBEX_F32, IBEX_SUM, comm, nullptr));
        ready->fetch_add(1);
        if (ctx.rank == 1) ibex::test::die_when_all_ready(ctx, ready, 50);
        const auto t0 = std::chrono::steady_clock::now();
        const ibex_status_t st = ibex_recv(buf.data(), buf.size(), IBEX_F32, 1, comm, nullptr);
        ctx.say("rank 0: %s after %ld ms: %s", ibex_strerror(st), ibex::test::ms_since(t0), ibex_last_error());
        RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT, "rank 0: receive from a dead rank returned %s",
                   ibex_strerror(st));
        RANK_CHECK(ctx, ibex::test::ms_since(t0) < kTimeoutMs / 2, "rank 0: error only after %ld ms",
                   ibex::test::ms_since(t0));
        RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
        return 0;
    });
}

class P2pOneRank : public ibex::test::OneRankComm {};

TEST_F(P2pOneRank, CopiesToItselfInABatchAndRefusesBadArguments) {
    std::vector<int32_t> a(100), b(100, -1), c(10, -1);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i * 3);
    // Sends to itself take the batch's receives from itself in order; zero counts move nothing.
    const ibex_p2p_op_t ok[] = {recv_op(0, b.data(), 100, IBEX_I32), send_op(0, a.data(), 100, IBEX_I32),
                                send_op(0, nullptr, 0, IBEX_F64), send_op(0, a.data() + 90, 10, IBEX_I32),
                                recv_op(0, c.data(), 10, IBEX_I32)};
    ASSERT_EQ(ibex_p2p_batch(ok, std::size(ok), comm, nullptr), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(b, a);
    EXPECT_EQ(c[0], 270);
    EXPECT_EQ(ibex_p2p_batch(nullptr, 0, comm, nullptr), IBEX_OK) << "an empty batch";
    ibex_request_t *req = nullptr;
    ASSERT_EQ(ibex_p2p_batch(ok, 0, comm, &req), IBEX_OK);
    ASSERT_NE(req, nullptr);
    EXPECT_EQ(ibex_wait(req), IBEX_OK);

    const auto refused = [&](std::vector<ibex_p2p_op_t> ops, ibex_status_t want, const char *says) {
        EXPECT_EQ(ibex_p2p_batch(ops.data(), ops.size(), comm, nullptr), want) << says;
        EXPECT_NE(std::string(ibex_last_error()).find(says), std::string::npos) << ibex_last_error();
    };
    refused({send_op(1, a.data(), 4, IBEX_I32)}, IBEX_ERR_INVALID_ARGUMENT, "op 0: peer 1 not in 0..0");
    refused({send_op(0, a.data(), 4, IBEX_I32), recv_op(-1, b.data(), 4, IBEX_I32)}, IBEX_ERR_INVALID_ARGUMENT,
            "op 1: peer -1");
    refused({send_op(0, nullptr, 4, IBEX_I32)}, IBEX_ERR_INVALID_ARGUMENT, "NULL buffer for 4 elements");
    refused({send_op(0, a.data(), 4, static_cast<ibex_datatype_t>(77))}, IBEX_ERR_INVALID_ARGUMENT,
            "unknown datatype 77");
    refused({{static_cast<ibex_p2p_kind_t>(5), 0, a.data(), 4, IBEX_I32}}, IBEX_ERR_INVALID_ARGUMENT, "unknown kind 5");
    refused({send_op(0, a.data(), 4, IBEX_I32), recv_op(0, b.data(), 5, IBEX_I32)}, IBEX_ERR_INVALID_ARGUMENT,
            "do not pair");
    refused({send_op(0, a.data(), 4, IBEX_I32), send_op(0, a.data(), 4, IBEX_I32), recv_op(0, b.data(), 4, IBEX_I32),
             recv_op(0, b.data() + 2, 4, IBEX_I32)},
            IBEX_ERR_INVALID_ARGUMENT, "two receive buffers overlap");
    refused({send_op(0, a.data(), 4, IBEX_I32), recv_op(0, a.data() + 3, 4, IBEX_I32)}, IBEX_ERR_INVALID_ARGUMENT,
            "a receive buffer overlaps a send buffer");
    refused({send_op(0, a.data(), size_t(1) << 62, IBEX_I32)}, IBEX_ERR_INVALID_ARGUMENT, "out of range");
    EXPECT_EQ(ibex_send(a.data(), 4, IBEX_I32, 0, comm, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("ibex_send: this rank's 1 sends to itself"), std::string::npos)
        << ibex_last_error();
    EXPECT_NE(std::string(ibex_last_error()).find("same ibex_p2p_batch"), std::string::npos) << ibex_last_error();
    EXPECT_EQ(ibex_recv(b.data(), 4, IBEX_I32, 3, comm, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("ibex_recv: peer 3 not in 0..0"), std::string::npos)
        << ibex_last_error();
    EXPECT_EQ(ibex_send(a.data(), 4, IBEX_I32, 0, nullptr, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_p2p_batch(nullptr, 2, comm, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_recv(nullptr, 0, IBEX_I32, 0, comm, nullptr), IBEX_OK) << "nothing to receive";
    // Nothing refused above touched the buffers.
    EXPECT_EQ(b, a);
}

} // namespace
