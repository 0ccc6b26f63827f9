// DCQCN's fluid model (Zhu et al., "ECN or Delay", CoNEXT 2016) at its fixed point, against
// the packet-level simulator running ibex's DCQCN (congestion/dcqcn) and congestion point
// (congestion/switch) with the paper's 40 Gbit/s parameters: 1 KB packets, CNP interval
// tau = 50 us, alpha timer tau' = 55 us, rate timer T = 55 us, byte counter B = 10 MB,
// F = 5, R_AI = 40 Mbit/s, g = 1/256, Kmin = 5 KB, Kmax = 200 KB, Pmax = 1%.
//
// Derivation of the fixed point. The model, per flow, rates in packets/s, p the marking
// probability, R the flow's rate:
//   a = 1 - (1-p)^(tau R)                 (a CNP in a CNP interval)
//   b = p / ((1-p)^-B - 1),  c = b (1-p)^(F B)        (byte-counter events, past F)
//   d = p / ((1-p)^-(T R) - 1),  e = d (1-p)^(F T R)  (timer events, past F)
//   dalpha/dt = g/tau' [(1 - (1-p)^(tau' R)) - alpha]
//   dRt/dt = -(Rt - Rc) a / tau + R_AI R (c + e)
//   dRc/dt = -Rc alpha a / (2 tau) + (Rt - Rc) R (b + d) / 2
//   dq/dt  = N Rc - C
// Setting every derivative to 0: dq/dt = 0 gives Rc = R = C/N (the fair share);
// dalpha/dt = 0 gives alpha* = 1 - (1-p)^(tau' R); dRt/dt = 0 gives
// Rt - Rc = tau R_AI R (c + e) / a; putting that in dRc/dt = 0:
//   F(p) = alpha*(p) a(p)^2 / tau^2 - R_AI R (b + d)(c + e) = 0.
// F < 0 for small p (no cuts, increases win) and grows with p, so the root p* is found by
// bisection; the queue is then RED's inverse, q* = Kmin + p*/Pmax (Kmax - Kmin). Worked
// out (below, and checked by the first test): N = 2: p* = 0.080%, q* = 20.5 KB; N = 4:
// p* = 0.193%, q* = 42.7 KB. For N = 16, F(Pmax) < 0: no marking probability up to Pmax
// holds the rates, so the queue climbs to Kmax, where every packet is marked, and the
// model pins it there. In the packet simulation Kmax is likewise where the queue stops,
// but it does not stay: above Kmax every flow gets a CNP in the same interval, all 16 cut
// together and the queue drains (a limit cycle between empty and Kmax, as in the
// paper's packet-level runs with many flows). So for N = 16 the test asserts what
// separates it from N = 2 and 4: the queue's peaks reach Kmax and Kmax bounds them, and
// its mean lies above where 4 flows settle (for N = 2 the peaks stay well below Kmax).
//
// Tolerances. Throughput: each flow within 15% of C/N over the last 40 ms (DCQCN's rates
// oscillate around the fair share on the alpha time scale, 1/g x tau' = 14 ms; the model
// is an average). Queue: the time-averaged queue within 35% of q* (the fluid model
// averages over a sawtooth whose peak-to-peak is of the order of q* itself, and packets
// arrive in bursts the model smooths; Zhu et al. show packet simulation and model
// agreeing to that order). N = 16: the highest queue within [0.9, 1.3] x Kmax (the
// overshoot is what arrives in the feedback delay at 16 x 2.5 Gbit/s).
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "congestion/dcqcn/params.h"
#include "tests/congestion/sim/sim_fixture.h"

using namespace ibex::sim;
using namespace ibex::sim::test;

namespace {

constexpr double kPkt = 1024;                     // bytes
constexpr double kC = 40e9 / 8 / kPkt;            // packets/s
constexpr double kTau = 50e-6, kTauP = 55e-6, kT = 55e-6;
constexpr double kB = 10.0 * 1024 * 1024 / kPkt;  // packets
constexpr double kF = 5, kRai = 40e6 / 8 / kPkt;  // packets/s
constexpr double kKmin = 5 * 1024, kKmax = 200 * 1024, kPmax = 0.01;

double fixed_point_residual(double p, double r) {
    const double l = std::log1p(-p);
    const double alpha = -std::expm1(kTauP * r * l);
    const double a = -std::expm1(kTau * r * l);
    const double b = p / std::expm1(-kB * l), c = b * std::exp(kF * kB * l);
    const double d = p / std::expm1(-kT * r * l), e = d * std::exp(kF * kT * r * l);
    return alpha * a * a / (kTau * kTau) - kRai * r * (b + d) * (c + e);
}

// p* for N flows, or a negative value when none up to Pmax balances (the queue pins at Kmax).
double fixed_point_p(int n) {
    const double r = kC / n;
    double lo = 1e-9, hi = kPmax;
    if (fixed_point_residual(hi, r) < 0) return -1;
    for (int i = 0; i < 200; ++i) {
        const double mid = (lo + hi) / 2;
        (fixed_point_residual(mid, r) > 0 ? hi : lo) = mid;
    }
    return lo;
}

double queue_at(double p) { return kKmin + p / kPmax * (kKmax - kKmin); }

struct Outcome {
    double mean_queue = 0;
    double max_queue = 0;
    std::vector<double> gbps; // per flow, over the measured window
};

Outcome simulate(int n) {
    FabricShape s;
    s.hosts = static_cast<uint32_t>(n + 1);
    s.host_gbps = 40;
    s.delay_ns = 1000;
    SimConfig cfg;
    cfg.mtu = static_cast<uint32_t>(kPkt);
    cfg.header_bytes = 0; // the model counts 1 KB packets, no headers
    cfg.cnp_bytes = 64;
    cfg.sw.buffer_bytes = 16u << 20;
    cfg.sw.red = {5 * 1024, 200 * 1024, 0.01};
    cfg.sw.mark_at = ibex::cc::MarkAt::kEnqueue; // as the paper's switches
    EXPECT_TRUE(ibex::cc::dcqcn::preset_params("paper", 40000, cfg.dcqcn_params));
    const uint64_t warm = 40'000'000, measure = 40'000'000, period = 2'000;
    cfg.end_ns = warm + measure;
    cfg.sample_ns = period;
    auto sim = make_sim(build_star(s), cfg);
    std::vector<uint32_t> qps;
    for (int i = 0; i < n; ++i) {
        qps.push_back(sim->add_qp(static_cast<uint32_t>(i), static_cast<uint32_t>(n)));
        sim->add_message(qps.back(), uint64_t(1) << 40); // longer than the run
    }
    sim->run();
    const auto [sw, port] = sim->host_port(static_cast<uint32_t>(n));
    Outcome o;
    double sum = 0;
    for (const QueueRecord &r : sim->queue_series())
        if (r.sw == sw && r.port == port && r.t_ns >= warm) {
            sum += double(r.queue_bytes);
            o.max_queue = std::max(o.max_queue, double(r.queue_bytes));
        }
    o.mean_queue = sum / double(measure / period); // unrecorded samples are empty queues
    // Per-flow throughput over the window from the rate series' delivered-byte counters.
    std::vector<uint64_t> at_warm(n, 0), at_end(n, 0);
    for (const RateRecord &r : sim->rate_series()) {
        if (r.t_ns == warm) at_warm[r.qp] = r.delivered_bytes;
        if (r.t_ns <= cfg.end_ns) at_end[r.qp] = r.delivered_bytes;
    }
    for (int i = 0; i < n; ++i) o.gbps.push_back(double(at_end[i] - at_warm[i]) * 8 / double(measure));
    return o;
}

} // namespace

TEST(DcqcnFixedPoint, ModelGivesThePapersQueues) {
    EXPECT_NEAR(queue_at(fixed_point_p(2)) / 1024, 20.5, 0.5);
    EXPECT_NEAR(queue_at(fixed_point_p(4)) / 1024, 42.7, 0.5);
    EXPECT_LT(fixed_point_p(16), 0);
}

TEST(DcqcnFixedPoint, TwoFlowsShareTheLinkAroundTheModelQueue) {
    const Outcome o = simulate(2);
    for (double g : o.gbps) EXPECT_NEAR(g, 20, 20 * 0.15);
    EXPECT_NEAR(o.mean_queue, queue_at(fixed_point_p(2)), 0.35 * queue_at(fixed_point_p(2)));
    EXPECT_LT(o.max_queue, 0.75 * kKmax);
}

TEST(DcqcnFixedPoint, FourFlowsShareTheLinkAroundTheModelQueue) {
    const Outcome o = simulate(4);
    for (double g : o.gbps) EXPECT_NEAR(g, 10, 10 * 0.15);
    EXPECT_NEAR(o.mean_queue, queue_at(fixed_point_p(4)), 0.35 * queue_at(fixed_point_p(4)));
}

TEST(DcqcnFixedPoint, SixteenFlowsDriveTheQueueUpToKmax) {
    const Outcome o = simulate(16);
    for (double g : o.gbps) EXPECT_NEAR(g, 2.5, 2.5 * 0.15);
    EXPECT_GT(o.max_queue, 0.9 * kKmax);
    EXPECT_LT(o.max_queue, 1.3 * kKmax);
    EXPECT_GT(o.mean_queue, queue_at(fixed_point_p(4))); // above where 4 flows settle
}
