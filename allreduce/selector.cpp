#include "allreduce/selector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/cpu/reduce.h"

namespace ibex::coll {

const char *algo_name(Algo a) {
    switch (a) {
    case Algo::ring: return "ring";
    case Algo::rhd: return "rhd";
    case Algo::tree: return "tree";
    case Algo::hierarchical: return "hierarchical";
    case Algo::gdraa: return "gdraa";
    case Algo::sumsrv: return "sumsrv";
    }
    return "?";
}

bool parse_algo(const char *name, Algo *out) {
    for (int i = 0; i < kAlgoCount; ++i) {
        if (std::strcmp(name, algo_name(static_cast<Algo>(i))) == 0) {
            *out = static_cast<Algo>(i);
            return true;
        }
    }
    return false;
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Of the ranks for which sends_out(r) is true, how many the busiest host holds.
template <typename Pred>
size_t busiest(const HostLayout &l, Pred sends_out) {
    std::vector<size_t> per(l.members.size(), 0);
    for (size_t r = 0; r < l.host_of.size(); ++r)
        if (sends_out(static_cast<int>(r))) ++per[static_cast<size_t>(l.host_of[r])];
    return per.empty() ? 0 : *std::max_element(per.begin(), per.end());
}

} // namespace

void Selector::configure(int nranks, size_t slice_bytes, const CostModel &m, const HostLayout *layout) {
    n_ = nranks;
    slice_ = slice_bytes;
    model_ = m;
    hosts_ = 1;
    per_host_ = max_per_host_ = nranks;
    ring_crossing_ = fold_crossing_ = 0;
    rhd_crossing_.assign(static_cast<size_t>(rhd_steps(std::max(nranks, 1))), 0);
    if (!layout || layout->hosts() <= 1 || static_cast<int>(layout->host_of.size()) != nranks) return;
    const HostLayout &l = *layout;
    auto remote = [&](int r, int p) { return p < nranks && l.host_of[static_cast<size_t>(r)] != l.host_of[static_cast<size_t>(p)]; };
    hosts_ = l.hosts();
    per_host_ = l.ranks_per_host();
    max_per_host_ = 0;
    for (const auto &mem : l.members) max_per_host_ = std::max(max_per_host_, static_cast<int>(mem.size()));
    ring_crossing_ = busiest(l, [&](int r) { return remote(r, (r + 1) % nranks); });
    const int p = 1 << rhd_steps(nranks), extra = nranks - p;
    fold_crossing_ = busiest(l, [&](int r) { return r < 2 * extra && remote(r, r ^ 1); });
    for (size_t j = 0; j < rhd_crossing_.size(); ++j)
        rhd_crossing_[j] = busiest(l, [&](int r) { return remote(r, r ^ (1 << j)); });
}

CostModel::PerByte CostModel::per_byte(double bytes) const {
    const PerByte small{beta, b_local(), gamma};
    if (big_bytes <= small_bytes || bytes <= static_cast<double>(small_bytes)) return small;
    const double w = std::min(1.0, std::log2(bytes / static_cast<double>(small_bytes)) /
                                       std::log2(static_cast<double>(big_bytes) / static_cast<double>(small_bytes)));
    const auto mix = [w](double at_small, double at_big) { return at_big > 0 ? at_small + w * (at_big - at_small) : at_small; };
    // Inside a host as between hosts where the host's links were not measured (b_local()).
    const double local_big = beta_local_big > 0 ? beta_local_big : beta_local > 0 ? 0 : beta_big;
    return {mix(small.beta, beta_big), mix(small.beta_local, local_big), mix(small.gamma, gamma_big)};
}

double Selector::step(const CostModel::PerByte &k, size_t crossing, double bytes) const {
    if (crossing == 0) return model_.a_local() + bytes * k.beta_local;
    const size_t probed = std::max<size_t>(model_.probe_crossing, 1);
    const double share = static_cast<double>(std::max(crossing, probed)) / static_cast<double>(probed);
    return model_.alpha + bytes * k.beta * share;
}

int Selector::rhd_joins() const {
    if (!hierarchical_joins()) return 0;
    const int steps = 2 * rhd_steps(n_) + (power_of_two(n_) ? 0 : 2);
    return steps - 1;
}

double Selector::rail_allreduce(const CostModel::PerByte &k, double bytes) const {
    const size_t rails = static_cast<size_t>(per_host_);
    const double h = hosts_, ga = k.gamma;
    if (hosts_ == 2) return step(k, rails, bytes) + bytes * ga; // one exchange, both reduce
    if (power_of_two(hosts_)) {
        double c = 0, part = bytes;
        for (int j = 0; j < rhd_steps(hosts_); ++j) c += 2 * step(k, rails, part /= 2);
        return c + (h - 1) / h * bytes * ga;
    }
    return 2 * (h - 1) * step(k, rails, bytes / h) + (h - 1) / h * bytes * ga;
}

double Selector::cost(Algo a, size_t bytes) const {
    const double n = n_, m = static_cast<double>(bytes);
    const CostModel::PerByte k = model_.per_byte(m);
    const double ga = k.gamma;
    if (n_ <= 1) return 0;
    switch (a) {
    case Algo::ring:
        // 2(n-1) steps of a chunk each; each rank reduces (n-1)/n of the data once.
        return 2 * (n - 1) * step(k, ring_crossing_, m / n) + (n - 1) / n * m * ga;
    case Algo::rhd: {
        // Two ranks swap whole vectors and both reduce all of it (algorithms/rhd.cpp): one
        // step of m bytes against ring's two of m/2, for twice the reduction. So it wins
        // while alpha exceeds half the data's reduction time: up to 2 alpha / gamma
        // (0.3-0.5 MiB at udp:lo's 6.5 us and 0.025-0.04 ns/B, where ring measured 10-20%
        // faster from 1 MiB and the swap faster at 64 KiB).
        if (n_ == 2) return model_.rhd_scale * (step(k, rhd_crossing_[0], m) + m * ga) + rhd_joins() * model_.rhd_join;
        const double p = static_cast<double>(1 << rhd_steps(n_));
        double c = 0, part = m;
        for (size_t crossing : rhd_crossing_) c += 2 * step(k, crossing, part /= 2); // halving, then doubling
        c += (p - 1) / p * m * ga;
        if (p != n) c += 2 * step(k, fold_crossing_, m) + m * ga; // fold in and hand back the extra ranks
        return model_.rhd_scale * c + rhd_joins() * model_.rhd_join;
    }
    case Algo::tree: {
        // Each half goes up and down `depth` hops in slices of s bytes. One slice costs
        // 2d hops of latency and (4d - 2) slices of bandwidth: a parent's one link carries
        // both children's slices, up and down. Each further slice adds 4 slices on the
        // busiest link (a rank inner in one tree and a leaf in the other moves four per
        // slice index). ibex_sim's tree tests derive this for the schedule tree.cpp builds.
        const double d = tree_depth(n_);
        const double s = std::min(m / 2, static_cast<double>(slice_));
        const double slices = std::max(1.0, m / 2 / s);
        const double wire = (4 * d - 2) * s + 4 * (slices - 1) * s;
        const size_t crossing = hosts_ > 1 ? static_cast<size_t>(max_per_host_) : 0;
        return 2 * d * step(k, crossing, 0) + (step(k, crossing, wire) - step(k, crossing, 0)) + m * ga;
    }
    case Algo::hierarchical: {
        if (hosts_ <= 1 || per_host_ <= 0) return kNever;
        const double l = per_host_;
        double c = rail_allreduce(k, m / l);
        if (per_host_ > 1) c += 2 * (l - 1) * step(k, 0, m / l) + (l - 1) / l * m * ga; // in-host ring halves
        return model_.hier_scale * c + hierarchical_joins() * model_.hier_join;
    }
    case Algo::gdraa: {
        // Two phases in which each rank sends (n-1)/n of the data to all peers at once over
        // its one link, after the peers' readies (one message latency); each rank reduces
        // (n-1)/n of the data once.
        if (!gdraa_fits_bytes(bytes)) return kNever;
        const size_t crossing = hosts_ > 1 ? static_cast<size_t>(max_per_host_) : 0;
        return step(k, crossing, 0) + 2 * step(k, crossing, (n - 1) / n * m) + (n - 1) / n * m * ga;
    }
    case Algo::sumsrv: {
        // BytePS's split (algorithms/sumsrv.cpp): the workers' part goes around the ring
        // (its steps as ring's), and each rank pushes k partitions and pulls their sums, a
        // push and a pull of latency; both share the rank's link, so their wire times add.
        // With one rank per host that is BytePS's 2n(n-1)m / (n^2 + kn - 2k) per link. Every
        // rank of a host pushes through the host's link at once, where the ring crosses it
        // once: with several ranks per host the servers can cost more than they save. The
        // servers are assumed to keep up (a link as fast as a worker's, sums faster than
        // it), as BytePS's analysis does.
        if (servers_ <= 0 || servers_local_) return kNever;
        const double s = servers_;
        const SumsrvSplit split = sumsrv_split(bytes, n_, servers_);
        const double workers_part = static_cast<double>(split.workers);
        const double pushed = s * static_cast<double>(split.per_server);
        const size_t crossing = hosts_ > 1 ? static_cast<size_t>(max_per_host_) : 0;
        const double ring_part = workers_part > 0 ? 2 * (n - 1) * step(k, ring_crossing_, workers_part / n) : 0;
        const double zero = step(k, crossing, 0);
        return ring_part + 2 * zero + (step(k, crossing, pushed) - zero) + (n - 1) / n * workers_part * ga;
    }
    }
    return 0;
}

double Selector::cost_reduce_scatter(bool hierarchical, size_t bytes) const {
    const double n = n_, m = static_cast<double>(bytes);
    const CostModel::PerByte k = model_.per_byte(n * m);
    const double ga = k.gamma;
    if (n_ <= 1) return 0;
    if (!hierarchical) return (n - 1) * (step(k, ring_crossing_, m) + m * ga);
    if (hosts_ <= 1 || per_host_ <= 0) return kNever;
    const double h = hosts_, l = per_host_;
    return model_.hier_scale *
               (h * (l - 1) * (step(k, 0, m) + m * ga) + (h - 1) * (step(k, static_cast<size_t>(per_host_), m) + m * ga)) +
           hierarchical_joins() / 2 * model_.hier_join;
}

double Selector::cost_allgather(bool hierarchical, size_t bytes) const {
    const double n = n_, m = static_cast<double>(bytes);
    const CostModel::PerByte k = model_.per_byte(n * m);
    if (n_ <= 1) return 0;
    if (!hierarchical) return (n - 1) * step(k, ring_crossing_, m);
    if (hosts_ <= 1 || per_host_ <= 0) return kNever;
    const double h = hosts_, l = per_host_;
    return model_.hier_scale * (h * (l - 1) * step(k, 0, m) + (h - 1) * step(k, static_cast<size_t>(per_host_), m)) +
           hierarchical_joins() / 2 * model_.hier_join;
}

Algo Selector::choose(size_t bytes, bool with_sumsrv) const {
    Algo best = Algo::tree;
    double best_cost = cost(best, bytes);
    for (int i = 1; i < kAlgoCount; ++i) {
        if (!with_sumsrv && static_cast<Algo>(i) == Algo::sumsrv) continue;
        const double c = cost(static_cast<Algo>(i), bytes);
        if (c < best_cost) {
            best = static_cast<Algo>(i);
            best_cost = c;
        }
    }
    return best;
}

// Probe buffer: [pongs: 8 bytes each][ping source 8][bulk source][bulk landing].
size_t probe_buffer_bytes(int pings, size_t bulk) { return static_cast<size_t>(pings) * 8 + 8 + 2 * bulk + 8; }

void build_probe(int rank, int partner, int pings, size_t bulk, void *buf, ScheduleBuilder &b) {
    if (partner < 0 || partner == rank) return;
    auto *p = static_cast<uint8_t *>(buf);
    uint8_t *pong = p, *ping_src = p + pings * 8, *bulk_src = ping_src + 8, *bulk_dst = bulk_src + bulk;
    uint8_t *ack = bulk_dst + bulk;
    // After the pings both sides send `bulk` at once, as every exchange step of the
    // algorithms does: a rank's engine then sends and receives together, which on a host
    // short of cores costs about twice a one-way transfer (measured: a one-way probe priced
    // a 2x2 hierarchical allreduce's in-host phases at a quarter of their time). And the
    // bulk lands as a reduce-scatter step's does: in staging slots, reduced into place
    // slice by slice, with the slots' credits going back (calibration takes the reduction's
    // gamma off the beta this gives). Landing it straight in place (as an allgather step)
    // priced 2x2 hierarchical allreduces of 1-4 MiB at 0.53-0.92 of their measured time
    // (bench/collectives/hierarchical.sh, six runs of 3); this way 0.65-0.98, and 0.86-1.16
    // at 8-64 MiB (three runs; allreduce/README.md).
    if (rank < partner) {
        int prev = -1;
        for (int k = 0; k < pings; ++k) {
            b.send(partner, ping_src, 8, prev);
            prev = b.recv_copy(partner, pong + k * 8, 8);
        }
        b.send_run(partner, bulk_src, bulk, prev);
        b.recv_reduce_run(partner, bulk_dst, bulk_src, bulk, -1, false);
        b.recv_copy(partner, ack, 8);
    } else {
        int got = -1;
        for (int k = 0; k < pings; ++k) {
            got = b.recv_copy(partner, pong + k * 8, 8);
            b.send(partner, pong + k * 8, 8, got);
        }
        b.send_run(partner, bulk_src, bulk, got);
        got = b.recv_reduce_run(partner, bulk_dst, bulk_src, bulk, -1, false);
        b.send(partner, ack, 8, got);
    }
}

int probe_partner(const HostLayout &l, int rank, bool between_hosts) {
    const int h = l.host_of[static_cast<size_t>(rank)], i = l.local_rank(rank);
    if (!between_hosts) {
        const auto &m = l.members[static_cast<size_t>(h)];
        return static_cast<size_t>(i ^ 1) < m.size() ? m[static_cast<size_t>(i ^ 1)] : -1;
    }
    if (h >= static_cast<int>(l.members.size() & ~size_t(1))) return -1; // the odd host out
    const auto &other = l.members[static_cast<size_t>(h ^ 1)];
    return static_cast<size_t>(i) < other.size() ? other[static_cast<size_t>(i)] : -1;
}

size_t probe_crossing(const HostLayout &l) {
    const size_t most = busiest(l, [&](int r) { return probe_partner(l, r, true) >= 0; });
    return std::max<size_t>(most, 1);
}

void probe_result(bool leads, int pings, size_t bulk, const std::vector<uint64_t> &t, double *alpha, double *beta) {
    *alpha = *beta = 0;
    if (!leads || pings < 2 || t.size() < static_cast<size_t>(2 * pings) + 2) return;
    // Step layout of the leading side: pings x (send, recv), bulk slices, ack.
    auto pong_at = [&](int k) { return static_cast<double>(t[static_cast<size_t>(2 * k + 1)]); };
    // The median round trip, not the mean: on a host with more busy threads than cores one
    // ping in eight can wait out a time slice, and a mean then carries it into alpha and,
    // subtracted below, takes it out of beta (across two namespaces on this VM one such
    // probe gave alpha 891 us and beta 1.44 ns/B where the rail phase moved 3.8-4.8).
    std::vector<double> trips;
    for (int k = 1; k < pings; ++k) trips.push_back(pong_at(k) - pong_at(k - 1));
    const double rtt = median(trips) * 1e-9;
    *alpha = rtt / 2;
    // The exchange ends with the last of its steps (the partner's answer, or this side's own
    // receive, whichever came later).
    const uint64_t end = *std::max_element(t.begin() + 2 * pings, t.end());
    const double bulk_s = (static_cast<double>(end) - pong_at(pings - 1)) * 1e-9;
    if (bulk) *beta = std::max(bulk_s - rtt, bulk_s / 2) / static_cast<double>(bulk);
}

double measure_gamma(void *buf, size_t bytes) {
    auto *p = static_cast<uint8_t *>(buf);
    const size_t count = bytes / sizeof(float);
    auto *a = reinterpret_cast<float *>(p), *b = reinterpret_cast<float *>(p + bytes);
    auto *out = reinterpret_cast<float *>(p + 2 * bytes);
    for (size_t i = 0; i < count; ++i) {
        a[i] = static_cast<float>(i % 97);
        b[i] = 1.0f;
    }
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        reduce_into(out, a, b, count, IBEX_F32, IBEX_SUM);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, s);
    }
    return best / static_cast<double>(bytes);
}

double median(std::span<double> v) {
    if (v.empty()) return 0;
    const auto mid = v.begin() + static_cast<long>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

bool link_warm(std::span<const double> alphas, int min_rounds) {
    const size_t n = alphas.size();
    if (n < static_cast<size_t>(std::max(min_rounds, kWarmMinRounds))) return false;
    for (size_t k = n - kWarmSteady; k < n; ++k) {
        const double best_before = *std::min_element(alphas.begin(), alphas.begin() + static_cast<long>(k));
        if (alphas[k] < 0.9 * best_before) return false;
    }
    return true;
}

CostModel combine(const std::vector<double> &per_rank) {
    CostModel m;
    double *field[kModelFields] = {&m.alpha,       &m.beta,     &m.gamma,     &m.alpha_local,
                                   &m.beta_local, &m.beta_big, &m.gamma_big, &m.beta_local_big};
    for (size_t f = 0; f < kModelFields; ++f) {
        std::vector<double> v;
        for (size_t i = f; i < per_rank.size(); i += kModelFields)
            if (per_rank[i] > 0) v.push_back(per_rank[i]);
        if (v.empty()) continue;
        *field[f] = median(v);
        m.measured = true;
    }
    return m;
}

TimedFit fit_timed(double t_small, double m_small, double t_big, double m_big, int joins) {
    TimedFit f;
    if (!(t_small > 0) || !(m_small >= 0)) return f;
    if (t_big > 0 && m_big > m_small) f.scale = std::clamp((t_big - t_small) / (m_big - m_small), kMinScale, kMaxScale);
    if (joins > 0) f.join = std::max(0.0, (t_small - f.scale * m_small) / joins);
    return f;
}

} // namespace ibex::coll
