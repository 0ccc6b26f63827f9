// The summation service end to end: ibex_sumsrv servers in forked children, worker ranks in
// forked children over udp:lo, the sumsrv allreduce forced. Every type and op against a
// reference reduced here, with 0, 1 and 2 servers (0: plain allreduce), chunks small enough
// that a partition takes many and wraps the slots; a server killed mid-run fails every
// worker within the timeout; the server refuses what does not fit a job.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <csignal>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/comm.h"
#include "allreduce/cpu/elementwise.h"
#include "allreduce/cpu/reduce.h"
#include "allreduce/sumsrv_client.h"
#include "tests/allreduce/killed_rank.h"
#include "tests/allreduce/ranks.h"
#include "tests/support/child_process.h"
#include "tools/ibex_sumsrv/reduce_pool.h"
#include "tools/ibex_sumsrv/server.h"

namespace {

using ibex::test::RankCtx;

// A server in a child process, on an ephemeral loopback port.
class ServerProcess {
public:
    bool start(int threads = 2) {
        const bool ok = child_.start(
            [threads](int fd) {
                ibex::sumsrv::ServerOptions o;
                o.listen = "127.0.0.1:0";
                o.threads = threads;
                ibex::sumsrv::Server s;
                if (s.open(o) != IBEX_OK) return 3;
                const uint16_t port = s.port();
                if (!ibex::test::send_all(fd, &port, sizeof port)) return 4;
                std::atomic<bool> stop{false};
                return s.run(stop) == IBEX_OK ? 0 : 5;
            },
            120);
        return ok && ibex::test::recv_all(child_.fd(), &port_, sizeof port_, 10000);
    }
    std::string addr() const { return "127.0.0.1:" + std::to_string(port_); }
    pid_t pid() const { return child_.pid(); }
    void signal(int sig) { ::kill(child_.pid(), sig); }

private:
    ibex::test::ChildProcess child_;
    uint16_t port_ = 0;
};

std::string addrs(const std::vector<std::unique_ptr<ServerProcess>> &servers) {
    std::string out;
    for (const auto &s : servers) out += (out.empty() ? "" : ",") + s->addr();
    return out;
}

// Small integers: every type holds them, and their sums, products (of up to 5 ranks),
// minima and maxima, exactly, so every order of reduction gives the same bits.
double input(int rank, size_t i, ibex_datatype_t type) {
    const int v = static_cast<int>((static_cast<size_t>(rank) * 7 + i * 3) % 5);
    return type == IBEX_U8 ? v : v - 2;
}

void store(void *buf, size_t i, ibex_datatype_t type, double v) {
    switch (type) {
    case IBEX_U8: static_cast<uint8_t *>(buf)[i] = static_cast<uint8_t>(v); break;
    case IBEX_I32: static_cast<int32_t *>(buf)[i] = static_cast<int32_t>(v); break;
    case IBEX_I64: static_cast<int64_t *>(buf)[i] = static_cast<int64_t>(v); break;
    case IBEX_F16: static_cast<uint16_t *>(buf)[i] = ibex::coll::cpu::f32_to_f16(static_cast<float>(v)); break;
    case IBEX_BF16: static_cast<uint16_t *>(buf)[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16); break;
    case IBEX_F32: static_cast<float *>(buf)[i] = static_cast<float>(v); break;
    case IBEX_F64: static_cast<double *>(buf)[i] = v; break;
    default: break;
    }
}

const char *type_name(ibex_datatype_t t) {
    static const char *const names[] = {"u8", "i32", "i64", "f16", "bf16", "f32", "f64"};
    return names[t];
}
const char *op_name(ibex_redop_t o) {
    static const char *const names[] = {"sum", "prod", "min", "max", "avg"};
    return names[o];
}

// qp_choice: the communicator connects its QPs with traffic class 104 and sl 3, and its
// QPs to the servers must carry them too.
int allreduce_body(RankCtx &ctx, const std::string &servers, bool expect_sumsrv, bool qp_choice) {
    if (servers.empty())
        ::unsetenv("IBEX_SUMSRV");
    else
        ::setenv("IBEX_SUMSRV", servers.c_str(), 1);
    ::setenv("IBEX_ALGO", "sumsrv", 1);
    ::setenv("IBEX_SUMSRV_CHUNK", "4096", 1); // many chunks per partition
    ::setenv("IBEX_SUMSRV_SLOTS", "3", 1);    // and the slots wrap
    ibex_comm_t *comm = nullptr;
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    ibex_qp_attr_t choice = IBEX_QP_ATTR_INIT;
    choice.traffic_class = 104;
    choice.sl = 3;
    if (qp_choice) {
        cfg.qp_attr = &choice;
        cfg.qp_attr_mask = IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL;
    }
    RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, &cfg));
    for (int s = 0; qp_choice && s < comm->sumsrv.servers(); ++s) {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        RANK_CHECK_OK(ctx, ibex_query_qp(comm->sumsrv.qp(s), &a));
        RANK_CHECK(ctx, a.traffic_class == 104 && a.sl == 3, "rank %d: QP to server %d has traffic class %u, sl %u",
                   ctx.rank, s, a.traffic_class, a.sl);
    }
    const char *algo = ibex_comm_allreduce_algo(comm, 1 << 20);
    RANK_CHECK(ctx, (std::strcmp(algo, "sumsrv") == 0) == expect_sumsrv, "rank %d: algorithm %s with servers \"%s\"",
               ctx.rank, algo, servers.c_str());
    const size_t n = static_cast<size_t>(ctx.nranks);
    for (int t = 0; t < IBEX_DATATYPE_COUNT; ++t) {
        const auto type = static_cast<ibex_datatype_t>(t);
        const size_t elem = ibex_datatype_size(type);
        for (int o = 0; o < IBEX_REDOP_COUNT; ++o) {
            const auto op = static_cast<ibex_redop_t>(o);
            for (size_t count : {size_t(0), size_t(1), n + 1, size_t(1000), size_t(20011)}) {
                std::vector<uint8_t> want(count * elem), part(count * elem);
                for (int r = 0; r < ctx.nranks; ++r) {
                    for (size_t i = 0; i < count; ++i) store(r == 0 ? want.data() : part.data(), i, type, input(r, i, type));
                    if (r > 0) ibex::coll::reduce_into(want.data(), want.data(), part.data(), count, type, op);
                }
                if (op == IBEX_AVG) ibex::coll::finalize_avg(want.data(), count, type, ctx.nranks);
                for (bool in_place : {false, true}) {
                    std::vector<uint8_t> send((count + 1) * elem), recv((count + 1) * elem, 0xee);
                    for (size_t i = 0; i < count; ++i) store(send.data(), i, type, input(ctx.rank, i, type));
                    std::memset(send.data() + count * elem, 0xee, elem);
                    uint8_t *out = in_place ? send.data() : recv.data();
                    RANK_CHECK_OK(ctx, ibex_allreduce(send.data(), out, count, type, op, comm, nullptr));
                    for (size_t i = 0; i < count; ++i)
                        RANK_CHECK(ctx, std::memcmp(out + i * elem, want.data() + i * elem, elem) == 0,
                                   "rank %d %s %s count %zu %s: element %zu differs from the reference (byte %02x, want %02x)",
                                   ctx.rank, type_name(type), op_name(op), count, in_place ? "in place" : "out of place", i,
                                   out[i * elem], want[i * elem]);
                    RANK_CHECK(ctx, out[count * elem] == 0xee, "rank %d: wrote past the end", ctx.rank);
                }
            }
        }
    }
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

void run_allreduces(int nranks, int nservers, bool qp_choice = false) {
    SCOPED_TRACE(std::to_string(nranks) + " ranks, " + std::to_string(nservers) + " servers");
    std::vector<std::unique_ptr<ServerProcess>> servers;
    for (int s = 0; s < nservers; ++s) {
        servers.push_back(std::make_unique<ServerProcess>());
        ASSERT_TRUE(servers.back()->start());
    }
    const std::string list = addrs(servers);
    const auto out = ibex::test::run_ranks(
        nranks, [&](RankCtx &ctx) { return allreduce_body(ctx, list, nservers > 0, qp_choice); }, 150);
    ibex::test::expect_all_passed(out);
}

TEST(Sumsrv, NoServersIsPlainAllreduce) { run_allreduces(3, 0); }
TEST(Sumsrv, OneServer) { run_allreduces(3, 1); }
TEST(Sumsrv, TwoServers) { run_allreduces(4, 2, true); }
// k = n: the servers carry everything (a parameter server), the workers' schedule is empty.
TEST(Sumsrv, AsManyServersAsWorkersIsAParameterServer) { run_allreduces(2, 2); }

// A server killed while the workers run allreduces: every worker's collective fails, within
// the timeout, and none hangs.
TEST(Sumsrv, AServerKilledFailsEveryWorker) {
    ServerProcess a, b;
    ASSERT_TRUE(a.start());
    ASSERT_TRUE(b.start());
    const std::string list = a.addr() + "," + b.addr();
    constexpr int kTimeoutMs = 5000;
    const auto started = std::chrono::steady_clock::now();
    // b dies two seconds in, while the ranks are in their loop of allreduces. The timer is
    // a process, not a thread: the ranks are forked next, and a child forked from a
    // multi-threaded parent may not start threads of its own (POSIX; ThreadSanitizer
    // refuses it).
    ibex::test::ChildProcess timer;
    ASSERT_TRUE(timer.start(
        [server = b.pid()](int) {
            std::this_thread::sleep_for(std::chrono::seconds(2));
            return ::kill(server, SIGKILL) == 0 ? 0 : 1;
        },
        30));
    const auto out = ibex::test::run_ranks(
        3,
        [&](RankCtx &ctx) {
            ::setenv("IBEX_SUMSRV", list.c_str(), 1);
            ::setenv("IBEX_ALGO", "sumsrv", 1);
            ::setenv("IBEX_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
            std::vector<float> x(256 << 10, 1.0f), y(x.size());
            ibex_status_t st = IBEX_OK;
            int done = 0;
            const auto t0 = std::chrono::steady_clock::now();
            while (st == IBEX_OK && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
                st = ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr);
                if (st == IBEX_OK) {
                    RANK_CHECK(ctx, y[0] == 3.0f && y.back() == 3.0f, "rank %d: wrong sum %g", ctx.rank,
                               static_cast<double>(y.back()));
                    ++done;
                }
            }
            const auto failed_after = std::chrono::steady_clock::now() - t0;
            RANK_CHECK(ctx, st != IBEX_OK, "rank %d: %d allreduces and no error in 30 s with a server killed", ctx.rank,
                       done);
            RANK_CHECK(ctx, done > 0, "rank %d: failed before any allreduce: %s", ctx.rank, ibex_last_error());
            ctx.say("rank %d: %d allreduces, then after %.1f s: %s: %s", ctx.rank, done,
                    std::chrono::duration<double>(failed_after).count(), ibex_strerror(st), ibex_last_error());
            ibex_comm_abort(comm);
            return 0;
        },
        60);
    EXPECT_EQ(timer.wait_exit(10000), 0) << "the timer could not kill the server";
    ibex::test::expect_all_passed(out);
    for (const auto &r : out) std::printf("%s", r.text.c_str());
    // Killed 2 s in; every worker out well within 2 s + the timeout + slack.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2 + kTimeoutMs / 1000 + 10));
}

// A worker killed in the middle of a sumsrv allreduce: the others fail well within the
// timeout (the bootstrap sees the death; the server fails the job too).
TEST(Sumsrv, AKilledWorkerFailsTheOthers) {
    ServerProcess a;
    ASSERT_TRUE(a.start());
    const std::string list = a.addr();
    ibex::test::check_killed(3, 1, [&](RankCtx &ctx, ibex_comm_t **comm, int timeout_ms) {
        ::setenv("IBEX_SUMSRV", list.c_str(), 1);
        ::setenv("IBEX_ALGO", "sumsrv", 1);
        return ibex::test::init_comm(ctx, comm, timeout_ms);
    });
}

// A server that stops answering without closing (SIGSTOP): every worker's collective fails
// within the timeout, naming the server (the pushes' retransmissions run out first, or the
// collective's timeout fires, whichever comes first).
TEST(Sumsrv, AStoppedServerFailsEveryWorkerNamingIt) {
    ServerProcess a;
    ASSERT_TRUE(a.start());
    const std::string list = a.addr();
    // Rank 0 asks through `go` once every rank has summed once; a process (not a thread:
    // see AServerKilledFailsEveryWorker) stops the server and answers through `stopped`.
    int go[2], stopped[2];
    ASSERT_EQ(::pipe(go), 0);
    ASSERT_EQ(::pipe(stopped), 0);
    ibex::test::ChildProcess stopper;
    ASSERT_TRUE(stopper.start(
        [&, server = a.pid()](int) {
            ::close(go[1]); // its read ends when the parent's and the ranks' copies close
            uint8_t b = 0;
            if (::read(go[0], &b, 1) != 1) return 2;
            if (::kill(server, SIGSTOP) != 0) return 1;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            return ::write(stopped[1], &b, 1) == 1 ? 0 : 1;
        },
        90));
    const auto out = ibex::test::run_ranks(
        3,
        [&](RankCtx &ctx) {
            ::setenv("IBEX_SUMSRV", list.c_str(), 1);
            ::setenv("IBEX_ALGO", "sumsrv", 1);
            ::setenv("IBEX_TIMEOUT_MS", "3000", 1);
            ibex_comm_t *comm = nullptr;
            RANK_CHECK_OK(ctx, ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr));
            std::vector<float> x(64 << 10, 1.0f), y(x.size());
            RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr));
            RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
            if (ctx.rank == 0) {
                uint8_t b = 1;
                RANK_CHECK(ctx, ::write(go[1], &b, 1) == 1 && ::read(stopped[0], &b, 1) == 1, "rank 0: no answer");
            }
            RANK_CHECK_OK(ctx, ibex_barrier(comm, nullptr));
            const auto t0 = std::chrono::steady_clock::now();
            const ibex_status_t st = ibex_allreduce(x.data(), y.data(), x.size(), IBEX_F32, IBEX_SUM, comm, nullptr);
            const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            RANK_CHECK(ctx, st != IBEX_OK, "rank %d: the allreduce succeeded with its server stopped", ctx.rank);
            RANK_CHECK(ctx, waited < 15, "rank %d: failed only after %.1f s", ctx.rank, waited);
            RANK_CHECK(ctx, std::strstr(ibex_last_error(), ("sumsrv server " + list).c_str()) != nullptr, "rank %d: %s",
                       ctx.rank, ibex_last_error());
            ctx.say("rank %d after %.1f s: %s", ctx.rank, waited, ibex_last_error());
            ibex_comm_abort(comm);
            return 0;
        },
        60);
    ::close(go[1]); // the stopper's read ends if rank 0 never asked
    EXPECT_EQ(stopper.wait_exit(10000), 0) << "the stopper never stopped the server";
    a.signal(SIGCONT);
    for (int fd : {go[0], stopped[0], stopped[1]}) ::close(fd);
    ibex::test::expect_all_passed(out);
    for (const auto &r : out) std::printf("%s", r.text.c_str());
}

// Rank 0's list reaches the others through the bootstrap; a rank given another list fails
// creation, saying so.
TEST(Sumsrv, RankZerosListReachesEveryRank) {
    ServerProcess a;
    ASSERT_TRUE(a.start());
    const std::string list = a.addr();
    for (bool conflicting : {false, true}) {
        SCOPED_TRACE(conflicting ? "rank 2 names another server" : "only rank 0 names the server");
        const auto out = ibex::test::run_ranks(
            3,
            [&](RankCtx &ctx) {
                ::setenv("IBEX_ALGO", "sumsrv", 1);
                if (ctx.rank == 0)
                    ::setenv("IBEX_SUMSRV", list.c_str(), 1);
                else if (conflicting && ctx.rank == 2)
                    ::setenv("IBEX_SUMSRV", "127.0.0.1:9", 1);
                else
                    ::unsetenv("IBEX_SUMSRV");
                ibex_comm_t *comm = nullptr;
                const ibex_status_t st = ibex_comm_init_rank(&comm, ctx.nranks, &ctx.id, ctx.rank, nullptr);
                if (conflicting) {
                    RANK_CHECK(ctx, st != IBEX_OK, "rank %d: created with disagreeing lists", ctx.rank);
                    if (ctx.rank == 2)
                        RANK_CHECK(ctx, std::strstr(ibex_last_error(), "IBEX_SUMSRV differs between ranks") != nullptr,
                                   "rank 2: %s", ibex_last_error());
                    return 0;
                }
                RANK_CHECK_OK(ctx, st);
                RANK_CHECK(ctx, std::strcmp(ibex_comm_allreduce_algo(comm, 1 << 20), "sumsrv") == 0, "rank %d: %s",
                           ctx.rank, ibex_comm_allreduce_algo(comm, 1 << 20));
                RANK_CHECK(ctx, comm->sumsrv.servers_on_this_machine() == 1 && comm->sumsrv.some_on_a_workers_machine(),
                           "rank %d: the server on 127.0.0.1 not seen as on this machine", ctx.rank);
                std::vector<int32_t> x(30000, ctx.rank + 1), y(x.size());
                RANK_CHECK_OK(ctx, ibex_allreduce(x.data(), y.data(), x.size(), IBEX_I32, IBEX_SUM, comm, nullptr));
                RANK_CHECK(ctx, y.front() == 6 && y.back() == 6, "rank %d: %d %d", ctx.rank, y.front(), y.back());
                RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
                return 0;
            },
            60);
        ibex::test::expect_all_passed(out);
    }
}

} // namespace
