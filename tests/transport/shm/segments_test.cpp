// What the shm provider leaves in /dev/shm: nothing after a clean close, and a crashed
// process's segments only until the next process opens the provider.
#include <csignal>
#include <cstring>

#include "tests/support/child_process.h"
#include "tests/transport/shm/shm_pair.h"
#include "tests/transport/soft/rc/peer.h"
#include "transport/shm/segment.h"

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

// Both ends of a pair in one process share one mapping of each segment; the name still
// goes with its creator, and a forked child maps the segment afresh.
TEST(ShmSegments, ASegmentThisProcessMadeIsMappedOnce) {
    using ibex::shm::Segment;
    const std::string name = ibex::shm::ctx_segment_name(static_cast<uint32_t>(getpid()), 0xfffffff0u);
    Segment made;
    IBEX_ASSERT_OK(made.create(name, 4096));
    std::memcpy(made.addr(), "ibex", 5);

    Segment seen;
    IBEX_ASSERT_OK(seen.open(name, 4096));
    EXPECT_EQ(seen.addr(), made.addr()) << "the creator's mapping, not a second one";
    Segment too_long;
    EXPECT_EQ(too_long.open(name, 8192), IBEX_ERR_REMOTE) << "a segment shorter than asked is refused";

    // A child of this process has its own pid: it maps the segment by name, elsewhere.
    ChildProcess child;
    ASSERT_TRUE(child.start(
        [&](int) {
            Segment s;
            if (s.open(name, 4096) != IBEX_OK) return 1;
            if (s.addr() == made.addr()) return 2;
            return std::memcmp(s.addr(), "ibex", 5) == 0 ? 0 : 3;
        },
        30));
    EXPECT_EQ(child.wait_exit(10000), 0) << "1: no segment, 2: the inherited mapping, 3: other bytes";

    // The creator lets go: the name is gone at once, the opener's mapping stays valid.
    made.release();
    EXPECT_EQ(std::memcmp(seen.addr(), "ibex", 5), 0);
    Segment late;
    EXPECT_EQ(late.open(name, 4096), IBEX_ERR_REMOTE) << "opened after its creator unlinked it";
    seen.release();
    EXPECT_FALSE(seen.mapped());
}

} // namespace
