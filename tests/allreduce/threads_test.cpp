// Ranks as threads of one process (one communicator each, as a framework driving several
// devices from one process would): allreduce, split and destroy side by side.
#include <gtest/gtest.h>
#include <ibex/coll.h>

#include <string>
#include <thread>
#include <vector>

namespace {

TEST(ThreadsAsRanks, AllreduceAndSplit) {
    const int n = 4;
    ibex_unique_id_t id{};
    ASSERT_EQ(ibex_get_unique_id(&id), IBEX_OK) << ibex_last_error();
    std::vector<std::string> err(n);
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
        th.emplace_back([&, r] {
            auto check = [&](ibex_status_t st, const char *what) {
                if (st != IBEX_OK && err[r].empty()) err[r] = std::string(what) + ": " + ibex_last_error();
                return st == IBEX_OK;
            };
            ibex_comm_t *c = nullptr;
            if (!check(ibex_comm_init_rank(&c, n, &id, r, nullptr), "init")) return;
            std::vector<float> x(50001, 1.0f + static_cast<float>(r));
            if (check(ibex_allreduce(x.data(), x.data(), x.size(), IBEX_F32, IBEX_SUM, c, nullptr), "allreduce") &&
                (x[0] != 10.0f || x[50000] != 10.0f))
                err[r] = "allreduce gave " + std::to_string(x[0]);
            ibex_comm_t *s = nullptr;
            if (check(ibex_comm_split(c, r % 2, r, &s), "split")) {
                int32_t y = r;
                if (check(ibex_allreduce(&y, &y, 1, IBEX_I32, IBEX_SUM, s, nullptr), "sub allreduce") &&
                    y != (r % 2 ? 1 + 3 : 0 + 2))
                    err[r] = "sub allreduce gave " + std::to_string(y);
                check(ibex_comm_destroy(s), "destroy sub");
            }
            check(ibex_comm_destroy(c), "destroy");
        });
    for (auto &t : th) t.join();
    for (int r = 0; r < n; ++r) EXPECT_EQ(err[r], "") << "rank " << r;
}

} // namespace
