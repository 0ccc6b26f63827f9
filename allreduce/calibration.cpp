#include "allreduce/calibration.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "allreduce/comm.h"
#include "allreduce/stream_driver.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

constexpr int kProbePings = 8;
// Ping-only probes run before the measured ones on each link: a lap of the channels' eager
// rings at least, then until the round trip stops falling (link_warm), this many rounds
// at most. The first lap of a new channel's eager slots is slow on this VM, with the
// slots' pages mapped at registration: 2 ranks over udp:lo saw round trips per round of
// 26 23 18 then 6.9 6.6 7.1 us, over memif 20 20 11 then 1.7 1.8 1.7 (the big probes'
// pings had begun the lap); with 4 ranks on 2 cores the scheduler's 140-180 us hide it.
constexpr int kWarmMaxRounds = 16;
// Probes per link kind; each rank keeps the median. One probe's bulk transfer can meet a
// reordering or a loss and its resend, or a peer off the CPU, which doubles it: across two
// namespaces on this VM a single probe's beta between hosts ranged 1.3-3.8 ns/B.
constexpr int kProbeRounds = 3;
constexpr size_t kProbeBulk = 1 << 20;
constexpr size_t kGammaBytes = 256 << 10;
// The second size, beyond the caches: a 1 MiB exchange runs in caches that a collective of
// tens of MiB misses. In a host (2 x 2 namespaces, shm) beta came out 0.25-0.47 ns/B at
// 1 MiB and 0.65-0.85 at 8 MiB, gamma 0.03 over 256 KiB and 0.09-0.13 over 4 MiB. Only its
// bulk transfer is used, so it takes two pings.
constexpr size_t kProbeBulkBig = size_t(8) << 20;
constexpr int kProbePingsBig = 2;

struct ProbeSize {
    int pings;
    size_t bulk;
};

// One probe op (every rank submits it; ranks without a partner sit it out): this rank's
// alpha and beta for the kind of link its partner is on, 0 where it did not lead a pair.
ibex_status_t probe_once(ibex_comm *c, bool between_hosts, ProbeSize size, double *alpha, double *beta) {
    std::vector<uint64_t> times;
    Op op;
    op.kind = OpKind::probe;
    op.args.count = 1;
    op.pings = size.pings;
    op.bulk = size.bulk;
    op.partner = probe_partner(c->topo.layout, c->rank, between_hosts);
    op.times = &times;
    const bool leads = op.partner > c->rank;
    ibex_request *req = nullptr;
    IBEX_TRY(comm_submit(c, std::move(op), &req, true));
    IBEX_TRY(request_wait(req));
    probe_result(leads, size.pings, size.bulk, times, alpha, beta);
    return IBEX_OK;
}

// Ping-only probes on a link, their results dropped, until every rank that measures sees
// the round trip stop falling (link_warm), kWarmMaxRounds at most. Every rank submits
// every probe, so the ranks agree after each round through the bootstrap.
ibex_status_t warm_link(ibex_comm *c, bool between_hosts) {
    std::vector<double> alphas;
    std::vector<uint8_t> votes(static_cast<size_t>(c->nranks));
    const int eager = c->opt.exec.eager_bytes ? c->opt.exec.eager_slots : 0;
    const int lap = std::min((eager + kProbePings - 1) / kProbePings, kWarmMaxRounds);
    for (int k = 0; k < kWarmMaxRounds; ++k) {
        double alpha = 0, beta = 0;
        IBEX_TRY(probe_once(c, between_hosts, {kProbePings, 0}, &alpha, &beta));
        alphas.push_back(alpha);
        // A rank that led no pair measured nothing: it has no say.
        const uint8_t warm = alpha <= 0 || link_warm(alphas, lap);
        IBEX_TRY(c->boot->allgather(&warm, 1, votes.data(), c->opt.timeout_ms));
        if (std::all_of(votes.begin(), votes.end(), [](uint8_t v) { return v != 0; })) {
            if (!log_enabled(LogLevel::debug)) return IBEX_OK;
            std::string seen;
            char one[24];
            for (double a : alphas) {
                std::snprintf(one, sizeof one, " %.1f", a * 1e6);
                seen += one;
            }
            IBEX_LOG(debug, "rank %d: %s link warm after %d ping rounds (alpha us:%s)", c->rank,
                     between_hosts ? "inter-host" : "local", k + 1, seen.c_str());
            return IBEX_OK;
        }
    }
    IBEX_LOG(info, "rank %d: %s link still warming after %d ping rounds; calibrating anyway", c->rank,
             between_hosts ? "inter-host" : "local", kWarmMaxRounds);
    return IBEX_OK;
}

// The median of kProbeRounds probes, alpha and beta each.
ibex_status_t probe_link(ibex_comm *c, bool between_hosts, ProbeSize size, double *alpha, double *beta) {
    double a[kProbeRounds], b[kProbeRounds];
    for (int k = 0; k < kProbeRounds; ++k) IBEX_TRY(probe_once(c, between_hosts, size, &a[k], &b[k]));
    *alpha = median(a);
    *beta = median(b);
    return IBEX_OK;
}

// Timed runs of an allreduce for the model's fit, after one untimed run that registers the
// buffers and sizes the scratch.
constexpr int kTimedRuns = 3;

// This rank's median time of an f32 sum of `bytes` by `algo`, run back to back as a
// training step's collectives are.
ibex_status_t time_allreduce(ibex_comm *c, Algo algo, size_t bytes, double *seconds) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> send(count, 1.0f), recv(count);
    double t[kTimedRuns] = {};
    ibex_status_t st = IBEX_OK;
    for (int k = -1; k < kTimedRuns && st == IBEX_OK; ++k) {
        Op op;
        op.kind = OpKind::allreduce;
        op.args.sendbuf = send.data();
        op.args.recvbuf = recv.data();
        op.args.count = count;
        op.args.type = IBEX_F32;
        op.args.op = IBEX_SUM;
        op.algo = algo;
        const auto t0 = std::chrono::steady_clock::now();
        ibex_request *req = nullptr;
        st = comm_submit(c, std::move(op), &req, true);
        if (st == IBEX_OK) st = request_wait(req);
        if (k >= 0) t[k] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    // The vectors go; their registrations must not outlive them.
    c->caches.forget(send.data(), bytes);
    c->caches.forget(recv.data(), bytes);
    IBEX_TRY(st);
    *seconds = median(t);
    return IBEX_OK;
}

// Times hierarchical and rhd at the probes' two sizes and fits each one's scale and join
// (CostModel::hier_join etc.), the same on every rank: the fit takes the median over ranks
// of each time. The two sizes of one algorithm run back to back, rhd's after
// hierarchical's.
ibex_status_t fit_rivals(ibex_comm *c, CostModel *model) {
    const Selector &s = c->selector;
    if (!s.hierarchical_joins()) return IBEX_OK;
    constexpr Algo kRivals[2] = {Algo::hierarchical, Algo::rhd};
    const bool big = model->big_bytes > model->small_bytes;
    double mine[4] = {}; // per rival: small, big
    for (size_t r = 0; r < 2; ++r) {
        IBEX_TRY(time_allreduce(c, kRivals[r], model->small_bytes, &mine[2 * r]));
        if (big) IBEX_TRY(time_allreduce(c, kRivals[r], model->big_bytes, &mine[2 * r + 1]));
    }
    std::vector<double> all(4 * static_cast<size_t>(c->nranks));
    IBEX_TRY(c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms));
    auto median_of = [&](size_t field) {
        std::vector<double> v;
        for (size_t i = field; i < all.size(); i += 4) v.push_back(all[i]);
        return median(v);
    };
    auto fit = [&](size_t r, int joins) {
        return fit_timed(median_of(2 * r), s.cost(kRivals[r], model->small_bytes), median_of(2 * r + 1),
                         big ? s.cost(kRivals[r], model->big_bytes) : 0, joins);
    };
    const TimedFit hier = fit(0, s.hierarchical_joins()), rhd = fit(1, s.rhd_joins());
    model->hier_scale = hier.scale;
    model->hier_join = hier.join;
    model->rhd_scale = rhd.scale;
    model->rhd_join = rhd.join;
    // As the probes' buffers: an 8 MiB allreduce's scratch is not kept for a communicator
    // that may only ever run small ones.
    comm_release_scratch(c);
    return IBEX_OK;
}

// A probe's beta less the reduction's share of it: never below half of it (the reduction
// overlaps the next slices' transfers), and 0 (not measured) stays 0.
double without_reduction(double beta, double gamma) { return beta > 0 ? std::max(beta - gamma, beta / 2) : 0; }

} // namespace

ibex_status_t calibrate(ibex_comm *c) {
    CostModel model;
    const HostLayout &layout = c->topo.layout;
    if (c->opt.probe && c->nranks > 1) {
        // alpha, beta (between hosts), gamma, alpha_local, beta_local, beta_big, gamma_big,
        // beta_local_big
        double mine[kModelFields] = {};
        double unused_alpha = 0;
        const ProbeSize small{kProbePings, kProbeBulk}, big{kProbePingsBig, kProbeBulkBig};
        IBEX_TRY(comm_ensure_scratch(c, std::max({probe_buffer_bytes(kProbePings, kProbeBulk),
                                                  probe_buffer_bytes(kProbePingsBig, kProbeBulkBig),
                                                  3 * kGammaBytes, 3 * (kProbeBulkBig / 2)})));
        mine[2] = measure_gamma(c->scratch, kGammaBytes);
        mine[6] = measure_gamma(c->scratch, kProbeBulkBig / 2);
        // Written before the probes send from it: never-written pages all map the kernel's
        // one zero page, which the sender then reads out of L1 (a 32 MiB exchange ran in
        // 10 ms from it, 16-19 ms from written memory, as a collective's does).
        std::memset(c->scratch, 0x5a, c->scratch_bytes);
        // The big probes first: they take the links through their first laps (a memif
        // ring's 2048 slots, 8 MiB at 4 KiB frames), which ran several times slower than
        // the later ones and put alpha at 19-23 us and beta at 4.6-5.1 ns/B on memif
        // where a warm link gives about a tenth of that; their median of three outlasts one
        // slow round.
        IBEX_TRY(probe_link(c, false, big, &unused_alpha, &mine[7]));
        IBEX_TRY(warm_link(c, false));
        IBEX_TRY(probe_link(c, false, small, &mine[3], &mine[4]));
        if (layout.hosts() > 1) {
            IBEX_TRY(probe_link(c, true, big, &unused_alpha, &mine[5]));
            IBEX_TRY(warm_link(c, true));
            IBEX_TRY(probe_link(c, true, small, &mine[0], &mine[1]));
        }
        // The probes' exchanges reduce what lands, which the model prices apart (gamma per
        // byte reduced): their betas keep the transfer alone.
        for (size_t f : {size_t(1), size_t(4)}) mine[f] = without_reduction(mine[f], mine[2]);
        for (size_t f : {size_t(5), size_t(7)}) mine[f] = without_reduction(mine[f], mine[6]);
        // The big probe's buffers are not kept: the collectives grow the scratch to what
        // they need.
        comm_release_scratch(c);
        std::vector<double> all(kModelFields * static_cast<size_t>(c->nranks));
        IBEX_TRY(c->boot->allgather(mine, sizeof mine, all.data(), c->opt.timeout_ms));
        model = combine(all);
        model.small_bytes = kProbeBulk;
        model.big_bytes = kProbeBulkBig;
        if (layout.hosts() > 1) model.probe_crossing = probe_crossing(layout); // every rail probed at once
        // One host: every link is a local one. Ranks alone on their hosts: no local link to price.
        if (layout.hosts() == 1) {
            model.alpha = model.alpha_local;
            model.beta = model.beta_local;
            model.beta_big = model.beta_local_big;
        }
    }
    c->selector.configure(c->nranks, c->opt.exec.slice_bytes, model, &layout);
    c->selector.set_gdraa_zone(c->opt.exec.zone_bytes);
    if (model.measured && c->topo.irregular.empty()) {
        IBEX_TRY(fit_rivals(c, &model));
        c->selector.configure(c->nranks, c->opt.exec.slice_bytes, model, &layout);
    }
    IBEX_LOG(info,
             "communicator rank %d/%d: %s; between hosts alpha %.2f us, beta %.3f ns/B (%.3f from %zu B); in a host "
             "alpha %.2f us, beta %.3f ns/B (%.3f); gamma %.3f ns/B (%.3f); timed: hierarchical x%.2f + %.2f us per join, rhd x%.2f + %.2f us (%s)",
             c->rank, c->nranks, layout.describe().c_str(), model.alpha * 1e6, model.beta * 1e9,
             model.beta_big * 1e9, model.big_bytes, model.a_local() * 1e6, model.b_local() * 1e9,
             model.beta_local_big * 1e9, model.gamma * 1e9, model.gamma_big * 1e9, model.hier_scale, model.hier_join * 1e6, model.rhd_scale, model.rhd_join * 1e6,
             model.measured ? "measured" : "defaults");
    if (c->opt.forced && c->opt.algo == Algo::hierarchical && !c->topo.irregular.empty())
        IBEX_LOG(warn, "communicator rank %d: IBEX_ALGO=hierarchical, but %s: the cost model chooses instead", c->rank,
                 c->topo.irregular.c_str());
    return IBEX_OK;
}

} // namespace ibex::coll
