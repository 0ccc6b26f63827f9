// Test helpers for bringing RC QPs up by hand (RESET -> INIT -> RTR -> RTS with chosen
// PSNs and path MTU) and for checking completions, over the in-process Endpoint helpers.
#pragma once

#include <gtest/gtest.h>
#include <ibex/ibex.h>

#include <string>
#include <vector>

#include "tests/support/endpoint.h"

namespace ibex::test {

struct BringUp {
    uint32_t sq_psn = 0;
    uint32_t rq_psn = 0;
    ibex_mtu_t mtu = IBEX_MTU_1024;
    uint8_t timeout = 12; // 16.8 ms: quick recovery under fault injection, yet 8 tries (134 ms)
                          // outlast a progress thread descheduled on a loaded 2-core host
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
};

// RESET -> INIT -> RTR -> RTS towards `remote` (its QPN and address; its PSN is ignored:
// the receive PSN is b.rq_psn).
inline ibex_status_t bring_up(ibex_qp_t *qp, const ibex_ep_addr_t &remote, const BringUp &b) {
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.qp_state = IBEX_QPS_INIT;
    a.qp_access_flags = kAllAccess;
    ibex_status_t st = ibex_modify_qp(qp, &a, IBEX_QP_STATE | IBEX_QP_ACCESS_FLAGS);
    if (st != IBEX_OK) return st;
    a.qp_state = IBEX_QPS_RTR;
    a.dest = remote;
    a.path_mtu = b.mtu;
    a.rq_psn = b.rq_psn;
    st = ibex_modify_qp(qp, &a, IBEX_QP_STATE | IBEX_QP_DEST | IBEX_QP_PATH_MTU | IBEX_QP_RQ_PSN);
    if (st != IBEX_OK) return st;
    a.qp_state = IBEX_QPS_RTS;
    a.sq_psn = b.sq_psn;
    a.timeout = b.timeout;
    a.retry_cnt = b.retry_cnt;
    a.rnr_retry = b.rnr_retry;
    return ibex_modify_qp(qp, &a,
                          IBEX_QP_STATE | IBEX_QP_SQ_PSN | IBEX_QP_TIMEOUT | IBEX_QP_RETRY_CNT | IBEX_QP_RNR_RETRY);
}

// Both directions start at `psn`: a's SQ and b's RQ, b's SQ and a's RQ.
inline void connect_at(Endpoint &a, Endpoint &b, uint32_t psn, BringUp opt = {}) {
    const ibex_ep_addr_t aa = a.addr(), ba = b.addr();
    opt.sq_psn = opt.rq_psn = psn;
    IBEX_ASSERT_OK(bring_up(a.qp, ba, opt));
    IBEX_ASSERT_OK(bring_up(b.qp, aa, opt));
}

inline ibex_status_t to_state(ibex_qp_t *qp, ibex_qp_state_t s) {
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    a.qp_state = s;
    return ibex_modify_qp(qp, &a, IBEX_QP_STATE);
}

inline uint32_t sq_psn_of(ibex_qp_t *qp) {
    ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
    EXPECT_EQ(ibex_query_qp(qp, &a), IBEX_OK);
    return a.sq_psn;
}

// Every completion succeeded and wr_ids are first, first+1, ... (in-order completion).
inline void expect_in_order_success(const std::vector<ibex_wc_t> &wc, size_t n, uint64_t first = 0) {
    ASSERT_EQ(wc.size(), n) << "completions missing";
    for (size_t i = 0; i < wc.size(); ++i) {
        ASSERT_EQ(wc[i].status, IBEX_WC_SUCCESS)
            << "wc " << i << " wr_id " << wc[i].wr_id << ": " << ibex_wc_status_str(wc[i].status);
        ASSERT_EQ(wc[i].wr_id, first + i) << "completion out of order at " << i;
    }
}

inline void fill_bytes(std::vector<uint8_t> &v, size_t off, size_t len, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345;
    for (size_t i = 0; i < len; ++i) {
        x = x * 1664525u + 1013904223u;
        v[off + i] = static_cast<uint8_t>(x >> 24);
    }
}

} // namespace ibex::test
