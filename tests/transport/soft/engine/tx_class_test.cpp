// What the engine hands its port for each QP's packets: the traffic class (DSCP, with
// ECT(0)) and the service level, which a port with a VLAN puts in the tag's priority
// (transport/soft/dpdk/frame.cpp; frame_test checks the tag).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include <ibex/ibex.h>

#include "tests/support/endpoint.h"
#include "transport/soft/codec/roce.h"
#include "transport/provider.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/port.h"

namespace ibex::soft {
namespace {

constexpr uint32_t kLocalIp = 0x0a000001, kPeerIp = 0x0a000002;

class CapturePort final : public Port {
public:
    NetAddr local() const override { return {kLocalIp, roce::kUdpPort}; }
    uint8_t max_mtu() const override { return IBEX_MTU_4096; }
    void send(std::span<const TxPacket> pkts) override {
        for (const TxPacket &p : pkts) sent.push_back({p.tos, p.pcp});
    }
    int recv(std::span<RxPacket>) override { return 0; }
    int wait_fd() const override { return -1; }
    struct Class {
        uint8_t tos;
        int8_t pcp;
    };
    std::vector<Class> sent;
};

struct Case {
    unsigned mask; // what the QP is connected with
    uint8_t traffic_class, sl;
    uint8_t want_tos; // what its packets reach the port with
    int8_t want_pcp;
};

// A context with `path` as its new QPs' defaults (IBEX_TRAFFIC_CLASS, IBEX_SL); one QP per
// case posts a WRITE, and every packet it hands the port carries the case's class and level.
void check(const PathDefaults &path, std::initializer_list<Case> cases) {
    EngineConfig cfg;
    cfg.progress_thread = false;
    cfg.path = path;
    auto owned = std::make_unique<CapturePort>();
    CapturePort *port = owned.get();
    auto *ctx = new SoftContext(std::move(owned), cfg);
    ctx->ops = &kSoftProviderOps;
    ctx->device_name = "capture";
    ibex_pd_t *pd = nullptr;
    ibex_cq_t *cq = nullptr;
    IBEX_ASSERT_OK(ibex_alloc_pd(ctx, &pd));
    IBEX_ASSERT_OK(ibex_create_cq(ctx, 64, &cq));
    std::vector<uint8_t> buf(4096, 0x42);
    ibex_mr_t *mr = nullptr;
    IBEX_ASSERT_OK(ibex_reg_mr(pd, buf.data(), buf.size(), IBEX_ACCESS_LOCAL_WRITE, &mr));

    ibex_ep_addr_t peer{};
    peer.gid[10] = peer.gid[11] = 0xff;
    roce::put32(peer.gid + 12, kPeerIp);
    peer.udp_port = roce::kUdpPort;
    peer.mtu = IBEX_MTU_4096;
    peer.psn = 100;
    std::vector<ibex_qp_t *> qps;
    for (const Case &c : cases) {
        ibex_qp_init_attr_t ia = IBEX_QP_INIT_ATTR_INIT;
        ia.send_cq = ia.recv_cq = cq;
        ibex_qp_t *qp = nullptr;
        IBEX_ASSERT_OK(ibex_create_qp(pd, &ia, &qp));
        qps.push_back(qp);
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        a.traffic_class = c.traffic_class;
        a.sl = c.sl;
        peer.qpn = 0x100 + uint32_t(qps.size());
        IBEX_ASSERT_OK(ibex_qp_connect_attr(qp, &peer, &a, c.mask));
        port->sent.clear();
        ibex_sge_t s{reinterpret_cast<uintptr_t>(buf.data()), 1000, ibex_mr_lkey(mr)};
        ibex_send_wr_t wr{};
        wr.sg_list = &s;
        wr.num_sge = 1;
        wr.opcode = IBEX_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = 0x1000;
        wr.wr.rdma.rkey = 7;
        IBEX_ASSERT_OK(ibex_post_send(qp, &wr, nullptr));
        IBEX_ASSERT_OK(ibex_progress(ctx));
        ASSERT_FALSE(port->sent.empty()) << "the WRITE never reached the port";
        for (const CapturePort::Class &k : port->sent) {
            EXPECT_EQ(k.tos, c.want_tos) << "QP " << qps.size();
            EXPECT_EQ(k.pcp, c.want_pcp) << "QP " << qps.size();
        }
    }
    for (ibex_qp_t *qp : qps) IBEX_ASSERT_OK(ibex_destroy_qp(qp));
    IBEX_ASSERT_OK(ibex_dereg_mr(mr));
    IBEX_ASSERT_OK(ibex_destroy_cq(cq));
    IBEX_ASSERT_OK(ibex_dealloc_pd(pd));
    IBEX_ASSERT_OK(ibex_close_device(ctx));
}

TEST(SoftTxClass, EachQpsTrafficClassAndServiceLevelReachThePort) {
    constexpr unsigned kBoth = IBEX_QP_TRAFFIC_CLASS | IBEX_QP_SL;
    check({}, {
                  {kBoth, 104, 5, 104 | 2, 5},
                  {IBEX_QP_SL, 0, 0, 2, 0}, // level 0 chosen: the port's priority does not apply
                  {0, 0, 0, 2, -1},         // nothing chosen: the port's
              });
    PathDefaults from_env;
    from_env.traffic_class = 0x60;
    from_env.sl = 4;
    check(from_env, {
                        {kBoth, 104, 5, 104 | 2, 5}, // the QP's own win
                        {kBoth, 0, 0, 2, 0},
                        {0, 0, 0, 0x60 | 2, 4}, // nothing chosen: the context's
                    });
}

} // namespace
} // namespace ibex::soft
