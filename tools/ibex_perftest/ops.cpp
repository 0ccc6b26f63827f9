#include "tools/ibex_perftest/ops.h"

#include "tools/ibex_perftest/rdma.h"

namespace ibex::perftest {

ibex_send_wr_t measured_wr(const Options &o, const KeyRecord &peer, const uint8_t *local, uint64_t size, uint32_t lkey,
                           ibex_sge_t *sge) {
    *sge = ibex_sge_t{reinterpret_cast<uintptr_t>(local), static_cast<uint32_t>(size), lkey};
    ibex_send_wr_t wr{};
    wr.sg_list = sge;
    wr.num_sge = 1;
    switch (o.test.verb) {
    case Verb::send: wr.opcode = IBEX_WR_SEND; return wr;
    case Verb::write: wr.opcode = IBEX_WR_RDMA_WRITE; break;
    case Verb::read: wr.opcode = IBEX_WR_RDMA_READ; break;
    case Verb::atomic: {
        const bool add = o.atomic_type == AtomicType::fetch_and_add;
        wr.opcode = add ? IBEX_WR_ATOMIC_FETCH_AND_ADD : IBEX_WR_ATOMIC_CMP_AND_SWP;
        wr.wr.atomic.remote_addr = peer.vaddr;
        wr.wr.atomic.rkey = peer.rkey;
        wr.wr.atomic.compare_add = add ? 1 : 0;
        wr.wr.atomic.swap = 1;
        return wr;
    }
    }
    wr.wr.rdma.remote_addr = peer.vaddr;
    wr.wr.rdma.rkey = peer.rkey;
    return wr;
}

bool poll_completions(ibex_cq_t *cq, int max, ibex_wc_t *wc, int *n, std::string *err) {
    const ibex_status_t st = ibex_poll_cq(cq, max, wc, n);
    if (st != IBEX_OK) {
        *err = ibex_error("ibex_poll_cq", st);
        return false;
    }
    for (int i = 0; i < *n; ++i) {
        if (wc[i].status != IBEX_WC_SUCCESS) {
            *err = std::string("completion with error ") + ibex_wc_status_str(wc[i].status);
            return false;
        }
    }
    return true;
}

bool post_send_one(ibex_qp_t *qp, ibex_send_wr_t &wr, std::string *err) {
    const ibex_status_t st = ibex_post_send(qp, &wr, nullptr);
    if (st != IBEX_OK) *err = ibex_error("ibex_post_send", st);
    return st == IBEX_OK;
}

bool post_recv_one(ibex_qp_t *qp, const uint8_t *addr, size_t len, uint32_t lkey, uint64_t wr_id, std::string *err) {
    ibex_sge_t sge{reinterpret_cast<uintptr_t>(addr), static_cast<uint32_t>(len), lkey};
    ibex_recv_wr_t wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    const ibex_status_t st = ibex_post_recv(qp, &wr, nullptr);
    if (st != IBEX_OK) *err = ibex_error("ibex_post_recv", st);
    return st == IBEX_OK;
}

} // namespace ibex::perftest
