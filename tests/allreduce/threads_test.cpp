// Ranks as threads of one process (one communicator each, as a framework driving several
// devices from one process would): allreduce, split and destroy side by side.
#include <gtest/gtest.h>
#include <ibex/coll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

// One rank's view: its communicator and a check that records the first failure.
struct ThreadRank {
    int rank = 0;
    ibex_comm_t *comm = nullptr;
    std::string *err = nullptr;
    bool check(ibex_status_t st, const char *what) const {
        if (st != IBEX_OK && err->empty()) *err = std::string(what) + ": " + ibex_last_error();
        return st == IBEX_OK;
    }
    void fail(const std::string &why) const {
        if (err->empty()) *err = why;
    }
};

// Runs body on n ranks, a thread each with its own communicator (created before, destroyed
// after); returns each rank's first failure ("" when none).
std::vector<std::string> run_thread_ranks(int n, const std::function<void(const ThreadRank &)> &body) {
    std::vector<std::string> err(static_cast<size_t>(n));
    ibex_unique_id_t id{};
    if (ibex_get_unique_id(&id) != IBEX_OK) {
        err[0] = std::string("unique id: ") + ibex_last_error();
        return err;
    }
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
        th.emplace_back([&, r] {
            ThreadRank me{r, nullptr, &err[static_cast<size_t>(r)]};
            if (!me.check(ibex_comm_init_rank(&me.comm, n, &id, r, nullptr), "init")) return;
            body(me);
            me.check(ibex_comm_destroy(me.comm), "destroy");
        });
    for (auto &t : th) t.join();
    return err;
}

TEST(ThreadsAsRanks, AllreduceAndSplit) {
    const int n = 4;
    const auto err = run_thread_ranks(n, [](const ThreadRank &me) {
        const int r = me.rank;
        std::vector<float> x(50001, 1.0f + static_cast<float>(r));
        if (me.check(ibex_allreduce(x.data(), x.data(), x.size(), IBEX_F32, IBEX_SUM, me.comm, nullptr), "allreduce") &&
            (x[0] != 10.0f || x[50000] != 10.0f))
            me.fail("allreduce gave " + std::to_string(x[0]));
        ibex_comm_t *s = nullptr;
        if (me.check(ibex_comm_split(me.comm, r % 2, r, &s), "split")) {
            int32_t y = r;
            if (me.check(ibex_allreduce(&y, &y, 1, IBEX_I32, IBEX_SUM, s, nullptr), "sub allreduce") &&
                y != (r % 2 ? 1 + 3 : 0 + 2))
                me.fail("sub allreduce gave " + std::to_string(y));
            me.check(ibex_comm_destroy(s), "destroy sub");
        }
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(err[static_cast<size_t>(r)], "") << "rank " << r;
}

// A collective issued with a request right after blocking ones (the progress thread naps
// while callers drive) runs to its end while the caller makes no ibex call at all: the
// progress thread must wake for it, as an application overlapping compute relies on.
TEST(ThreadsAsRanks, AnOpNobodyWaitsOnFinishesAfterBlockingOnes) {
    const int n = 2;
    std::vector<double> waited_ms(n, 0.0);
    const auto err = run_thread_ranks(n, [&](const ThreadRank &me) {
        for (int round = 0; round < 3 && me.err->empty(); ++round) {
            float x = 1.0f;
            for (int i = 0; i < 200 && me.check(ibex_allreduce(&x, &x, 1, IBEX_F32, IBEX_SUM, me.comm, nullptr), "blocking");
                 ++i)
                x = 1.0f;
            std::vector<float> in(1000, 1.0f + static_cast<float>(me.rank)), out(1000, 0.0f);
            ibex_request_t *req = nullptr;
            if (!me.check(ibex_allreduce(in.data(), out.data(), in.size(), IBEX_F32, IBEX_SUM, me.comm, &req), "issue"))
                break;
            // No ibex call until the result is there (bounded: a hang fails, not blocks).
            const auto t0 = std::chrono::steady_clock::now();
            const std::atomic_ref<float> last(out.back());
            while (last.load(std::memory_order_acquire) != 3.0f &&
                   std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            waited_ms[static_cast<size_t>(me.rank)] =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (last.load(std::memory_order_acquire) != 3.0f)
                me.fail("round " + std::to_string(round) + ": no result without a call in 20 s");
            me.check(ibex_wait(req), "wait");
            if (out[0] != 3.0f) me.fail("allreduce gave " + std::to_string(out[0]));
        }
    });
    for (int r = 0; r < n; ++r)
        EXPECT_EQ(err[static_cast<size_t>(r)], "") << "rank " << r << " (last wait " << waited_ms[static_cast<size_t>(r)] << " ms)";
}

// The same collective on other buffers, another count or out of place after in place: each
// call lands its own result where it names, although the communicator keeps the last
// op's schedule for the next identical one (ScheduleMemo). Over udp:lo (IBEX_SHM=0), so
// that the calls run on the executor's schedules, not the fast boxes.
TEST(ThreadsAsRanks, RepeatedCallsWithChangedArgumentsLandWhereTheyName) {
    const char *had = std::getenv("IBEX_SHM");
    const std::string saved = had ? had : "";
    setenv("IBEX_SHM", "0", 1);
    const int n = 2;
    const auto err = run_thread_ranks(n, [](const ThreadRank &me) {
        std::vector<float> a(8), b(8), out1(8), out2(8);
        const float mine = 1.0f + static_cast<float>(me.rank); // sums: 3 (a), 30 (b)
        auto expect = [&](const std::vector<float> &v, size_t count, float want, float beyond, const char *what) {
            for (size_t i = 0; i < v.size(); ++i)
                if (v[i] != (i < count ? want : beyond)) {
                    me.fail(std::string(what) + ": element " + std::to_string(i) + " is " + std::to_string(v[i]));
                    return;
                }
        };
        ibex_comm_t *c = me.comm;
        for (int round = 0; round < 3 && me.err->empty(); ++round) {
            std::fill(a.begin(), a.end(), mine);
            if (me.check(ibex_allreduce(a.data(), a.data(), 8, IBEX_F32, IBEX_SUM, c, nullptr), "a in place"))
                expect(a, 8, 3.0f, 0.0f, "a in place");
            std::fill(b.begin(), b.end(), 10.0f * mine);
            if (me.check(ibex_allreduce(b.data(), b.data(), 8, IBEX_F32, IBEX_SUM, c, nullptr), "b in place"))
                expect(b, 8, 30.0f, 0.0f, "b in place");
            std::fill(a.begin(), a.end(), mine);
            if (me.check(ibex_allreduce(a.data(), a.data(), 4, IBEX_F32, IBEX_SUM, c, nullptr), "a, 4 of 8"))
                expect(a, 4, 3.0f, mine, "a, 4 of 8");
            std::fill(a.begin(), a.end(), mine);
            std::fill(out1.begin(), out1.end(), -1.0f);
            std::fill(out2.begin(), out2.end(), -1.0f);
            if (me.check(ibex_allreduce(a.data(), out1.data(), 8, IBEX_F32, IBEX_SUM, c, nullptr), "a to out1"))
                expect(out1, 8, 3.0f, 0.0f, "a to out1");
            if (me.check(ibex_allreduce(a.data(), out2.data(), 8, IBEX_F32, IBEX_MAX, c, nullptr), "a to out2, max"))
                expect(out2, 8, 2.0f, 0.0f, "a to out2, max");
            expect(out1, 8, 3.0f, 0.0f, "out1 after the max into out2");
        }
    });
    if (had) setenv("IBEX_SHM", saved.c_str(), 1);
    else unsetenv("IBEX_SHM");
    for (int r = 0; r < n; ++r) EXPECT_EQ(err[static_cast<size_t>(r)], "") << "rank " << r;
}

} // namespace
