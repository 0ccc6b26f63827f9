// The simulator and ibex_switch run the same congestion point, so driven by the same
// packet trace they make the same decisions. The simulator runs a 2-to-1 incast with
// DCQCN and records every packet its switch is offered and every departure's CE mark;
// ibex_switch's Switch (in-memory ports) is then offered the same packets at the same
// times, polled at the same departure times, and must mark exactly the same packets.
// The receivers' notification points, given each switch's marks at the same arrival
// times, must then send the same CNPs. ibex_switch is configured as a simulated port is:
// no catch-up burst (a simulated port is never late) and the same seed.
#include <map>

#include <gtest/gtest.h>

#include "congestion/dcqcn/notification_point.h"
#include "congestion/dcqcn/params.h"
#include "tests/congestion/sim/sim_fixture.h"
#include "tests/tools/ibex_switch/fake_io.h"
#include "tools/ibex_switch/switch.h"

using namespace ibex;
using namespace ibex::sim;
using namespace ibex::sw::test;

namespace {

struct TraceEvent {
    uint64_t t;
    bool offer;        // else a departure
    uint32_t egress, ingress, bytes;
    bool ect, ce;
};

struct SimRecord {
    std::vector<TraceEvent> trace;
    std::map<uint32_t, std::vector<bool>> ce_by_flow, cnp_by_flow; // by ingress port / sender host
    std::map<uint32_t, std::vector<uint64_t>> rx_by_flow;          // arrival times at the receiver
    std::vector<bool> departures_ce;
    uint64_t seed = 0;
    cc::CongestionPointConfig cp;
};

constexpr double kGbps = 10;
constexpr uint64_t kDelay = 2000;

SimRecord run_sim(cc::MarkAt mark_at) {
    FabricShape s;
    s.hosts = 3;
    s.host_gbps = kGbps;
    s.delay_ns = kDelay;
    SimConfig cfg;
    cfg.sw.red = {20u << 10, 100u << 10, 0.2}; // plenty of marks in a short run
    cfg.sw.mark_at = mark_at;
    cfg.sw.buffer_bytes = 4u << 20;
    EXPECT_TRUE(cc::dcqcn::preset_params("paper", kGbps * 1000, cfg.dcqcn_params));
    auto sim = test::make_sim(build_star(s), cfg);
    SimRecord rec;
    rec.cp = sim->switch_point(0).config();
    // Hosts 0 and 1 into host 2; the star's switch has port h facing host h.
    const uint32_t q0 = sim->add_qp(0, 2), q1 = sim->add_qp(1, 2);
    sim->add_message(q0, 3u << 20);
    sim->add_message(q1, 3u << 20, {}, 7000);
    sim->on_offer = [&](uint64_t now, uint32_t, uint32_t egress, const cc::PacketMeta &m) {
        rec.trace.push_back({now, true, egress, m.ingress, m.bytes, m.ect, false});
    };
    sim->on_depart = [&](uint64_t now, uint32_t, uint32_t egress, const cc::Departure &d) {
        rec.trace.push_back({now, false, egress, d.packet.ingress, d.packet.bytes, d.packet.ect, d.ce});
        if (egress == 2) rec.departures_ce.push_back(d.ce);
    };
    sim->on_receive = [&](uint64_t now, uint32_t qp, bool ce, bool cnp) {
        const uint32_t flow = qp == q0 ? 0 : 1;
        rec.ce_by_flow[flow].push_back(ce);
        rec.cnp_by_flow[flow].push_back(cnp);
        rec.rx_by_flow[flow].push_back(now);
    };
    EXPECT_TRUE(sim->run().all_done);
    return rec;
}

void check_same_decisions(cc::MarkAt mark_at) {
    const SimRecord rec = run_sim(mark_at);
    sw::SwitchConfig cfg;
    static_cast<cc::CongestionPointConfig &>(cfg) = rec.cp;
    cfg.link_mbps = kGbps * 1000;
    cfg.burst_ns = 0;
    cfg.sample_ns = 1'000'000'000;
    sw::Switch swc(cfg);
    uint64_t clock = 0;
    std::vector<FakeIo *> io;
    std::vector<NetAddr> endpoint;
    for (uint32_t p = 0; p < 3; ++p) {
        endpoint.push_back({0x0a000001 + p, 4791});
        auto port = std::make_unique<FakeIo>(NetAddr{0x7f000001, uint16_t(5000 + p)});
        port->clock = &clock;
        io.push_back(port.get());
        swc.add_port(std::move(port), endpoint.back());
    }
    // Replay in the simulator's order: an offer puts the frame on the egress port's
    // receive path and polls at its time; a departure polls at its time.
    for (const TraceEvent &e : rec.trace) {
        clock = e.t;
        if (e.offer) {
            // Data towards host 2, and the CNPs host 2 sends back to 0 and 1.
            io[e.egress]->arrive(packet(e.bytes - 32, endpoint[e.ingress], io[e.egress]->local()), endpoint[e.ingress],
                                 e.ect ? 0x2 : 0x0);
        }
        swc.poll(e.t);
    }
    // ibex_switch sends each packet from its ingress port's address: one list per flow.
    std::vector<bool> switch_ce;
    std::map<uint32_t, std::vector<bool>> ce_by_flow;
    size_t total = 0;
    for (uint32_t f = 0; f < 2; ++f) {
        for (const Sent &s : io[f]->sent) ce_by_flow[f].push_back((s.tos & 3) == 3);
        total += io[f]->sent.size();
    }
    ASSERT_EQ(total, rec.departures_ce.size());
    size_t marked = 0;
    for (uint32_t f = 0; f < 2; ++f) {
        ASSERT_EQ(ce_by_flow[f], rec.ce_by_flow.at(f)) << "flow " << f;
        for (bool c : ce_by_flow[f]) marked += c;
    }
    // The trace is worth comparing: some packets marked, most not.
    EXPECT_GT(marked, 20u);
    EXPECT_LT(marked, total / 2);
    // CNPs: ibex's notification point fed the switch's marks at the arrival times.
    size_t cnps = 0;
    for (uint32_t f = 0; f < 2; ++f) {
        cc::dcqcn::NotificationPoint np(50'000);
        std::vector<bool> cnp;
        for (size_t i = 0; i < ce_by_flow[f].size(); ++i)
            cnp.push_back(ce_by_flow[f][i] && np.on_ce(rec.rx_by_flow.at(f)[i]));
        EXPECT_EQ(cnp, rec.cnp_by_flow.at(f)) << "flow " << f;
        for (bool c : cnp) cnps += c;
    }
    EXPECT_GT(cnps, 2u);
}

} // namespace

TEST(SimSameDecisions, MarkingOnDequeueAndCnpsMatchIbexSwitch) { check_same_decisions(cc::MarkAt::kDequeue); }

TEST(SimSameDecisions, MarkingOnEnqueueAndCnpsMatchIbexSwitch) { check_same_decisions(cc::MarkAt::kEnqueue); }
