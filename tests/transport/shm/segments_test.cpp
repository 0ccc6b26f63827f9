// What the shm provider leaves in /dev/shm: nothing after a clean close, and a crashed
// process's segments only until the next process opens the provider.
#include <csignal>

#include "tests/transport/shm/shm_pair.h"
#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

TEST(ShmSegments, NothingLeftAfterACleanClose) {
    {
        ShmPair p;
        p.open(1 << 20, nullptr);
        ASSERT_FALSE(::testing::Test::HasFatalFailure());
        // Two contexts and two QPs: one segment each while open.
        EXPECT_EQ(segments_of(getpid()), 4);
        IBEX_ASSERT_OK(p.a.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, 4096, p.b.va(0), ibex_mr_rkey(p.b.mr)));
        ASSERT_EQ(p.a.wait(1).size(), 1u);
        // A reset starts a new incarnation: the old segment goes at once.
        ibex_qp_attr_t r = IBEX_QP_ATTR_INIT;
        r.qp_state = IBEX_QPS_RESET;
        IBEX_ASSERT_OK(ibex_modify_qp(p.a.qp, &r, IBEX_QP_STATE));
        EXPECT_EQ(segments_of(getpid()), 4);
    }
    EXPECT_EQ(segments_of(getpid()), 0) << "segments left in /dev/shm after every object was destroyed";
}

TEST(ShmSegments, ACrashedProcessIsReclaimedByTheNextOpen) {
    RemotePeer peer;
    PeerConfig cfg;
    cfg.device = "shm";
    ASSERT_TRUE(peer.start(cfg)) << peer.error();
    const pid_t child = peer.process().pid();
    EXPECT_EQ(segments_of(child), 2) << "the child's context and QP";
    ::kill(child, SIGKILL);
    EXPECT_EQ(peer.process().wait_exit(5000), 256 + SIGKILL);
    EXPECT_EQ(segments_of(child), 2) << "a killed process cannot clean up after itself";
    Endpoint next;
    next.open(4096, "shm");
    EXPECT_EQ(segments_of(child), 0) << "opening the provider reclaims the dead process's segments";
    EXPECT_EQ(segments_of(getpid()), 2) << "and keeps its own";
}

} // namespace
