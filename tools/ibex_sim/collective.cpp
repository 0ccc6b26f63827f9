#include "tools/ibex_sim/collective.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <unordered_map>

namespace ibex::simtool {
namespace {

uint64_t pair_key(uint32_t a, uint32_t b) { return uint64_t(a) << 32 | b; }

coll::CollArgs args_for(const CollectiveSpec &spec, uint32_t rank, uint32_t ranks) {
    // The builders only compute addresses from these; nothing is read or written. Separate
    // send and receive buffers, as an out-of-place allreduce, far enough apart never to meet.
    coll::CollArgs a;
    a.sendbuf = reinterpret_cast<const void *>(uintptr_t(1) << 40);
    a.recvbuf = reinterpret_cast<void *>(uintptr_t(2) << 40);
    a.scratch = reinterpret_cast<void *>(uintptr_t(3) << 40);
    a.count = spec.bytes;
    a.type = IBEX_U8;
    a.rank = static_cast<int>(rank);
    a.nranks = static_cast<int>(ranks);
    return a;
}

} // namespace

ScheduleFn schedule_builder(const std::string &algo, const std::vector<uint32_t> &host_of_rank,
                            uint32_t bigraph_per_switch) {
    if (algo == "ring") return coll::build_ring_allreduce;
    if (algo == "rhd") return coll::build_rhd_allreduce;
    if (algo == "tree") return coll::build_tree_allreduce;
    if (algo == "gdraa") return coll::build_gdraa_allreduce; // its receives announce nothing: no wait on them
    if (algo == "hierarchical") {
        // The same layout the communicator learns from its ranks' host identities.
        auto layout = std::make_shared<coll::HostLayout>(coll::make_host_layout(host_of_rank));
        std::string why;
        if (!coll::hierarchical_applies(*layout, &why)) {
            fail(IBEX_ERR_NOT_SUPPORTED, "--collective hierarchical: %s", why.c_str());
            return {};
        }
        return [layout](const coll::CollArgs &a, coll::ScheduleBuilder &b) {
            coll::build_hierarchical_allreduce(a, *layout, b);
        };
    }
    if (algo == "bigraph") {
        if (!bigraph_per_switch) {
            fail(IBEX_ERR_NOT_SUPPORTED, "--collective bigraph: needs --topology bigraph");
            return {};
        }
        // Each rank takes the place of its host on the fabric.
        const int hosts = static_cast<int>(*std::max_element(host_of_rank.begin(), host_of_rank.end())) + 1;
        const coll::BiGraphLayout fabric = coll::bigraph_alternating(hosts, static_cast<int>(bigraph_per_switch));
        coll::BiGraphLayout l;
        l.switches = fabric.switches;
        l.per_switch = fabric.per_switch;
        std::string why = fabric.layer.empty() ? "the hosts do not fill whole switches" : "";
        for (uint32_t h : host_of_rank) {
            if (fabric.layer.empty()) break;
            l.layer.push_back(fabric.layer[h]);
            l.sw.push_back(fabric.sw[h]);
            l.slot.push_back(fabric.slot[h]);
        }
        if (!why.empty() || !coll::bigraph_applies(l, &why)) {
            fail(IBEX_ERR_NOT_SUPPORTED, "--collective bigraph: %s", why.c_str());
            return {};
        }
        auto order = std::make_shared<std::vector<int>>(coll::bigraph_order(l));
        return [order](const coll::CollArgs &a, coll::ScheduleBuilder &b) { coll::build_bigraph_allreduce(a, *order, b); };
    }
    fail(IBEX_ERR_INVALID_ARGUMENT, "--collective %s: not one of ring, rhd, tree, hierarchical, bigraph, gdraa", algo.c_str());
    return {};
}

ibex_status_t add_collective(sim::Simulator &sim, const CollectiveSpec &spec, CollectivePlan &plan) {
    if (spec.ranks_per_host < 1) return fail(IBEX_ERR_INVALID_ARGUMENT, "--ranks-per-host must be at least 1");
    if (spec.slice_bytes < 4096) return fail(IBEX_ERR_INVALID_ARGUMENT, "--slice must be at least 4096 bytes");
    const uint32_t hosts = sim.hosts(), n = hosts * spec.ranks_per_host;
    plan.ranks = n;
    plan.host_of_rank.resize(n);
    if (spec.placement == "linear") {
        for (uint32_t r = 0; r < n; ++r) plan.host_of_rank[r] = r / spec.ranks_per_host;
    } else if (spec.placement == "strided") {
        for (uint32_t r = 0; r < n; ++r) plan.host_of_rank[r] = r % hosts;
    } else if (spec.placement == "random") {
        for (uint32_t r = 0; r < n; ++r) plan.host_of_rank[r] = r / spec.ranks_per_host;
        std::mt19937_64 rng(spec.seed);
        std::shuffle(plan.host_of_rank.begin(), plan.host_of_rank.end(), rng);
    } else {
        return fail(IBEX_ERR_INVALID_ARGUMENT, "--placement %s: not one of linear, strided, random",
                    spec.placement.c_str());
    }

    const ScheduleFn build = schedule_builder(spec.algo, plan.host_of_rank, spec.bigraph_per_switch);
    if (!build) return IBEX_ERR_INVALID_ARGUMENT;

    // Pass 1: one message per send step, in each rank's order, on the rank pair's QP.
    std::unordered_map<uint64_t, uint32_t> qp;
    std::unordered_map<uint64_t, std::vector<uint32_t>> sends; // (from, to) -> messages in order
    coll::Schedule s;
    for (uint32_t r = 0; r < n; ++r) {
        s.steps.clear();
        coll::ScheduleBuilder b(&s, 1, spec.slice_bytes);
        build(args_for(spec, r, n), b);
        for (const coll::Step &st : s.steps) {
            if (st.kind != coll::StepKind::send) continue;
            const uint32_t p = static_cast<uint32_t>(st.peer);
            auto [it, fresh] = qp.try_emplace(pair_key(r, p), 0);
            if (fresh) it->second = sim.add_qp(plan.host_of_rank[r], plan.host_of_rank[p]);
            const uint32_t m = sim.add_message(it->second, st.bytes);
            sends[pair_key(r, p)].push_back(m);
            plan.messages.push_back(m);
        }
    }
    // Pass 2: what each step's completion means in messages, and each message's waits.
    std::vector<std::vector<uint32_t>> done_by; // step -> messages whose completion it is
    std::unordered_map<uint32_t, uint32_t> received;
    std::unordered_map<uint32_t, uint32_t> sent;
    for (uint32_t r = 0; r < n; ++r) {
        s.steps.clear();
        coll::ScheduleBuilder b(&s, 1, spec.slice_bytes);
        build(args_for(spec, r, n), b);
        done_by.assign(s.steps.size(), {});
        received.clear();
        sent.clear();
        for (size_t i = 0; i < s.steps.size(); ++i) {
            const coll::Step &st = s.steps[i];
            auto wait_for_deps = [&](uint32_t m) {
                for (int d : st.dep)
                    if (d >= 0)
                        for (uint32_t x : done_by[size_t(d)]) sim.add_dependency(m, x);
            };
            const uint32_t p = static_cast<uint32_t>(st.peer);
            switch (st.kind) {
            case coll::StepKind::send: {
                const uint32_t m = sends[pair_key(r, p)].at(sent[p]++);
                done_by[i] = {m};
                wait_for_deps(m);
                break;
            }
            case coll::StepKind::recv_copy:
            case coll::StepKind::recv_reduce: {
                const auto &from = sends[pair_key(p, r)];
                const uint32_t k = received[p]++;
                if (k >= from.size())
                    return fail(IBEX_ERR_INTERNAL, "%s: rank %u receives more from rank %u than it sends",
                                spec.algo.c_str(), r, p);
                const uint32_t m = from[k];
                done_by[i] = {m};
                if (st.apply_dep >= 0) {
                    const auto &extra = done_by[size_t(st.apply_dep)];
                    done_by[i].insert(done_by[i].end(), extra.begin(), extra.end());
                }
                wait_for_deps(m);
                break;
            }
            case coll::StepKind::local_copy:
                for (int d : st.dep)
                    if (d >= 0) done_by[i].insert(done_by[i].end(), done_by[size_t(d)].begin(), done_by[size_t(d)].end());
                break;
            }
        }
    }
    return IBEX_OK;
}

double collective_seconds(const sim::Simulator &sim, const CollectivePlan &plan) {
    uint64_t last = 0;
    for (uint32_t m : plan.messages) last = std::max(last, sim.result(m).done_ns);
    return double(last) * 1e-9;
}

double busbw_gbps(uint64_t bytes, uint32_t ranks, double seconds) {
    if (seconds <= 0 || ranks < 2) return 0;
    return double(bytes) * 8 / seconds * 2 * (ranks - 1) / ranks * 1e-9;
}

} // namespace ibex::simtool

namespace ibex::simtool {

coll::CostModel fabric_cost_model(const sim::Simulator &sim, const CollectivePlan &plan, uint32_t mtu,
                                  uint32_t header_bytes) {
    const sim::Routing &r = sim.routing();
    const uint32_t a = plan.host_of_rank.at(0), b = plan.host_of_rank.at(plan.ranks > 1 ? 1 : 0);
    coll::CostModel m;
    m.gamma = 0;
    m.measured = true;
    const double small = header_bytes + 8;
    double alpha_ns = 0;
    std::vector<uint32_t> path;
    if (a != b) r.path(a, b, 0, path);
    for (uint32_t l : path) alpha_ns += double(r.links()[l].delay_ns) + small * 8 / r.links()[l].gbps;
    m.alpha = alpha_ns * 1e-9;
    const double gbps = r.links()[r.out_links(r.host_node(0))[0]].gbps;
    m.beta = 8.0 / (gbps * 1e9) * double(mtu + header_bytes) / double(mtu);
    return m;
}

} // namespace ibex::simtool
