#include "tools/ibex_sim/traffic.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace ibex::simtool {

bool parse_size(const std::string &s, uint64_t *out) {
    char *end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || !(v >= 0)) return false;
    double scale = 1;
    const std::string unit(end);
    if (unit == "K" || unit == "KiB" || unit == "k") scale = 1024;
    else if (unit == "M" || unit == "MiB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
    else if (!unit.empty()) return false;
    *out = static_cast<uint64_t>(v * scale);
    return true;
}

double SizeCdf::mean() const {
    double m = 0, prev_p = 0, prev_b = points.empty() ? 0 : points.front().first;
    for (const auto &[b, p] : points) {
        m += (p - prev_p) * (b + prev_b) / 2; // sizes spread evenly between the points
        prev_p = p;
        prev_b = b;
    }
    return m;
}

double SizeCdf::sample(double u) const {
    double prev_p = 0, prev_b = points.front().first;
    for (const auto &[b, p] : points) {
        if (u < p) return prev_b + (b - prev_b) * (p > prev_p ? (u - prev_p) / (p - prev_p) : 0);
        prev_p = p;
        prev_b = b;
    }
    return points.back().first;
}

ibex_status_t parse_cdf(const std::string &text, SizeCdf &out) {
    std::istringstream in(text);
    std::string line;
    out.points.clear();
    bool percent = false;
    for (int n = 1; std::getline(in, line); ++n) {
        std::istringstream l(line);
        double b, p;
        if (!(l >> b)) continue; // blank line
        if (!(l >> p) || b < 0 || p < 0 || (!out.points.empty() && p < out.points.back().second))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "CDF line %d `%s` is not `bytes cumulative_probability`, rising", n,
                        line.c_str());
        percent = percent || p > 1;
        out.points.push_back({b, p});
    }
    if (out.points.empty()) return fail(IBEX_ERR_INVALID_ARGUMENT, "CDF has no points");
    for (auto &pt : out.points)
        if (percent) pt.second /= 100;
    if (std::fabs(out.points.back().second - 1) > 1e-6)
        return fail(IBEX_ERR_INVALID_ARGUMENT, "CDF must end at probability 1 (or 100), not %g",
                    out.points.back().second);
    return IBEX_OK;
}

ibex_status_t add_flows(sim::Simulator &sim, const std::string &spec, double host_gbps, uint64_t duration_ns,
                        uint64_t seed, FlowPlan &plan) {
    const uint32_t hosts = sim.hosts();
    const size_t colon = spec.find(':');
    plan.kind = spec.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (plan.kind == "long") {
        if (!duration_ns) return fail(IBEX_ERR_INVALID_ARGUMENT, "--flows long runs until --duration-us; give it");
        plan.endless = true;
        for (uint32_t h = 0; h < hosts; ++h)
            plan.messages.push_back(sim.add_message(sim.add_qp(h, (h + hosts / 2) % hosts), uint64_t(1) << 50));
        return IBEX_OK;
    }
    if (plan.kind == "incast") {
        const size_t c2 = rest.find(':');
        const long n = std::strtol(rest.c_str(), nullptr, 10);
        uint64_t bytes = 64u << 20;
        if (n < 1 || uint32_t(n) >= hosts || (c2 != std::string::npos && !parse_size(rest.substr(c2 + 1), &bytes)))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "--flows %s: want incast:N[:BYTES] with 1 <= N < hosts (%u)",
                        spec.c_str(), hosts);
        for (uint32_t h = 1; h <= uint32_t(n); ++h) plan.messages.push_back(sim.add_message(sim.add_qp(h, 0), bytes));
        return IBEX_OK;
    }
    if (plan.kind == "cdf") {
        if (!duration_ns) return fail(IBEX_ERR_INVALID_ARGUMENT, "--flows cdf draws arrivals for --duration-us; give it");
        const size_t c2 = rest.find(':');
        const std::string file = rest.substr(0, c2);
        const double load = c2 == std::string::npos ? 0.5 : std::strtod(rest.c_str() + c2 + 1, nullptr);
        if (!(load > 0 && load <= 1)) return fail(IBEX_ERR_INVALID_ARGUMENT, "--flows cdf: load must be in (0, 1]");
        std::ifstream f(file);
        if (!f) return fail_errno(IBEX_ERR_INVALID_ARGUMENT, errno, "--flows cdf: cannot read %s", file.c_str());
        std::stringstream ss;
        ss << f.rdbuf();
        SizeCdf cdf;
        IBEX_TRY(parse_cdf(ss.str(), cdf));
        // Each host starts flows as a Poisson process whose mean rate fills `load` of its link.
        const double mean_bytes = std::max(1.0, cdf.mean());
        const double per_ns = load * host_gbps / 8 / mean_bytes;
        std::mt19937_64 rng(seed);
        std::exponential_distribution<double> gap(per_ns);
        std::uniform_real_distribution<double> u(0, 1);
        for (uint32_t h = 0; h < hosts; ++h) {
            double t = gap(rng);
            for (int k = 0; t < double(duration_ns) && k < 10'000'000; ++k, t += gap(rng)) {
                uint32_t dst = static_cast<uint32_t>(u(rng) * (hosts - 1));
                if (dst >= h) ++dst;
                const uint64_t bytes = std::max<uint64_t>(1, static_cast<uint64_t>(cdf.sample(u(rng))));
                plan.messages.push_back(sim.add_message(sim.add_qp(h, dst), bytes, {}, static_cast<uint64_t>(t)));
            }
        }
        return IBEX_OK;
    }
    return fail(IBEX_ERR_INVALID_ARGUMENT, "--flows %s: not long, incast:N[:BYTES] or cdf:FILE[:LOAD]", spec.c_str());
}

} // namespace ibex::simtool
