// Collectives on an uncongested fabric against their alpha-beta formulas (REFERENCE.md
// section 5), within 2%. In the simulator's terms, for messages of whole packets: B is the
// link rate times mtu / (mtu + header) (what the wire leaves for payload), and alpha, the
// cost of one step besides its bytes, is the path's propagation delay plus one packet's
// serialisation per store-and-forward hop after the first. The tolerance covers the
// partial last packet of a chunk and the ns rounding per packet (both well under 0.1%
// here); what it would not cover is a schedule whose steps wait for the wrong messages.
#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "allreduce/algorithms/algorithms.h"
#include "tests/congestion/sim/sim_fixture.h"
#include "tools/ibex_sim/collective.h"

using namespace ibex;
using namespace ibex::sim;
using namespace ibex::simtool;

namespace {

constexpr double kGbps = 100;

struct Outcome {
    double seconds = 0;
    uint32_t ranks = 0;
    size_t messages = 0;
};

Outcome run_collective(const Topology &t, const CollectiveSpec &spec, SimConfig cfg = {}) {
    cfg.dcqcn = false; // uncongested by construction; DCQCN would only add its pacing
    cfg.sw.buffer_bytes = 64u << 20;
    auto sim = test::make_sim(t, cfg);
    CollectivePlan plan;
    EXPECT_EQ(add_collective(*sim, spec, plan), IBEX_OK) << ibex_last_error();
    const RunStats st = sim->run();
    EXPECT_TRUE(st.all_done);
    EXPECT_EQ(st.drops, 0u);
    return {collective_seconds(*sim, plan), plan.ranks, plan.messages.size()};
}

double beta(const SimConfig &c) { return 8e-9 / kGbps * double(c.mtu + c.header_bytes) / c.mtu; }
// One step's latency over `links` links of `delay_ns`.
double alpha(const SimConfig &c, int links, double delay_ns) {
    return (links * delay_ns + (links - 1) * (c.mtu + c.header_bytes) * 8 / kGbps) * 1e-9;
}

FabricShape shape(uint32_t hosts, uint64_t delay_ns = 1000, uint32_t hosts_per_switch = 0) {
    FabricShape s;
    s.hosts = hosts;
    s.host_gbps = kGbps;
    s.delay_ns = delay_ns;
    s.hosts_per_leaf = hosts_per_switch;
    return s;
}

Topology star(uint32_t hosts, uint64_t delay_ns = 1000) { return build_star(shape(hosts, delay_ns)); }
Topology bigraph(uint32_t hosts, uint32_t per) { return build_bigraph(shape(hosts, 1000, per)); }

} // namespace

TEST(SimCollective, RingMatchesAlphaBetaOnAStar) {
    // One slice per chunk (slice = S/n): each of the 2(n-1) steps moves one chunk, the
    // formula's assumption. (With smaller slices the ring pipelines and beats it.)
    const SimConfig cfg;
    for (uint32_t n : {4u, 8u}) {
        CollectiveSpec spec;
        spec.algo = "ring";
        spec.bytes = 8u << 20;
        spec.slice_bytes = spec.bytes / n;
        const Outcome r = run_collective(star(n), spec);
        const double expect = 2.0 * (n - 1) / n * double(spec.bytes) * beta(cfg) + 2.0 * (n - 1) * alpha(cfg, 2, 1000);
        EXPECT_NEAR(r.seconds, expect, 0.02 * expect) << n;
        EXPECT_EQ(r.messages, size_t(n) * 2 * (n - 1));
    }
}

TEST(SimCollective, RingOnLeafSpineIsPacedByItsMeanStepLatency) {
    // Ranks 3 -> 4 and 7 -> 0 cross the spine (four links), the other six pairs share a
    // leaf (two). Each rank's next send waits for its own NIC and for its left
    // neighbour's chunk, so the ring is one cycle of such waits and settles to the cycle's
    // mean: alpha is the average neighbour latency around the ring, not the slowest
    // (which would over-predict by 2%).
    FabricShape s;
    s.hosts = 8;
    s.hosts_per_leaf = 4;
    s.host_gbps = kGbps;
    s.delay_ns = 1000;
    const SimConfig cfg;
    CollectiveSpec spec;
    spec.algo = "ring";
    spec.bytes = 8u << 20;
    spec.slice_bytes = spec.bytes / 8;
    const Outcome r = run_collective(build_leaf_spine(s), spec);
    const double mean_alpha = (6 * alpha(cfg, 2, 1000) + 2 * alpha(cfg, 4, 1000)) / 8;
    const double expect = 2.0 * 7 / 8 * double(spec.bytes) * beta(cfg) + 2.0 * 7 * mean_alpha;
    EXPECT_NEAR(r.seconds, expect, 0.02 * expect);
}

TEST(SimCollective, RabenseifnerMatchesAlphaBeta) {
    // 2 lg p alpha + 2 (p-1)/p S beta, with the runtime's slicing: each step's slices
    // go back to back and the next step waits for the whole reduction.
    const SimConfig cfg;
    for (uint32_t n : {8u, 16u}) {
        CollectiveSpec spec;
        spec.algo = "rhd";
        spec.bytes = 16u << 20;
        const Outcome r = run_collective(star(n), spec);
        const double lg = std::log2(double(n));
        const double expect = 2 * lg * alpha(cfg, 2, 1000) + 2.0 * (n - 1) / n * double(spec.bytes) * beta(cfg);
        EXPECT_NEAR(r.seconds, expect, 0.02 * expect) << n;
    }
}

// The double binary tree as allreduce/algorithms builds it (tree.cpp): the message is cut
// in two halves, one per tree, each half in k = S / 2s slices of s bytes (the runtime's
// slicing); a leaf sends all its slices at once, an inner node sends slice j up when both
// children's slice j have landed and down to its children when its parent's has, and every
// rank is a leaf in one tree and an inner node in the other (with at most one exception).
// On a star, with d the depth:
// - One slice (k = 1). At t = 0 every rank sends its leaf slice. Two children's slices
//   share their parent's one link: sent from u1 <= u2, both have landed at
//   max(u1 + 2 s beta, u2 + s beta) + alpha (one child: u + s beta + alpha). Down again, a
//   node forwards to its c children over its one link: they have it c s beta + alpha later.
//   T1 is the later tree's last leaf, walked over the real trees (tree_one_slice). When n
//   is a power of two every parent but the root (one child) has two children of equal
//   depth, and T1 = 2 d alpha + (4d - 2) s beta.
// - k slices: behind the first slice the pipeline is paced by its busiest links. A rank that
//   is inner in one tree and a leaf in the other sends 4 half-tree slices per slice index
//   (up to its parent, down to two children, its leaf slice up the other tree) and receives
//   4, so each further slice adds 4 s beta: T = T1 + 4 (k - 1) s beta; for n a power of two
//   T = 2 S beta + 2 d alpha + (4d - 6) s beta.
// The earlier formula, 2 d (alpha + s beta) + 2 S beta (the selector's), treats each hop as
// one slice on a link of its own: 0.77-1.32x off at one slice for 4-64 ranks.
// Between the regimes (k = 4 to 32) the greedy schedule beats T: until the down traffic
// reaches a rank, its links carry only the up phase, 2 slices per index, so the up phase
// runs ahead at 2 s beta per slice where T charges 4. There T is an upper bound and 2 S beta
// (4k slices through the busiest link) a lower one. The pipelined formula is asserted for
// powers of two only: with subtrees of unequal depth (12 ranks) one child's stream runs
// ahead, queues in its parent's port, and the down traffic behind it in that FIFO arrives
// late: 32 MiB over 12 ranks takes 1.03 T.
namespace {

double tree_one_slice(const SimConfig &cfg, uint32_t n, double slice, double delay_ns) {
    const double sb = slice * beta(cfg), a = alpha(cfg, 2, delay_ns);
    double last = 0;
    for (int t = 0; t < 2; ++t) {
        std::vector<coll::TreeLinks> links;
        int root = -1;
        for (int r = 0; r < int(n); ++r) {
            links.push_back(coll::tree_links(t, r, int(n)));
            if (links.back().parent < 0) root = r;
        }
        // When r's reduced slice is ready: its children's slices have landed.
        std::function<double(int)> up = [&](int r) {
            const auto &c = links[size_t(r)].child;
            if (c[0] < 0) return 0.0;
            if (c[1] < 0) return up(c[0]) + sb + a;
            const double u1 = up(c[0]), u2 = up(c[1]);
            return std::max(std::min(u1, u2) + 2 * sb, std::max(u1, u2) + sb) + a;
        };
        std::function<void(int, double)> down = [&](int r, double have) {
            last = std::max(last, have);
            const auto &c = links[size_t(r)].child;
            const int kids = (c[0] >= 0) + (c[1] >= 0);
            for (int x : c)
                if (x >= 0) down(x, have + kids * sb + a);
        };
        down(root, up(root));
    }
    return last;
}

double tree_pipelined(const SimConfig &cfg, uint32_t n, double bytes, double slice) {
    const double k = std::ceil(bytes / 2 / slice);
    return tree_one_slice(cfg, n, slice, 1000) + 4 * (k - 1) * slice * beta(cfg);
}

} // namespace

TEST(SimCollective, TreeFormulaForPowersOfTwoIsTheWalkOfItsTrees) {
    const SimConfig cfg;
    for (uint32_t n : {4u, 8u, 16u, 32u, 64u}) {
        const double d = coll::tree_depth(int(n)), s = 128 << 10;
        EXPECT_NEAR(tree_one_slice(cfg, n, s, 1000), 2 * d * alpha(cfg, 2, 1000) + (4 * d - 2) * s * beta(cfg), 1e-12)
            << n;
    }
}

TEST(SimCollective, TreeWithOneSliceMatchesItsCriticalPath) {
    // Where latency rules (a packet per half over 20 us links: alpha is 99% of each hop)
    // and where the shared links do (128 KiB per half over 1 us links: 2 s beta is 90%).
    const SimConfig cfg;
    for (uint32_t n : {4u, 8u, 12u, 16u, 24u, 32u}) {
        for (const auto &[half, delay_ns] : {std::pair<uint64_t, double>{cfg.mtu, 20000}, {128u << 10, 1000}}) {
            CollectiveSpec spec;
            spec.algo = "tree";
            spec.bytes = 2 * half;
            const Outcome r = run_collective(star(n, uint64_t(delay_ns)), spec);
            const double expect = tree_one_slice(cfg, n, double(half), delay_ns);
            EXPECT_NEAR(r.seconds, expect, 0.02 * expect) << n << " ranks, " << half << " bytes per half";
        }
    }
}

TEST(SimCollective, TreePipelineMatchesItsFormulaWhereBandwidthRules) {
    // 32 MiB in 128 KiB slices: k = 128, the pipeline's fill is 2-4% of the time.
    const SimConfig cfg;
    for (uint32_t n : {4u, 8u, 16u, 32u}) {
        CollectiveSpec spec;
        spec.algo = "tree";
        spec.bytes = 32u << 20;
        const Outcome r = run_collective(star(n), spec);
        const double expect = tree_pipelined(cfg, n, double(spec.bytes), double(spec.slice_bytes));
        EXPECT_NEAR(r.seconds, expect, 0.02 * expect) << n;
    }
}

TEST(SimCollective, TreeBetweenTheRegimesLiesBetweenItsBounds) {
    const SimConfig cfg;
    for (uint32_t n : {4u, 8u, 16u, 32u}) {
        for (uint64_t bytes : {1u << 20, 8u << 20}) {
            CollectiveSpec spec;
            spec.algo = "tree";
            spec.bytes = bytes;
            const Outcome r = run_collective(star(n), spec);
            EXPECT_GT(r.seconds, 2 * double(bytes) * beta(cfg)) << n << " ranks, " << bytes;
            EXPECT_LT(r.seconds, 1.02 * tree_pipelined(cfg, n, double(bytes), double(spec.slice_bytes)))
                << n << " ranks, " << bytes;
        }
    }
}

TEST(SimCollective, RanksOfOneHostShareItsNic) {
    // 2 ranks per host, linear placement: ring neighbours alternate between the local
    // path and the fabric; the run still ends and every message is accounted for.
    CollectiveSpec spec;
    spec.algo = "ring";
    spec.bytes = 1u << 20;
    spec.ranks_per_host = 2;
    const Outcome r = run_collective(star(4), spec);
    EXPECT_EQ(r.ranks, 8u);
    EXPECT_GT(r.seconds, 0);
    spec.placement = "strided";
    EXPECT_GT(run_collective(star(4), spec).seconds, r.seconds); // every hop crosses the fabric
}

TEST(SimCollective, RefusesUnknownAlgorithmsAndPlacements) {
    auto sim = test::make_sim(star(2), {});
    CollectivePlan plan;
    CollectiveSpec spec;
    spec.algo = "butterfly";
    EXPECT_EQ(add_collective(*sim, spec, plan), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("butterfly"), std::string::npos);
    spec.algo = "ring";
    spec.placement = "scattered";
    EXPECT_EQ(add_collective(*sim, spec, plan), IBEX_ERR_INVALID_ARGUMENT);
}

// Hierarchical (the communicator's builder) on 4 hosts x 2 ranks: each host link carries
// 2 x 2(h-1)/h x S/2 = 1.5 S, against 2 x 2(n-1)/n x S = 3.5 S for a ring whose every hop
// crosses the fabric (strided placement), so it must finish well ahead; and it runs on a
// random placement too (the layout follows the hosts, not the rank numbers).
TEST(SimCollective, HierarchicalCrossesTheFabricOncePerRail) {
    CollectiveSpec spec;
    spec.bytes = 8 << 20;
    spec.ranks_per_host = 2;
    spec.algo = "hierarchical";
    const Outcome hier = run_collective(star(4), spec);
    EXPECT_EQ(hier.ranks, 8u);
    spec.placement = "random";
    EXPECT_GT(run_collective(star(4), spec).seconds, 0);
    spec.algo = "ring";
    spec.placement = "strided";
    const Outcome ring = run_collective(star(4), spec);
    EXPECT_LT(hier.seconds * 1.8, ring.seconds) << "hierarchical " << hier.seconds << " s, ring " << ring.seconds << " s";
}

// BiGraph's mapping (allreduce/algorithms/bigraph.cpp) makes every halving-doubling step
// one switch-to-switch hop (three links: host, upper, lower, host) with no link shared,
// so the whole collective is Rabenseifner's formula at that alpha, within 2%, as if the
// fabric were one big switch; plain rhd over the same hosts contends and takes far longer.
TEST(SimCollective, BiGraphRunsRabenseifnerWithoutContention) {
    const SimConfig cfg;
    for (auto [n, per] : {std::pair{32u, 4u}, std::pair{64u, 4u}}) {
        CollectiveSpec spec;
        spec.algo = "bigraph";
        spec.bytes = 16u << 20;
        spec.bigraph_per_switch = per;
        const Outcome r = run_collective(bigraph(n, per), spec);
        const double lg = std::log2(double(n));
        const double expect = 2 * lg * alpha(cfg, 3, 1000) + 2.0 * (n - 1) / n * double(spec.bytes) * beta(cfg);
        EXPECT_NEAR(r.seconds, expect, 0.02 * expect) << n;
        spec.algo = "rhd";
        EXPECT_GT(run_collective(bigraph(n, per), spec).seconds, 1.5 * r.seconds) << n;
    }
}

TEST(SimCollective, BiGraphNeedsABiGraphItCanMapWithoutContention) {
    CollectiveSpec spec;
    spec.algo = "bigraph";
    {
        auto sim = test::make_sim(star(8), {});
        CollectivePlan plan;
        EXPECT_EQ(add_collective(*sim, spec, plan), IBEX_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(ibex_last_error()).find("--topology bigraph"), std::string::npos) << ibex_last_error();
    }
    spec.bigraph_per_switch = 16; // 64 hosts: 2 switches per layer, 16 hosts on each
    auto sim = test::make_sim(bigraph(64, 16), {});
    CollectivePlan plan;
    EXPECT_EQ(add_collective(*sim, spec, plan), IBEX_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ibex_last_error()).find("exceed"), std::string::npos) << ibex_last_error();
}

// GDRAA (allreduce/algorithms/gdraa.cpp): two all-to-all phases, each rank's n - 1 messages
// sharing its one link: 2 alpha + 2 (n-1)/n S beta, within 2%, whatever n (ring pays
// 2(n-1) alphas).
TEST(SimCollective, GdraaIsTwoAllToAllSteps) {
    const SimConfig cfg;
    for (uint32_t n : {4u, 16u}) {
        CollectiveSpec spec;
        spec.algo = "gdraa";
        spec.bytes = 1u << 20;
        const Outcome r = run_collective(star(n), spec);
        const double expect = 2 * alpha(cfg, 2, 1000) + 2.0 * (n - 1) / n * double(spec.bytes) * beta(cfg);
        EXPECT_NEAR(r.seconds, expect, 0.02 * expect) << n;
    }
}
