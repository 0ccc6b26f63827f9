#include "allreduce/selector.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/cpu/reduce.h"

namespace ibex::coll {

const char *algo_name(Algo a) {
    switch (a) {
    case Algo::ring: return "ring";
    case Algo::rhd: return "rhd";
    case Algo::tree: return "tree";
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

double Selector::cost(Algo a, size_t bytes) const {
    const double n = n_, m = static_cast<double>(bytes);
    const double al = model_.alpha, be = model_.beta, ga = model_.gamma;
    if (n_ <= 1) return 0;
    switch (a) {
    case Algo::ring:
        // 2(n-1) steps; each rank sends and reduces (n-1)/n of the data once per phase.
        return 2 * (n - 1) * al + 2 * (n - 1) / n * m * be + (n - 1) / n * m * ga;
    case Algo::rhd: {
        const double k = rhd_steps(n_), p = static_cast<double>(1 << rhd_steps(n_));
        double c = 2 * k * al + 2 * (p - 1) / p * m * be + (p - 1) / p * m * ga;
        if (p != n) c += 2 * al + 2 * m * be + m * ga; // fold in and hand back the extra ranks
        return c;
    }
    case Algo::tree: {
        // Each half goes up and down `depth` hops, pipelined in slices: the fill costs a
        // slice per hop, then every inner node moves the whole message about twice.
        const double d = tree_depth(n_);
        const double s = std::min(m / 2, static_cast<double>(slice_));
        return 2 * d * (al + s * be) + 2 * m * be + m * ga;
    }
    }
    return 0;
}

Algo Selector::choose(size_t bytes) const {
    Algo best = Algo::tree;
    double best_cost = cost(best, bytes);
    for (int i = 1; i < kAlgoCount; ++i) {
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

void build_probe(int rank, int nranks, int pings, size_t bulk, void *buf, ScheduleBuilder &b) {
    const int partner = rank ^ 1;
    if (partner >= nranks) return;
    auto *p = static_cast<uint8_t *>(buf);
    uint8_t *pong = p, *ping_src = p + pings * 8, *bulk_src = ping_src + 8, *bulk_dst = bulk_src + bulk;
    uint8_t *ack = bulk_dst + bulk;
    if (rank % 2 == 0) {
        int prev = -1;
        for (int k = 0; k < pings; ++k) {
            const int s = b.send(partner, ping_src, 8, prev);
            (void)s;
            prev = b.recv_copy(partner, pong + k * 8, 8);
        }
        b.send_run(partner, bulk_src, bulk, prev);
        b.recv_copy(partner, ack, 8);
    } else {
        for (int k = 0; k < pings; ++k) {
            const int got = b.recv_copy(partner, pong + k * 8, 8);
            b.send(partner, pong + k * 8, 8, got);
        }
        const int got = b.recv_copy_run(partner, bulk_dst, bulk);
        b.send(partner, ack, 8, got);
    }
}

void probe_result(int rank, int nranks, int pings, size_t bulk, const std::vector<uint64_t> &t, double *alpha,
                  double *beta) {
    *alpha = *beta = 0;
    if ((rank % 2) != 0 || (rank ^ 1) >= nranks || pings < 2) return;
    // Step layout of the even side: pings x (send, recv), bulk slices, ack.
    auto pong_at = [&](int k) { return static_cast<double>(t[static_cast<size_t>(2 * k + 1)]); };
    const double rtt = (pong_at(pings - 1) - pong_at(0)) / (pings - 1) * 1e-9;
    *alpha = rtt / 2;
    const double bulk_s = (static_cast<double>(t.back()) - pong_at(pings - 1)) * 1e-9;
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

CostModel combine(const std::vector<double> &triples) {
    CostModel m;
    for (int f = 0; f < 3; ++f) {
        std::vector<double> v;
        for (size_t i = static_cast<size_t>(f); i < triples.size(); i += 3)
            if (triples[i] > 0) v.push_back(triples[i]);
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        const double med = v[v.size() / 2];
        (f == 0 ? m.alpha : f == 1 ? m.beta : m.gamma) = med;
        m.measured = true;
    }
    return m;
}

} // namespace ibex::coll
