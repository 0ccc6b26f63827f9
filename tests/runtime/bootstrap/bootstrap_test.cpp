// The bootstrap star, in one process (one thread per rank): joining, all-gather, barrier,
// clear refusals (wrong token, disagreeing sizes, missing ranks), and the failure channel
// (a connection closed without goodbye, an abort relayed to everyone).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtime/bootstrap/bootstrap.h"
#include "runtime/bootstrap/unique_id.h"

namespace ibex::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;

struct Joined {
    ibex_status_t st = IBEX_ERR_INTERNAL;
    std::string detail;
    std::unique_ptr<Bootstrap> b;
};

// Joins `n` ranks in threads; ids[r] is what rank r is given.
std::vector<Joined> join_all(int n, const std::vector<std::string> &ids, const std::vector<int> &claimed_n,
                             int timeout_ms, const std::vector<int> &ranks) {
    std::vector<Joined> out(ranks.size());
    std::vector<std::thread> th;
    for (size_t i = 0; i < ranks.size(); ++i)
        th.emplace_back([&, i] {
            out[i].st = Bootstrap::join(ids[i].c_str(), ranks[i], claimed_n[i], timeout_ms, &out[i].b);
            out[i].detail = ibex_last_error();
        });
    for (auto &t : th) t.join();
    (void)n;
    return out;
}

std::string new_id() {
    ibex_unique_id_t id{};
    EXPECT_EQ(create_unique_id("127.0.0.1", 0, &id), IBEX_OK) << ibex_last_error();
    return id.text;
}

std::vector<Joined> join_n(int n, int timeout_ms = 5000) {
    const std::string id = new_id();
    std::vector<int> ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    return join_all(n, std::vector<std::string>(n, id), std::vector<int>(n, n), timeout_ms, ranks);
}

// Runs f(rank) in one thread per rank.
void each(int n, const std::function<void(int)> &f) {
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r) th.emplace_back(f, r);
    for (auto &t : th) t.join();
}

TEST(Bootstrap, JoinAllgatherBarrierGoodbye) {
    const int n = 5;
    auto j = join_n(n);
    for (int r = 0; r < n; ++r) ASSERT_EQ(j[r].st, IBEX_OK) << "rank " << r << ": " << j[r].detail;
    std::vector<std::vector<char>> all(n, std::vector<char>(3 * n));
    std::vector<ibex_status_t> st(n, IBEX_ERR_INTERNAL);
    each(n, [&](int r) {
        const char mine[3] = {static_cast<char>('a' + r), static_cast<char>('A' + r), static_cast<char>(r)};
        st[r] = j[r].b->allgather(mine, 3, all[r].data(), 5000);
        if (st[r] == IBEX_OK) st[r] = j[r].b->barrier(5000);
    });
    for (int r = 0; r < n; ++r) {
        ASSERT_EQ(st[r], IBEX_OK) << "rank " << r;
        for (int q = 0; q < n; ++q) {
            EXPECT_EQ(all[r][3 * q], 'a' + q);
            EXPECT_EQ(all[r][3 * q + 2], q);
        }
    }
    each(n, [&](int r) { j[r].b->goodbye(5000); });
    for (int r = 0; r < n; ++r) {
        ibex_status_t s = IBEX_OK;
        std::string d;
        EXPECT_TRUE(j[r].b->healthy(&s, &d)) << "rank " << r << " saw a failure after an orderly goodbye: " << d;
    }
}

TEST(Bootstrap, SingleRankNeedsNoNetwork) {
    auto j = join_n(1);
    ASSERT_EQ(j[0].st, IBEX_OK);
    int x = 7, y = 0;
    EXPECT_EQ(j[0].b->allgather(&x, sizeof x, &y, 100), IBEX_OK);
    EXPECT_EQ(y, 7);
}

TEST(Bootstrap, WrongTokenIsRefusedAndMissingRanksNamed) {
    const std::string id = new_id();
    const std::string other = id.substr(0, id.find('/')) + "/not-this-job";
    auto j = join_all(3, {id, id, other}, {3, 3, 3}, 1000, {0, 1, 2});
    EXPECT_EQ(j[2].st, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(j[2].detail.find("token"), std::string::npos) << j[2].detail;
    EXPECT_EQ(j[0].st, IBEX_ERR_TIMEOUT);
    EXPECT_NE(j[0].detail.find("ranks 2 did not join"), std::string::npos) << j[0].detail;
    EXPECT_NE(j[1].st, IBEX_OK);
}

TEST(Bootstrap, DisagreeingSizesFailEverywhere) {
    const std::string id = new_id();
    auto j = join_all(2, {id, id}, {2, 3}, 3000, {0, 1});
    EXPECT_EQ(j[0].st, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(j[0].detail.find("says there are 3 ranks"), std::string::npos) << j[0].detail;
    EXPECT_EQ(j[1].st, IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(j[1].detail.find("refused"), std::string::npos) << j[1].detail;
}

TEST(Bootstrap, UnreachableRootTimesOut) {
    // A port nobody listens on: the rank retries until its deadline, then says where.
    auto j = join_all(2, {"127.0.0.1:1/t"}, {2}, 300, {1});
    EXPECT_EQ(j[0].st, IBEX_ERR_TIMEOUT);
    EXPECT_NE(j[0].detail.find("127.0.0.1:1"), std::string::npos) << j[0].detail;
}

bool wait_unhealthy(Bootstrap &b, ibex_status_t *st, std::string *d, int ms) {
    const auto end = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < end) {
        if (!b.healthy(st, d)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
}

TEST(Bootstrap, ClosedConnectionReachesEveryRank) {
    auto j = join_n(4);
    for (auto &x : j) ASSERT_EQ(x.st, IBEX_OK) << x.detail;
    j[3].b.reset(); // as if the process died: no goodbye
    for (int r = 0; r < 3; ++r) {
        ibex_status_t st = IBEX_OK;
        std::string d;
        ASSERT_TRUE(wait_unhealthy(*j[r].b, &st, &d, 3000)) << "rank " << r;
        EXPECT_EQ(st, IBEX_ERR_REMOTE);
        EXPECT_NE(d.find("rank 3 closed"), std::string::npos) << d;
    }
}

TEST(Bootstrap, RootGoneReachesEveryRank) {
    auto j = join_n(3);
    for (auto &x : j) ASSERT_EQ(x.st, IBEX_OK) << x.detail;
    j[0].b.reset();
    for (int r = 1; r < 3; ++r) {
        ibex_status_t st = IBEX_OK;
        std::string d;
        ASSERT_TRUE(wait_unhealthy(*j[r].b, &st, &d, 3000)) << "rank " << r;
        EXPECT_NE(d.find("rank 0 closed"), std::string::npos) << d;
    }
}

TEST(Bootstrap, AbortIsRelayedWithItsOrigin) {
    auto j = join_n(4);
    for (auto &x : j) ASSERT_EQ(x.st, IBEX_OK) << x.detail;
    j[2].b->send_abort(IBEX_ERR_TIMEOUT, "allreduce made no progress");
    for (int r : {0, 1, 3}) {
        ibex_status_t st = IBEX_OK;
        std::string d;
        ASSERT_TRUE(wait_unhealthy(*j[r].b, &st, &d, 3000)) << "rank " << r;
        EXPECT_EQ(st, IBEX_ERR_TIMEOUT);
        EXPECT_NE(d.find("rank 2: allreduce made no progress"), std::string::npos) << d;
    }
    // A blocked all-gather returns the failure instead of waiting out its timeout.
    int x = 0;
    std::vector<int> all(4);
    const auto t0 = Clock::now();
    EXPECT_EQ(j[1].b->allgather(&x, sizeof x, all.data(), 10000), IBEX_ERR_TIMEOUT);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST(Bootstrap, MessagesBetweenTwoRanksGoThroughRankZeroInOrder) {
    const int n = 4;
    auto j = join_n(n);
    for (auto &x : j) ASSERT_EQ(x.st, IBEX_OK) << x.detail;
    std::vector<std::string> got(n);
    std::vector<ibex_status_t> st(n, IBEX_ERR_INTERNAL);
    each(n, [&](int r) {
        Bootstrap &b = *j[r].b;
        const auto send = [&](int to, const std::string &m) { return b.send_to(to, m.data(), m.size(), 2000); };
        const auto take = [&](int from) {
            std::vector<uint8_t> m;
            if (b.recv_from(from, &m, 3000) != IBEX_OK) return std::string("<") + ibex_last_error() + ">";
            return std::string(m.begin(), m.end());
        };
        st[r] = IBEX_OK;
        // Sent before an all-gather that every rank joins: the messages must not be taken
        // for its frames, nor its frames for them.
        if (r == 1 && (send(3, "first") != IBEX_OK || send(3, "second") != IBEX_OK)) st[r] = IBEX_ERR_INTERNAL;
        if (r == 2 && send(0, "to the root") != IBEX_OK) st[r] = IBEX_ERR_INTERNAL;
        int mine = r * 10;
        std::vector<int> all(n);
        if (b.allgather(&mine, sizeof mine, all.data(), 3000) != IBEX_OK || all[3] != 30) st[r] = IBEX_ERR_INTERNAL;
        if (r == 0 && send(2, "from the root") != IBEX_OK) st[r] = IBEX_ERR_INTERNAL;
        if (r == 3) {
            got[r] = take(1);
            got[r] += "," + take(1);
        }
        if (r == 0) got[r] = take(2);
        if (r == 2) got[r] = take(0);
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(st[r], IBEX_OK) << "rank " << r;
    EXPECT_EQ(got[3], "first,second");
    EXPECT_EQ(got[0], "to the root");
    EXPECT_EQ(got[2], "from the root");
    // Nothing more is coming: the wait ends at its timeout, naming whom it waited for.
    std::vector<uint8_t> m;
    EXPECT_EQ(j[3].b->recv_from(1, &m, 200), IBEX_ERR_TIMEOUT);
    EXPECT_NE(std::string(ibex_last_error()).find("message from rank 1"), std::string::npos) << ibex_last_error();
    EXPECT_EQ(j[1].b->send_to(1, "x", 1, 100), IBEX_ERR_INVALID_ARGUMENT) << "a rank sends itself nothing";
    EXPECT_EQ(j[1].b->send_to(4, "x", 1, 100), IBEX_ERR_INVALID_ARGUMENT);
    each(n, [&](int r) { j[r].b->goodbye(5000); });
}

TEST(Bootstrap, AMessageFromADeadRankEndsInItsDeath) {
    auto j = join_n(3);
    for (auto &x : j) ASSERT_EQ(x.st, IBEX_OK) << x.detail;
    j[2].b.reset(); // closes without a goodbye
    // Rank 0 sees it and tells the others when it looks at its connections, as a
    // communicator's progress thread does now and then.
    std::atomic<bool> done{false};
    std::thread root([&] {
        ibex_status_t st;
        std::string d;
        for (int i = 0; i < 500 && !done; ++i) {
            j[0].b->healthy(&st, &d);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    });
    std::vector<uint8_t> m;
    const auto t0 = Clock::now();
    EXPECT_EQ(j[1].b->recv_from(2, &m, 10000), IBEX_ERR_REMOTE);
    EXPECT_NE(std::string(ibex_last_error()).find("rank 2 closed"), std::string::npos) << ibex_last_error();
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
    done = true;
    root.join();
}

TEST(UniqueId, FormatAndParse) {
    ibex_unique_id_t id{};
    ASSERT_EQ(ibex_get_unique_id(&id), IBEX_OK) << ibex_last_error();
    ParsedId p;
    ASSERT_EQ(parse_unique_id(id.text, &p), IBEX_OK) << id.text;
    EXPECT_EQ(p.host, "127.0.0.1");
    EXPECT_GT(p.port, 0);
    EXPECT_EQ(p.token.size(), 16u);
    const int fd = take_listener(id.text);
    EXPECT_GE(fd, 0);
    if (fd >= 0) ::close(fd);
    EXPECT_EQ(take_listener(id.text), -1) << "a listener is handed over once";
    EXPECT_EQ(parse_unique_id("nohost", &p), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(parse_unique_id("h:99999/t", &p), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(parse_unique_id("h:1/", &p), IBEX_ERR_INVALID_ARGUMENT);
}

} // namespace
} // namespace ibex::bootstrap
