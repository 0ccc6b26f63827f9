// IBEX_PROGRESS_THREAD=0 takes the shm context's progress thread away, as on the soft
// providers: no thread is started, and requests still complete, served by the two
// sides' own polls.
#include "tests/support/threads.h"
#include "tests/transport/shm/shm_pair.h"
#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

int threads_of_this_process() { return static_cast<int>(process_threads().size()); }

int threads_started_by_opening_shm() {
    const int before = threads_of_this_process();
    ibex_context_t *ctx = nullptr;
    EXPECT_EQ(ibex_open_device("shm", nullptr, &ctx), IBEX_OK) << ibex_last_error();
    const int after = threads_of_this_process();
    if (ctx) ibex_close_device(ctx);
    return after - before;
}

TEST(ShmProgressThread, OneByDefault) { EXPECT_EQ(threads_started_by_opening_shm(), 1); }

TEST(ShmProgressThread, NoneWhenTheEnvironmentSaysSo) {
    setenv("IBEX_PROGRESS_THREAD", "0", 1);
    const int started = threads_started_by_opening_shm();
    unsetenv("IBEX_PROGRESS_THREAD");
    EXPECT_EQ(started, 0);
}

// A SEND through the ring (the target must copy it out: no shortcut) completes on both
// sides with neither context running a thread, each side's wait driving its own context.
TEST(ShmProgressThread, RequestsCompleteByPollingAlone) {
    setenv("IBEX_PROGRESS_THREAD", "0", 1);
    ShmPair p;
    p.open(1 << 16, "ring");
    unsetenv("IBEX_PROGRESS_THREAD");
    ASSERT_TRUE(p.a.ok() && p.b.ok());
    fill_pattern(p.a.buf.data(), 5000, 4);
    IBEX_ASSERT_OK(p.b.post_recv(1, 0, 5000));
    IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_SEND, 2, 0, 5000, 0, 0));
    std::vector<ibex_wc_t> sent, got;
    for (int turn = 0; turn < 200000 && (sent.empty() || got.empty()); ++turn) {
        ibex_wc_t wc;
        int n = 0;
        if (sent.empty() && ibex_poll_cq(p.a.cq, 1, &wc, &n) == IBEX_OK && n) sent.push_back(wc);
        if (got.empty() && ibex_poll_cq(p.b.cq, 1, &wc, &n) == IBEX_OK && n) got.push_back(wc);
    }
    ASSERT_EQ(sent.size(), 1u);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(sent[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(sent[0].status);
    EXPECT_EQ(got[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(got[0].status);
    EXPECT_EQ(check_pattern(p.b.buf.data(), 5000, 4), 0u);
}

} // namespace
