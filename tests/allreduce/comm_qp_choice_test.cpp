// A communicator's QP choice (ibex_comm_config_t.qp_attr): every QP it connects, and those
// of the communicators split from it, carry the chosen traffic class, service level and
// timers; ranks that chose differently all fail at init, naming both choices; a bad choice
// is refused before any rank is reached.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "allreduce/comm.h"
#include "tests/allreduce/ranks.h"

namespace {

using ibex::test::RankCtx;

ibex_qp_attr_t chosen(uint8_t sl) {
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.traffic_class = 104;
    a.sl = sl;
    a.timeout = 18;
    a.retry_cnt = 5;
    a.rnr_retry = 6;
    return a;
}
constexpr unsigned kChosen = IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY;

ibex_status_t init_with(RankCtx &ctx, const ibex_qp_attr_t *attr, unsigned mask, ibex_comm_t **comm) {
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.device = "udp:lo";
    cfg.timeout_ms = 20000;
    cfg.qp_attr = attr;
    cfg.qp_attr_mask = mask;
    return ibex_comm_init_rank(comm, ctx.nranks, &ctx.id, ctx.rank, &cfg);
}

// Every QP of comm to another rank reads back the choice with level sl: how many, or -1
// (said) where one does not.
int check_qps(RankCtx &ctx, ibex_comm_t *comm, uint8_t sl, const char *which) {
    int seen = 0;
    for (int p = 0; p < comm->nranks; ++p) {
        ibex_qp_t *qp = comm->exec.qp_to(p);
        if (!qp) continue;
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        if (ibex_query_qp(qp, &a) != IBEX_OK) {
            ctx.say("rank %d, %s: query of the QP to rank %d failed: %s", ctx.rank, which, p, ibex_last_error());
            return -1;
        }
        if (a.qp_state != IBEX_QPS_RTS || a.traffic_class != 104 || a.sl != sl || a.timeout != 18 ||
            a.retry_cnt != 5 || a.rnr_retry != 6) {
            ctx.say("rank %d, %s, QP to rank %d: state %d, traffic class %u, sl %u, timeout %u, retry %u, rnr %u",
                    ctx.rank, which, p, a.qp_state, a.traffic_class, a.sl, a.timeout, a.retry_cnt, a.rnr_retry);
            return -1;
        }
        ++seen;
    }
    return seen;
}

// over_shm: the ranks of this host reach each other over the shm provider, else over the
// udp port; both must take the choice.
int connected_body(RankCtx &ctx, bool over_shm) {
    ::setenv("IBEX_SHM", over_shm ? "1" : "0", 1);
    ::setenv("IBEX_FASTBOX_MAX", "0", 1);
    const ibex_qp_attr_t a = chosen(3);
    ibex_comm_t *comm = nullptr;
    RANK_CHECK_OK(ctx, init_with(ctx, &a, kChosen, &comm));
    const int seen = check_qps(ctx, comm, 3, "the communicator");
    RANK_CHECK(ctx, seen > 0, "rank %d: %s", ctx.rank, seen == 0 ? "no QP to any peer" : "a QP without the choice");
    // an odd count of floats, several slices long, the exact sums
    const size_t count = (size_t(1) << 20) / sizeof(float) + 13;
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(i % 97 + 10 * ctx.rank);
    RANK_CHECK_OK(ctx, ibex_allreduce(v.data(), v.data(), count, IBEX_F32, IBEX_SUM, comm, nullptr));
    const int n = ctx.nranks;
    for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(n * static_cast<int>(i % 97) + 10 * n * (n - 1) / 2);
        RANK_CHECK(ctx, v[i] == want, "rank %d: element %zu is %g, want %g", ctx.rank, i, v[i], want);
    }
    // A split keeps its parent's choice (the even ranks, and the odd ones).
    ibex_comm_t *half = nullptr;
    RANK_CHECK_OK(ctx, ibex_comm_split(comm, ctx.rank % 2, ctx.rank, &half));
    RANK_CHECK(ctx, half != nullptr, "rank %d: no split communicator", ctx.rank);
    RANK_CHECK(ctx, check_qps(ctx, half, 3, "the split") >= 0, "rank %d: a QP of the split without the choice",
               ctx.rank);
    int half_size = 0;
    RANK_CHECK_OK(ctx, ibex_comm_size(half, &half_size));
    std::vector<int32_t> w(4099, ctx.rank);
    RANK_CHECK_OK(ctx, ibex_allreduce(w.data(), w.data(), w.size(), IBEX_I32, IBEX_SUM, half, nullptr));
    int want_half = 0;
    for (int r = ctx.rank % 2; r < n; r += 2) want_half += r;
    RANK_CHECK(ctx, w[0] == want_half && w.back() == want_half, "rank %d: split sum %d, want %d", ctx.rank, w[0],
               want_half);
    ctx.say("rank %d: %d QPs with traffic class 104, sl 3, timeout 18, retry 5, rnr 6; split of %d", ctx.rank, seen,
            half_size);
    RANK_CHECK_OK(ctx, ibex_comm_destroy(half));
    RANK_CHECK_OK(ctx, ibex_comm_destroy(comm));
    return 0;
}

TEST(CommQpChoice, EveryQpOverTheUdpPortAndOfItsSplitsCarriesIt) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(4, [](RankCtx &ctx) { return connected_body(ctx, false); }),
                                  true);
}

TEST(CommQpChoice, EveryQpOverShmCarriesIt) {
    ibex::test::expect_all_passed(ibex::test::run_ranks(3, [](RankCtx &ctx) { return connected_body(ctx, true); }),
                                  true);
}

// Rank 2 asks for service level 2, the others for 3: init fails on every rank, in bounded
// time, with the same detail naming rank 0's choice and rank 2's.
TEST(CommQpChoice, RanksThatChoseDifferentlyAllFailNamingBoth) {
    const auto out = ibex::test::run_ranks(3, [](RankCtx &ctx) {
        const ibex_qp_attr_t a = chosen(ctx.rank == 2 ? 2 : 3);
        ibex_comm_t *comm = nullptr;
        const ibex_status_t st = init_with(ctx, &a, kChosen, &comm);
        RANK_CHECK(ctx, st == IBEX_ERR_INVALID_ARGUMENT, "rank %d: init gave %s", ctx.rank, ibex_strerror(st));
        RANK_CHECK(ctx, comm == nullptr, "rank %d: a communicator came back", ctx.rank);
        const std::string d = ibex_last_error();
        RANK_CHECK(ctx,
                   d.find("rank 0 connects its QPs with traffic class 104, sl 3, timeout 18, retry_cnt 5, rnr_retry 6, "
                          "rank 2 with traffic class 104, sl 2,") != std::string::npos,
                   "rank %d: %s", ctx.rank, d.c_str());
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

// A rank with no choice beside ranks with one is a difference too.
TEST(CommQpChoice, NoChoiceBesideAChoiceIsADifference) {
    const auto out = ibex::test::run_ranks(2, [](RankCtx &ctx) {
        const ibex_qp_attr_t a = chosen(3);
        ibex_comm_t *comm = nullptr;
        const ibex_status_t st = init_with(ctx, &a, ctx.rank == 0 ? 0u : unsigned(IBEX_QP_SL), &comm);
        RANK_CHECK(ctx, st == IBEX_ERR_INVALID_ARGUMENT, "rank %d: init gave %s", ctx.rank, ibex_strerror(st));
        const std::string d = ibex_last_error();
        RANK_CHECK(ctx, d.find("rank 0 connects its QPs with defaults, rank 1 with sl 3 ") != std::string::npos,
                   "rank %d: %s", ctx.rank, d.c_str());
        return 0;
    });
    ibex::test::expect_all_passed(out);
}

// Refused before the rendezvous: no peer is needed to see it.
TEST(CommQpChoice, ABadChoiceIsRefusedBeforeAnyRankIsReached) {
    ibex_unique_id_t id{};
    ASSERT_EQ(ibex_get_unique_id(&id), IBEX_OK) << ibex_last_error();
    const auto refused = [&](const ibex_qp_attr_t *attr, unsigned mask, const char *says) {
        ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
        cfg.device = "udp:lo";
        cfg.timeout_ms = 60000; // a refusal that waited for the peer would show as a hang
        cfg.qp_attr = attr;
        cfg.qp_attr_mask = mask;
        ibex_comm_t *comm = nullptr;
        EXPECT_EQ(ibex_comm_init_rank(&comm, 2, &id, 0, &cfg), IBEX_ERR_INVALID_ARGUMENT) << says;
        EXPECT_EQ(comm, nullptr);
        EXPECT_NE(std::string(ibex_last_error()).find(says), std::string::npos) << ibex_last_error();
    };
    ibex_qp_attr_t a = chosen(9);
    refused(&a, IBEX_QP_SL, "ibex_comm_config_t.qp_attr: sl 9: RoCE carries service levels 0..7");
    a.sl = 3;
    a.timeout = 32;
    refused(&a, IBEX_QP_TIMEOUT, "ibex_comm_config_t.qp_attr: timeout must be 0..31");
    a.path_mtu = static_cast<ibex_mtu_t>(6);
    refused(&a, IBEX_QP_PATH_MTU, "path_mtu 6 is not an IB MTU");
    refused(&a, IBEX_QP_STATE | IBEX_QP_SL, "names what the addresses decide");
    refused(&a, IBEX_QP_SQ_PSN, "attr_mask 0x20");
    refused(nullptr, IBEX_QP_SL, "attr is NULL but attr_mask is 0x1000");
    ibex_qp_attr_t foreign = chosen(3);
    foreign.magic = 0x12345678u;
    refused(&foreign, IBEX_QP_SL, "ibex_qp_attr_t: bad size/magic");
    ibex::bootstrap::release_unique_id(&id);
}

// A caller built against 0.8 passes the shorter struct: whatever lies past it is not read.
TEST(CommQpChoice, AnOlderConfigHasNoChoice) {
    ibex_unique_id_t id{};
    ASSERT_EQ(ibex_get_unique_id(&id), IBEX_OK) << ibex_last_error();
    ibex_comm_config_t cfg = IBEX_COMM_CONFIG_INIT;
    cfg.size = offsetof(ibex_comm_config_t, qp_attr);
    cfg.device = "udp:lo";
    cfg.qp_attr = reinterpret_cast<const ibex_qp_attr_t *>(uintptr_t(0x10)); // would crash if read
    cfg.qp_attr_mask = IBEX_QP_SL;
    ibex_comm_t *comm = nullptr;
    ASSERT_EQ(ibex_comm_init_rank(&comm, 1, &id, 0, &cfg), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(comm->opt.qp.mask, 0u);
    EXPECT_EQ(ibex_comm_destroy(comm), IBEX_OK);
    ibex::bootstrap::release_unique_id(&id);
}

} // namespace
