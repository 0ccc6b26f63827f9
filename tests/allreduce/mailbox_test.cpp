// Sends and receives between ranks of one host through the mailboxes (allreduce/mailbox.h):
// small messages go whole and larger ones are read out of the sender's buffer (or, where
// that is off, go by the schedule beside a notice of their length), in one batch and in
// order; a ring that fills waits for its receiver; lengths that
// disagree across the limit fail the receiver at once; the limit is agreed; ranks of
// other hosts are reached the scheduled way; a receiver whose sender dies fails.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <sched.h>
#include <sys/mman.h>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

ibex_p2p_op_t send_op(int peer, const void *buf, size_t bytes) {
    return {IBEX_P2P_SEND, peer, const_cast<void *>(buf), bytes, IBEX_U8};
}
ibex_p2p_op_t recv_op(int peer, void *buf, size_t bytes) { return {IBEX_P2P_RECV, peer, buf, bytes, IBEX_U8}; }

// Byte i of message k from rank `from` to rank `to`: differs between messages and pairs.
uint8_t byte_of(int from, int to, size_t k, size_t i) {
    return static_cast<uint8_t>(i * 131 + k * 17 + static_cast<size_t>(from) * 5 + static_cast<size_t>(to) * 3 + 1);
}

constexpr size_t kLimit = 8192; // IBEX_MAILBOX_MAX's default

// Every rank sends these to every other rank, and receives them, in one batch, interleaved
// with a copy to itself: the limit's neighbours, a byte, one eager slice and many slices.
const std::vector<size_t> kSizes = {1, kLimit - 1, kLimit, kLimit + 1, 40000, 3, 1 << 20, 48};

// reads: messages past the limit are read out of the sender's buffer (else rank 1 turns
// that off for all with IBEX_MAILBOX_READ=0, and they are scheduled beside a notice).
int mixed_batch(RankCtx &ctx, bool reads) {
    if (!reads && ctx.rank == 1) ::setenv("IBEX_MAILBOX_READ", "0", 1);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
    const int r = ctx.rank, n = ctx.nranks;
    RANK_CHECK(ctx, comm->mail.max_bytes() == kLimit, "rank %d: mailbox limit %zu", r, comm->mail.max_bytes());
    RANK_CHECK(ctx, comm->mail.reads() == reads, "rank %d: reads %d", r, comm->mail.reads());
    std::vector<std::vector<uint8_t>> outs, ins;
    std::vector<ibex_p2p_op_t> ops;
    for (int round = 0; round < 2; ++round) { // the second time through, the rings have wrapped
        outs.clear();
        ins.clear();
        ops.clear();
        for (int q = 0; q < n; ++q)
            for (size_t k = 0; k < kSizes.size(); ++k) {
                outs.emplace_back(kSizes[k]);
                for (size_t i = 0; i < kSizes[k]; ++i) outs.back()[i] = byte_of(r, q, k + round, i);
                ins.emplace_back(kSizes[k] + 1, uint8_t(0xEE));
            }
        for (int q = 0, m = 0; q < n; ++q)
            for (size_t k = 0; k < kSizes.size(); ++k, ++m) {
                // receives before sends for some peers, after for others
                if ((q + static_cast<int>(k)) % 2) ops.push_back(recv_op(q, ins[static_cast<size_t>(m)].data(), kSizes[k]));
                ops.push_back(send_op(q, outs[static_cast<size_t>(m)].data(), kSizes[k]));
                if (!((q + static_cast<int>(k)) % 2))
                    ops.push_back(recv_op(q, ins[static_cast<size_t>(m)].data(), kSizes[k]));
            }
        const uint64_t whole0 = comm->mail.whole_messages(), notices0 = comm->mail.notices(),
                       read0 = comm->mail.read_messages();
        RANK_CHECK_OK(ctx, ibex_p2p_batch(ops.data(), ops.size(), comm, nullptr));
        for (int q = 0, m = 0; q < n; ++q)
            for (size_t k = 0; k < kSizes.size(); ++k, ++m) {
                const std::vector<uint8_t> &got = ins[static_cast<size_t>(m)];
                for (size_t i = 0; i < kSizes[k]; ++i)
                    RANK_CHECK(ctx, got[i] == byte_of(q, r, k + round, i), "rank %d, round %d: byte %zu of %zu from %d",
                               r, round, i, kSizes[k], q);
                RANK_CHECK(ctx, got[kSizes[k]] == 0xEE, "rank %d: message of %zu from %d written past its end", r,
                           kSizes[k], q);
            }
        size_t small = 0;
        for (size_t s : kSizes) small += s <= kLimit;
        const uint64_t peers = static_cast<uint64_t>(n - 1);
        RANK_CHECK(ctx, comm->mail.whole_messages() - whole0 == small * peers,
                   "rank %d: %llu messages went whole, expected %zu", r,
                   static_cast<unsigned long long>(comm->mail.whole_messages() - whole0), small * (n - 1));
        const uint64_t large = (kSizes.size() - small) * peers;
        const uint64_t notices = comm->mail.notices() - notices0, read = comm->mail.read_messages() - read0;
        RANK_CHECK(ctx, notices == (reads ? 0 : large) && read == (reads ? large : 0),
                   "rank %d: %llu notices and %llu read, expected %llu %s", r, static_cast<unsigned long long>(notices),
                   static_cast<unsigned long long>(read), static_cast<unsigned long long>(large),
                   reads ? "read" : "notices");
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(Mailbox, SmallMessagesGoWholeAndLargeOnesAreReadInOneBatch) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return mixed_batch(ctx, true); }), true);
}

TEST(Mailbox, WithoutReadsLargeMessagesGoByTheScheduleBesideANotice) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return mixed_batch(ctx, false); }), true);
}

// Rank 0 issues kSlots sends to rank 1 and waits for them, then a barrier; rank 1 joins
// the barrier first and only then receives: the sends went out before their receives.
// Then many more blocking sends than the ring holds, received one by one by a receiver
// that starts late, and a batch of them each way, in order.
TEST(Mailbox, SendsFillTheRingAndThenWaitForTheReceiver) {
    const auto out = ibex::test::run_ranks(2, [](RankCtx &ctx) {
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
        const int r = ctx.rank, peer = 1 - r;
        constexpr size_t kSlots = ibex::coll::Mailbox::kSlots;
        std::vector<std::vector<uint8_t>> bufs(kSlots, std::vector<uint8_t>(100));
        std::vector<ibex_request_t *> reqs(kSlots);
        if (r == 0) {
            for (size_t k = 0; k < kSlots; ++k) {
                for (size_t i = 0; i < 100; ++i) bufs[k][i] = byte_of(0, 1, k, i);
                RANK_CHECK_OK(ctx, ibex_send(bufs[k].data(), 100, IBEX_U8, 1, comm, &reqs[k]));
            }
            for (size_t k = 0; k < kSlots; ++k) RANK_CHECK_OK(ctx, ibex_wait(reqs[k]));
            RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
        } else {
            RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
            for (size_t k = 0; k < kSlots; ++k) {
                RANK_CHECK_OK(ctx, ibex_recv(bufs[k].data(), 100, IBEX_U8, 0, comm, nullptr));
                for (size_t i = 0; i < 100; ++i)
                    RANK_CHECK(ctx, bufs[k][i] == byte_of(0, 1, k, i), "message %zu, byte %zu", k, i);
            }
        }
        // Ten times the ring, one call each; the receiver starts 100 ms late.
        constexpr size_t kMany = 10 * kSlots;
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        for (size_t k = 0; k < kMany; ++k) {
            uint32_t v = r == 0 ? static_cast<uint32_t>(k * 7 + 1) : 0;
            RANK_CHECK_OK(ctx, r == 0 ? ibex_send(&v, 1, IBEX_I32, 1, comm, nullptr)
                                      : ibex_recv(&v, 1, IBEX_I32, 0, comm, nullptr));
            RANK_CHECK(ctx, v == k * 7 + 1, "rank %d: message %zu carried %u", r, k, v);
        }
        // One batch each with kMany sends and kMany receives to and from the other.
        std::vector<uint32_t> mine(kMany), theirs(kMany, 0);
        std::vector<ibex_p2p_op_t> ops;
        for (size_t k = 0; k < kMany; ++k) {
            mine[k] = static_cast<uint32_t>(r * 100000 + k);
            ops.push_back(send_op(peer, &mine[k], sizeof mine[k]));
            ops.push_back(recv_op(peer, &theirs[k], sizeof theirs[k]));
        }
        RANK_CHECK_OK(ctx, ibex_p2p_batch(ops.data(), ops.size(), comm, nullptr));
        for (size_t k = 0; k < kMany; ++k)
            RANK_CHECK(ctx, theirs[k] == static_cast<uint32_t>(peer * 100000 + k), "rank %d: batch message %zu is %u", r,
                       k, theirs[k]);
        // A message read out of the sender's buffer: the blocking send returns only once the
        // receiver, 100 ms late, has copied it (the sender then overwrites its buffer).
        std::vector<uint8_t> big(3 << 20);
        for (size_t i = 0; i < big.size(); ++i) big[i] = r == 0 ? byte_of(0, 1, 9, i) : 0;
        if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        RANK_CHECK_OK(ctx, r == 0 ? ibex_send(big.data(), big.size(), IBEX_U8, 1, comm, nullptr)
                                  : ibex_recv(big.data(), big.size(), IBEX_U8, 0, comm, nullptr));
        if (r == 0) std::fill(big.begin(), big.end(), uint8_t(0));
        for (size_t i = 0; r == 1 && i < big.size(); ++i)
            RANK_CHECK(ctx, big[i] == byte_of(0, 1, 9, i), "rank 1: byte %zu of the read message", i);
        RANK_CHECK(ctx, comm->mail.read_messages() == (r == 0 ? 1u : 0u), "rank %d: %llu messages read", r,
                   static_cast<unsigned long long>(comm->mail.read_messages()));
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

// A send and its receive on different sides of the limit (one whole, the other a notice
// with its data scheduled), or both over it: the receiver fails at once naming both
// lengths, the sender at its next call at the latest, nothing lands past the buffer.
TEST(Mailbox, LengthsThatDisagreeAcrossTheLimitFailTheReceiverAtOnce) {
    const std::pair<size_t, size_t> cases[] = {
        {kLimit - 192, kLimit + 808}, {kLimit + 808, kLimit - 192}, {kLimit, kLimit + 1}, {70000, 60000}};
    for (bool reads : {true, false})
    for (const auto &[sent, expected] : cases) {
        SCOPED_TRACE(std::to_string(sent) + " bytes sent, " + std::to_string(expected) + " received" +
                     (reads ? "" : ", IBEX_MAILBOX_READ=0"));
        const auto out = ibex::test::run_ranks(2, [sent = sent, expected = expected, reads](RankCtx &ctx) {
            if (!reads) ::setenv("IBEX_MAILBOX_READ", "0", 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, 5000));
            std::vector<uint8_t> buf(std::max(sent, expected) + 64, 0xEE);
            const auto t0 = std::chrono::steady_clock::now();
            ibex_status_t st = ctx.rank == 0 ? ibex_send(buf.data(), sent, IBEX_U8, 1, comm, nullptr)
                                             : ibex_recv(buf.data(), expected, IBEX_U8, 0, comm, nullptr);
            const std::string first = ibex_last_error();
            if (ctx.rank == 1) {
                RANK_CHECK(ctx, st == IBEX_ERR_INVALID_ARGUMENT, "rank 1: the receive returned %s (%s)",
                           ibex_strerror(st), first.c_str());
                const std::string both = "rank 0 sent " + std::to_string(sent) + " bytes where this rank expects " +
                                         std::to_string(expected);
                RANK_CHECK(ctx, first.find(both) != std::string::npos && first.find("differ in length") != std::string::npos,
                           "rank 1: the error does not name both lengths: %s", first.c_str());
            }
            if (st == IBEX_OK) st = ibex_barrier(comm, nullptr);
            ctx.say("rank %d: %s after %ld ms: %s", ctx.rank, ibex_strerror(st), ibex::test::ms_since(t0),
                    ibex_last_error());
            RANK_CHECK(ctx, st != IBEX_OK, "rank %d: lengths that disagree went unnoticed", ctx.rank);
            RANK_CHECK(ctx, ibex::test::ms_since(t0) < 4500, "rank %d: error only after %ld ms", ctx.rank,
                       ibex::test::ms_since(t0));
            if (ctx.rank == 1)
                for (size_t i = expected; i < buf.size(); ++i)
                    RANK_CHECK(ctx, buf[i] == 0xEE, "rank 1: byte %zu past the buffer was written", i);
            RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
            return 0;
        });
        ibex::test::expect_all_passed(out, true);
    }
}

// IBEX_MAILBOX_MAX: the ranks use the smallest any of them gives; 0 on any rank: off for all
// (every message then moves the scheduled way, and still arrives).
TEST(Mailbox, RanksAgreeOnTheSmallestLimitAndZeroTurnsThemOff) {
    for (const char *limit : {"100", "0"}) {
        SCOPED_TRACE(std::string("rank 1 sets IBEX_MAILBOX_MAX=") + limit);
        const auto out = ibex::test::run_ranks(3, [limit](RankCtx &ctx) {
            if (ctx.rank == 1) ::setenv("IBEX_MAILBOX_MAX", limit, 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
            const size_t agreed = std::strtoul(limit, nullptr, 10);
            RANK_CHECK(ctx, comm->mail.max_bytes() == agreed, "rank %d: limit %zu, expected %zu", ctx.rank,
                       comm->mail.max_bytes(), agreed);
            const int to = (ctx.rank + 1) % 3, from = (ctx.rank + 2) % 3;
            std::vector<uint8_t> a(100), b(200), ga(100, 0), gb(200, 0);
            for (size_t i = 0; i < 200; ++i) {
                if (i < 100) a[i] = byte_of(ctx.rank, to, 0, i);
                b[i] = byte_of(ctx.rank, to, 1, i);
            }
            const ibex_p2p_op_t ops[] = {send_op(to, a.data(), 100), send_op(to, b.data(), 200),
                                         recv_op(from, ga.data(), 100), recv_op(from, gb.data(), 200)};
            RANK_CHECK_OK(ctx, ibex_p2p_batch(ops, 4, comm, nullptr));
            for (size_t i = 0; i < 200; ++i) {
                RANK_CHECK(ctx, i >= 100 || ga[i] == byte_of(from, ctx.rank, 0, i), "rank %d: byte %zu of 100", ctx.rank, i);
                RANK_CHECK(ctx, gb[i] == byte_of(from, ctx.rank, 1, i), "rank %d: byte %zu of 200", ctx.rank, i);
            }
            RANK_CHECK(ctx,
                       comm->mail.whole_messages() == (agreed ? 1u : 0u) && comm->mail.read_messages() == (agreed ? 1u : 0u),
                       "rank %d: %llu whole and %llu read", ctx.rank,
                       static_cast<unsigned long long>(comm->mail.whole_messages()),
                       static_cast<unsigned long long>(comm->mail.read_messages()));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        });
        ibex::test::expect_all_passed(out);
    }
}

// Two hosts named by IBEX_HOST_ID, two ranks each: a batch to and from every rank uses the
// mailboxes with the rank of its own host only, and every message arrives.
TEST(Mailbox, OnlyRanksOfOneHostUseThem) {
    const auto out = ibex::test::run_ranks(4, [](RankCtx &ctx) {
        const int r = ctx.rank, n = ctx.nranks;
        ::setenv("IBEX_HOST_ID", r < 2 ? "hostA" : "hostB", 1);
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
        for (int q = 0; q < n; ++q)
            RANK_CHECK(ctx, comm->mail.peer(q) == (q != r && q / 2 == r / 2), "rank %d: rank %d %s a mailbox peer", r, q,
                       comm->mail.peer(q) ? "is" : "is not");
        std::vector<std::vector<uint8_t>> outs, ins;
        std::vector<ibex_p2p_op_t> ops;
        for (int q = 0; q < n; ++q) {
            outs.emplace_back(64);
            for (size_t i = 0; i < 64; ++i) outs.back()[i] = byte_of(r, q, 0, i);
            ins.emplace_back(64, 0);
        }
        for (int q = 0; q < n; ++q) {
            ops.push_back(send_op(q, outs[static_cast<size_t>(q)].data(), 64));
            ops.push_back(recv_op(q, ins[static_cast<size_t>(q)].data(), 64));
        }
        RANK_CHECK_OK(ctx, ibex_p2p_batch(ops.data(), ops.size(), comm, nullptr));
        for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < 64; ++i)
                RANK_CHECK(ctx, ins[static_cast<size_t>(q)][i] == byte_of(q, r, 0, i), "rank %d: byte %zu from %d", r, i, q);
        RANK_CHECK(ctx, comm->mail.whole_messages() == 1, "rank %d: %llu messages through the mailboxes, expected 1", r,
                   static_cast<unsigned long long>(comm->mail.whole_messages()));
        RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

// ibex_alltoallv runs as sends and receives wherever some host has mailboxes: on one host
// (3 ranks) and on two (4 ranks named by IBEX_HOST_ID, so one peer of each rank shares its
// host and two do not), uneven blocks (one pair sends nothing, some fit a slot, some are
// read) land where the displacements say, and only the host's peers went through the
// mailboxes.
TEST(Mailbox, AlltoallvGoesThroughThemBetweenRanksOfAHost) {
    for (int hosts : {1, 2}) {
        SCOPED_TRACE(std::to_string(hosts) + " hosts");
        const int n = hosts == 1 ? 3 : 4;
        const auto out = ibex::test::run_ranks(n, [hosts](RankCtx &ctx) {
            const int r = ctx.rank, n = ctx.nranks;
            if (hosts == 2) ::setenv("IBEX_HOST_ID", r < 2 ? "hostA" : "hostB", 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm));
            RANK_CHECK(ctx, comm->mail.on_some_host(), "rank %d: no mailboxes", r);
            // Floats from a to b: none from 0 to 1, else a few hundred or a few thousand.
            auto count = [](int a, int b) -> size_t {
                return a == 0 && b == 1 ? 0 : (a + 2 * b) % 3 == 0 ? 3000 : static_cast<size_t>(100 + a * 7 + b);
            };
            std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
            size_t st = 0, rt = 0;
            for (int q = 0; q < n; ++q) {
                sc[q] = count(r, q);
                rc[q] = count(q, r);
                // Receive blocks with a gap of 5 between them; send blocks in reverse order.
                rd[q] = rt;
                rt += rc[q] + 5;
            }
            for (int q = n - 1; q >= 0; --q) {
                sd[q] = st;
                st += sc[q];
            }
            std::vector<float> send(st), recv(rt, -1.0f);
            for (int q = 0; q < n; ++q)
                for (size_t i = 0; i < sc[q]; ++i)
                    send[sd[q] + i] = static_cast<float>(r * 100000 + q * 10000 + static_cast<int>(i));
            const uint64_t before = comm->mail.whole_messages() + comm->mail.read_messages();
            RANK_CHECK_OK(ctx, ibex_alltoallv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(),
                                              IBEX_F32, comm, nullptr));
            for (int q = 0; q < n; ++q) {
                for (size_t i = 0; i < rc[q]; ++i)
                    RANK_CHECK(ctx, recv[rd[q] + i] == static_cast<float>(q * 100000 + r * 10000 + static_cast<int>(i)),
                               "rank %d: element %zu from rank %d is %g", r, i, q, recv[rd[q] + i]);
                for (size_t i = rc[q]; i < rc[q] + 5; ++i)
                    RANK_CHECK(ctx, recv[rd[q] + i] == -1.0f, "rank %d: the gap after rank %d's block was written", r, q);
            }
            uint64_t sent = 0; // the counters count the messages a rank sends
            for (int q = 0; q < n; ++q) sent += q != r && comm->mail.peer(q) && sc[q] > 0;
            const uint64_t moved = comm->mail.whole_messages() + comm->mail.read_messages() - before;
            RANK_CHECK(ctx, moved == sent, "rank %d: %llu messages through the mailboxes, expected %llu", r,
                       static_cast<unsigned long long>(moved), static_cast<unsigned long long>(sent));
            RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
            return 0;
        });
        ibex::test::expect_all_passed(out);
    }
}

// Rank 1 dies while rank 0 waits for a message from it (one to go whole, one to be read):
// an error well inside the timeout.
TEST(Mailbox, AReceiverWhoseSenderDiesFails) {
    for (size_t bytes : {size_t(8), size_t(4) << 20})
        ibex::test::run_with_victim(2, 1, [bytes](RankCtx &ctx, std::atomic<int> *ready) {
            constexpr int kTimeoutMs = 20000;
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, kTimeoutMs));
            std::vector<uint8_t> buf(bytes, 1);
            RANK_CHECK_OK(ctx, ibex_allreduce(buf.data(), buf.data(), 8, IBEX_U8, IBEX_SUM, comm, nullptr));
            RANK_CHECK(ctx, comm->mail.max_bytes() > 0, "rank %d: no mailboxes", ctx.rank);
            ready->fetch_add(1);
            if (ctx.rank == 1) ibex::test::die_when_all_ready(ctx, ready, 50);
            const auto t0 = std::chrono::steady_clock::now();
            const ibex_status_t st = ibex_recv(buf.data(), bytes, IBEX_U8, 1, comm, nullptr);
            ctx.say("rank 0, %zu bytes: %s after %ld ms: %s", bytes, ibex_strerror(st), ibex::test::ms_since(t0),
                    ibex_last_error());
            RANK_CHECK(ctx, st == IBEX_ERR_REMOTE || st == IBEX_ERR_TIMEOUT,
                       "rank 0: receive from a dead rank returned %s", ibex_strerror(st));
            RANK_CHECK(ctx, ibex::test::ms_since(t0) < kTimeoutMs / 2, "rank 0: error only after %ld ms",
                       ibex::test::ms_since(t0));
            RANK_CHECK_OK(ctx, ibex_comm_abort(comm));
            return 0;
        });
}

// A receive from a rank that never sends: the communicator's timeout, naming that rank.
TEST(Mailbox, AReceiveNobodySendsTimesOutNamingTheSender) {
    const auto out = ibex::test::run_ranks(3, [](RankCtx &ctx) {
        constexpr int kTimeoutMs = 800;
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, kTimeoutMs));
        if (ctx.rank != 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3 * kTimeoutMs));
            ibex_comm_abort(comm);
            return 0;
        }
        uint32_t v = 0;
        const auto t0 = std::chrono::steady_clock::now();
        const ibex_status_t st = ibex_recv(&v, 1, IBEX_I32, 2, comm, nullptr);
        const long took = ibex::test::ms_since(t0);
        ctx.say("rank 0: %s after %ld ms: %s", ibex_strerror(st), took, ibex_last_error());
        RANK_CHECK(ctx, st == IBEX_ERR_TIMEOUT, "rank 0: %s (%s)", ibex_strerror(st), ibex_last_error());
        RANK_CHECK(ctx, std::string(ibex_last_error()).find("waiting on rank 2") != std::string::npos,
                   "rank 0: the timeout does not name rank 2: %s", ibex_last_error());
        RANK_CHECK(ctx, took >= kTimeoutMs - 100 && took < 3 * kTimeoutMs, "rank 0: took %ld ms", took);
        ibex_comm_abort(comm);
        return 0;
    });
    ibex::test::expect_all_passed(out, true);
}

// The same on a crowded core: every rank and four busy threads share one CPU, so each
// yield of rank 0's first tight polls hands the core away for time slices. Those polls read
// the clock only every 256 looks and the timeout began to count after them: under a loaded
// ctest they took up to 1.5 s, and an 800 ms timeout fired after 2.4 s (the test above
// failed so). The timeout counts from the op's first look at the clock now. (2 s: the
// ranks' bootstrap shares that CPU and the loaded host too.)
TEST(Mailbox, AReceiveTimesOutInTimeOnACrowdedCore) {
    cpu_set_t allowed;
    ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
    ASSERT_LT(cpu, CPU_SETSIZE);
    void *shared = ::mmap(nullptr, sizeof(std::atomic<bool>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(shared, MAP_FAILED);
    auto *rank0_done = new (shared) std::atomic<bool>(false);
    const auto out = ibex::test::run_ranks(3, [cpu, rank0_done](RankCtx &ctx) {
        constexpr int kTimeoutMs = 2000;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        RANK_CHECK(ctx, sched_setaffinity(0, sizeof one, &one) == 0, "rank %d: cannot run on CPU %d", ctx.rank, cpu);
        ibex_comm_t *comm = nullptr;
        RANK_CHECK_OK(ctx, ibex::test::init_host_comm(ctx, &comm, kTimeoutMs));
        if (ctx.rank != 0) {
            for (int i = 0; i < 3000 && !rank0_done->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            ibex_comm_abort(comm);
            return 0;
        }
        std::atomic<bool> stop{false};
        std::vector<std::thread> busy;
        for (int i = 0; i < 4; ++i)
            busy.emplace_back([&stop] {
                while (!stop.load(std::memory_order_relaxed)) {
                }
            });
        uint32_t v = 0;
        const auto t0 = std::chrono::steady_clock::now();
        const ibex_status_t st = ibex_recv(&v, 1, IBEX_I32, 2, comm, nullptr);
        const long took = ibex::test::ms_since(t0);
        stop = true;
        for (auto &t : busy) t.join();
        rank0_done->store(true);
        ctx.say("rank 0: %s after %ld ms: %s", ibex_strerror(st), took, ibex_last_error());
        RANK_CHECK(ctx, st == IBEX_ERR_TIMEOUT, "rank 0: %s (%s)", ibex_strerror(st), ibex_last_error());
        RANK_CHECK(ctx, took >= kTimeoutMs - 100 && took < kTimeoutMs + 1500, "rank 0: took %ld ms", took);
        ibex_comm_abort(comm);
        return 0;
    });
    ::munmap(shared, sizeof(std::atomic<bool>));
    ibex::test::expect_all_passed(out, true);
}

} // namespace
