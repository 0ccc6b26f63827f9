// ibex_rkey_ptr: a peer's ibex_mem_alloc memory reached by plain loads and stores over a
// connected shm QP; everything else refused with the reason, and other devices answer
// "not supported".
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/support/qp_endpoint.h"
#include "tests/transport/shm/shm_pair.h"
#include "tests/transport/soft/rc/peer.h"

using namespace ibex::test;

namespace {

constexpr size_t kRegion = 8192;
constexpr unsigned kRw = IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_WRITE;

TEST(ShmRkeyPtr, LoadsAndStoresReachThePeersAllocation) {
    ShmPair p;
    p.open(4096, nullptr);
    AllocRegion r(p.b.pd, kRegion, IBEX_ACCESS_LOCAL_WRITE | kRw);
    ASSERT_TRUE(r.ok());
    fill_pattern(r.bytes(), kRegion, 7);
    void *ptr = nullptr;
    ASSERT_EQ(ibex_rkey_ptr(p.a.qp, r.at(1000), ibex_mr_rkey(r.mr), 3000, kRw, &ptr), IBEX_OK) << ibex_last_error();
    ASSERT_NE(ptr, nullptr);
    auto *q = static_cast<uint8_t *>(ptr);
    // What the peer wrote is read through the pointer, and what is stored through it is
    // in the peer's memory: the same pages, no copy.
    EXPECT_EQ(std::memcmp(q, r.bytes() + 1000, 3000), 0);
    std::memset(q, 0x5a, 3000);
    EXPECT_EQ(check_const(r.bytes() + 1000, 3000, 0x5a), 0u);
    EXPECT_EQ(check_pattern(r.bytes(), 1000, 7), 0u) << "bytes before the range changed";
    // Read-only access is enough to read.
    void *ro = nullptr;
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, r.at(0), ibex_mr_rkey(r.mr), kRegion, IBEX_ACCESS_REMOTE_READ, &ro), IBEX_OK);
    EXPECT_EQ(static_cast<uint8_t *>(ro) + 1000, q);
}

TEST(ShmRkeyPtr, MoreAllocationsThanThePeersSocketQueuesAreAllMapped) {
    // Each allocation's fd goes to the peer in a datagram; the peer's socket queues only
    // net.unix.max_dgram_qlen of them until it drains. Those refused are offered again
    // from the owner's progress pass, so every region is mapped in the end.
    int qlen = 10;
    if (FILE *f = std::fopen("/proc/sys/net/unix/max_dgram_qlen", "r")) {
        if (std::fscanf(f, "%d", &qlen) != 1) qlen = 10;
        std::fclose(f);
    }
    ShmPair p;
    p.open(4096, nullptr);
    std::vector<std::unique_ptr<AllocRegion>> regions;
    for (int i = 0; i < qlen + 30; ++i) {
        regions.push_back(std::make_unique<AllocRegion>(p.b.pd, 4096, IBEX_ACCESS_LOCAL_WRITE | kRw));
        ASSERT_TRUE(regions.back()->ok());
        std::memset(regions.back()->bytes(), i & 0xff, 4096);
    }
    for (size_t i = 0; i < regions.size(); ++i) {
        void *ptr = nullptr;
        ASSERT_EQ(ibex_rkey_ptr(p.a.qp, regions[i]->at(0), ibex_mr_rkey(regions[i]->mr), 4096, kRw, &ptr), IBEX_OK)
            << "region " << i << " of " << regions.size() << ": " << ibex_last_error();
        EXPECT_EQ(check_const(static_cast<uint8_t *>(ptr), 4096, static_cast<uint8_t>(i & 0xff)), 0u) << "region " << i;
    }
}

TEST(ShmRkeyPtr, KeysRangesAndRightsAreCheckedLikeAWrite) {
    ShmPair p;
    p.open(4096, nullptr);
    AllocRegion rw(p.b.pd, kRegion, IBEX_ACCESS_LOCAL_WRITE | kRw);
    AllocRegion ro(p.b.pd, kRegion, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_READ);
    ASSERT_TRUE(rw.ok() && ro.ok());
    struct Case {
        const char *what;
        uint64_t addr;
        uint32_t rkey;
        size_t len;
        unsigned access;
    };
    for (const Case &c : {Case{"bad rkey", rw.at(0), ibex_mr_rkey(rw.mr) ^ 0x5500u, 64, kRw},
                          Case{"past the end", rw.at(kRegion - 100), ibex_mr_rkey(rw.mr), 200, kRw},
                          Case{"before the start", rw.at(0) - 64, ibex_mr_rkey(rw.mr), 128, kRw},
                          Case{"no remote write", ro.at(0), ibex_mr_rkey(ro.mr), 64, IBEX_ACCESS_REMOTE_WRITE}}) {
        SCOPED_TRACE(c.what);
        void *ptr = reinterpret_cast<void *>(1);
        EXPECT_EQ(ibex_rkey_ptr(p.a.qp, c.addr, c.rkey, c.len, c.access, &ptr), IBEX_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(ptr, nullptr);
        EXPECT_NE(std::strstr(ibex_last_error(), "rkey"), nullptr) << ibex_last_error();
    }
}

TEST(ShmRkeyPtr, OrdinaryMemoryIsNotMappedButStillReachableByWrite) {
    ShmPair p;
    p.open(4096, nullptr);
    // b's endpoint buffer is a std::vector: registered, reachable by WRITE (cma), not mapped.
    void *ptr = nullptr;
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, p.b.va(0), ibex_mr_rkey(p.b.mr), 64, kRw, &ptr), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_NE(std::strstr(ibex_last_error(), "ibex_mem_alloc"), nullptr) << ibex_last_error();
    EXPECT_EQ(ptr, nullptr);
}

TEST(ShmRkeyPtr, ArgumentsAndQpStateAreChecked) {
    ShmPair p;
    p.open(4096, nullptr);
    AllocRegion r(p.b.pd, kRegion, IBEX_ACCESS_LOCAL_WRITE | kRw);
    ASSERT_TRUE(r.ok());
    const uint32_t key = ibex_mr_rkey(r.mr);
    void *ptr = nullptr;
    EXPECT_EQ(ibex_rkey_ptr(nullptr, r.at(0), key, 64, kRw, &ptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, r.at(0), key, 64, kRw, nullptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, r.at(0), key, 0, kRw, &ptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, r.at(0), key, 64, 0, &ptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, r.at(0), key, 64, IBEX_ACCESS_LOCAL_WRITE, &ptr), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(ibex_last_error(), "access"), nullptr) << ibex_last_error();
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, ~uint64_t(0) - 10, key, 64, kRw, &ptr), IBEX_ERR_INVALID_ARGUMENT);
    // A QP taken back to RESET is not connected.
    ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
    attr.qp_state = IBEX_QPS_RESET;
    ASSERT_EQ(ibex_modify_qp(p.a.qp, &attr, IBEX_QP_STATE), IBEX_OK) << ibex_last_error();
    EXPECT_EQ(ibex_rkey_ptr(p.a.qp, r.at(0), key, 64, kRw, &ptr), IBEX_ERR_INVALID_STATE);
    EXPECT_EQ(ptr, nullptr);
}

TEST(RkeyPtr, TheUdpDeviceMapsNothing) {
    Endpoint a, b;
    a.open(4096, "udp:lo");
    b.open(4096, "udp:lo");
    ASSERT_TRUE(a.ok() && b.ok());
    connect_pair(a, b);
    void *ptr = nullptr;
    EXPECT_EQ(ibex_rkey_ptr(a.qp, b.va(0), ibex_mr_rkey(b.mr), 64, kRw, &ptr), IBEX_ERR_NOT_SUPPORTED);
    EXPECT_NE(std::strstr(ibex_last_error(), "maps no peer memory"), nullptr) << ibex_last_error();
}

} // namespace
