// Test helper: an RDMA WRITE, a READ and a SEND between a local endpoint and a RemotePeer
// (another process, another namespace), every byte checked. The buffers (both of
// buf_bytes) are cut in quarters: WRITE into the peer's first, READ from its second into
// the local third, SEND from the local fourth into the peer's fourth.
#pragma once

#include <cstring>

#include <gtest/gtest.h>

#include "tests/support/endpoint.h"
#include "tests/transport/soft/rc/peer.h"

namespace ibex::test {

struct ExchangeSizes {
    uint32_t write = 65536 + 5; // many MTU-sized packets and a short last one
    uint32_t read = 40000;
    uint32_t send = 10000;
    int timeout_ms = 20000;
};

inline void checked_exchange(Endpoint &ep, RemotePeer &peer, size_t buf_bytes, const ExchangeSizes &n = {}) {
    const uint64_t q = buf_bytes / 4;
    ASSERT_LE(std::max({n.write, n.read, n.send}), q) << "each transfer fits a quarter of the buffers";

    fill_pattern(ep.buf.data(), n.write, 11);
    ASSERT_EQ(peer.fill_const(0, n.write, 0), 0);
    IBEX_ASSERT_OK(ep.post_rdma(IBEX_WR_RDMA_WRITE, 1, 0, n.write, peer.va(0), peer.rkey()));
    auto wc = ep.wait(1, n.timeout_ms);
    ASSERT_EQ(wc.size(), 1u) << "no completion for the WRITE";
    ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    uint64_t first = 0;
    EXPECT_EQ(peer.verify_pattern(0, n.write, 11, 0, &first), 0) << "first bad byte at " << first;

    ASSERT_EQ(peer.fill_pattern(q, n.read, 12), 0);
    std::memset(ep.buf.data() + 2 * q, 0, n.read);
    IBEX_ASSERT_OK(ep.post_rdma(IBEX_WR_RDMA_READ, 2, 2 * q, n.read, peer.va(q), peer.rkey()));
    wc = ep.wait(1, n.timeout_ms);
    ASSERT_EQ(wc.size(), 1u) << "no completion for the READ";
    ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    EXPECT_EQ(check_pattern(ep.buf.data() + 2 * q, n.read, 12), 0u);

    ASSERT_EQ(peer.post_recv(7, {{3 * q, q}}), 0);
    fill_pattern(ep.buf.data() + 3 * q, n.send, 13);
    IBEX_ASSERT_OK(ep.post_rdma(IBEX_WR_SEND, 3, 3 * q, n.send, 0, 0)); // a SEND names no remote address
    wc = ep.wait(1, n.timeout_ms);
    ASSERT_EQ(wc.size(), 1u) << "no completion for the SEND";
    ASSERT_EQ(wc[0].status, IBEX_WC_SUCCESS) << ibex_wc_status_str(wc[0].status);
    auto rwc = peer.wait_recv(1, n.timeout_ms);
    ASSERT_EQ(rwc.size(), 1u);
    EXPECT_EQ(rwc[0].status, IBEX_WC_SUCCESS);
    EXPECT_EQ(rwc[0].byte_len, n.send);
    EXPECT_EQ(peer.verify_pattern(3 * q, n.send, 13), 0);
}

} // namespace ibex::test
