#include "ibex_perftest/report.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>

namespace ibex::perftest {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// bytes per ns -> report unit per second
double rate(double bytes, double ns, bool gbits) {
    if (ns <= 0) return 0;
    const double bytes_per_s = bytes * 1e9 / ns;
    return gbits ? bytes_per_s * 8 / 1e9 : bytes_per_s / kMiB;
}

std::string num(double v) {
    if (!std::isfinite(v)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

std::string str(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += char(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += char(c);
        }
    }
    return o + "\"";
}

std::string gid_text(const uint8_t *g) {
    char b[64];
    int n = 0;
    for (int i = 0; i < 16; ++i) n += std::snprintf(b + n, sizeof b - size_t(n), i ? ":%02x" : "%02x", g[i]);
    return b;
}

std::string key_json(const KeyRecord &k) {
    char b[256];
    std::snprintf(b, sizeof b,
                  "{\"lid\": %u, \"qpn\": %u, \"psn\": %u, \"rkey\": %u, \"vaddr\": %" PRIu64 ", \"gid\": %s}",
                  unsigned(k.lid), k.qpn, k.psn, k.rkey, k.vaddr, str(gid_text(k.gid)).c_str());
    return b;
}

std::string common_json(const Options &o, const HeaderInfo &h) {
    std::string s = "{\n";
    s += "  \"test\": " + str(o.is_bw() ? "write_bw" : "write_lat") + ",\n";
    s += "  \"tool\": " + str(tool_name(o.test)) + ",\n";
    s += "  \"role\": " + str(o.is_server() ? "server" : "client") + ",\n";
    s += "  \"device\": " + str(h.device) + ",\n";
    s += "  \"connection\": \"RC\",\n";
    s += "  \"mtu\": " + std::to_string(h.mtu) + ",\n";
    s += "  \"tx_depth\": " + std::to_string(h.tx_depth) + ",\n";
    s += "  \"duration_s\": " + std::to_string(o.duration) + ",\n";
    s += "  \"local\": " + key_json(h.local) + ",\n";
    s += "  \"remote\": " + key_json(h.remote) + ",\n";
    return s;
}

} // namespace

BwResult bw_result(uint64_t bytes, uint64_t iters, const std::vector<uint64_t> &tposted,
                   const std::vector<uint64_t> &tcompleted, uint32_t cq_mod, bool gbits, bool peak) {
    BwResult r;
    r.bytes = bytes;
    r.iters = iters;
    if (!iters) return r;
    const double total_ns = double(tcompleted[iters - 1] - tposted[0]);
    r.avg = rate(double(bytes) * double(iters), total_ns, gbits);
    r.msg_rate_mpps = total_ns > 0 ? double(iters) * 1e3 / total_ns : 0;
    if (peak) {
        // The signaled WRs: every cq_mod-th and the last.
        std::vector<uint64_t> signaled;
        for (uint64_t j = cq_mod - 1; j < iters; j += cq_mod) signaled.push_back(j);
        if (signaled.empty() || signaled.back() != iters - 1) signaled.push_back(iters - 1);
        double best = std::numeric_limits<double>::infinity();
        size_t first = 0;
        // perftest tries every start; for very long runs sample the starts so the search
        // stays near 5e7 steps.
        const uint64_t work = iters * uint64_t(signaled.size());
        const uint64_t stride = work > 50000000 ? work / 50000000 + 1 : 1;
        for (uint64_t i = 0; i < iters; i += stride) {
            while (first < signaled.size() && signaled[first] < i) ++first;
            for (size_t s = first; s < signaled.size(); ++s) {
                const uint64_t j = signaled[s];
                const double per_msg = double(tcompleted[j] - tposted[i]) / double(j - i + 1);
                best = std::min(best, per_msg);
            }
        }
        if (std::isfinite(best) && best > 0) r.peak = rate(double(bytes), best, gbits);
    }
    return r;
}

BwResult bw_result_avg(uint64_t bytes, uint64_t iters, uint64_t first_post_ns, uint64_t last_completion_ns, bool gbits) {
    BwResult r;
    r.bytes = bytes;
    r.iters = iters;
    const double ns = double(last_completion_ns - first_post_ns);
    r.avg = rate(double(bytes) * double(iters), ns, gbits);
    r.msg_rate_mpps = ns > 0 ? double(iters) * 1e3 / ns : 0;
    return r;
}

LatResult lat_result(uint64_t bytes, const std::vector<uint64_t> &tposted, int rtt_factor) {
    LatResult r;
    r.bytes = bytes;
    r.iters = tposted.size();
    if (tposted.size() < 4) return r;
    std::vector<double> d;
    d.reserve(tposted.size() - 1);
    for (size_t i = 0; i + 1 < tposted.size(); ++i) d.push_back(double(tposted[i + 1] - tposted[i]) / 1000.0 / rtt_factor);
    std::sort(d.begin(), d.end());
    d.resize(d.size() - 2); // the 2 largest samples are dropped, as perftest does
    const size_t n = d.size();
    r.t_min = d.front();
    r.t_max = d.back();
    r.t_typical = (n % 2) ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
    double sum = 0;
    for (double x : d) sum += x;
    r.t_avg = sum / double(n);
    double var = 0;
    for (double x : d) var += (x - r.t_avg) * (x - r.t_avg);
    r.t_stdev = std::sqrt(var / double(n));
    auto rank = [&](double p) {
        size_t k = static_cast<size_t>(std::ceil(p * double(n)));
        if (k < 1) k = 1;
        if (k > n) k = n;
        return d[k - 1];
    };
    r.p99 = rank(0.99);
    r.p999 = rank(0.999);
    return r;
}

void print_header(FILE *out, const HeaderInfo &h) {
    std::fprintf(out, "%s", kResultLine);
    std::fprintf(out, "                    %s\n", h.title.c_str());
    std::fprintf(out, " Dual-port       : OFF\t\tDevice         : %s\n", h.device.c_str());
    std::fprintf(out, " Number of qps   : 1\t\tTransport type : IB\n");
    std::fprintf(out, " Connection type : RC\t\tUsing SRQ      : OFF\n");
    std::fprintf(out, " TX depth        : %u\n", h.tx_depth);
    if (h.cq_mod) std::fprintf(out, " CQ Moderation   : %u\n", h.cq_mod);
    std::fprintf(out, " Mtu             : %d[B]\n", h.mtu);
    std::fprintf(out, " Link type       : Ethernet\n");
    std::fprintf(out, " GID index       : 0\n");
    std::fprintf(out, " Max inline data : 0[B]\n");
    std::fprintf(out, " rdma_cm QPs\t : OFF\n");
    std::fprintf(out, " Data ex. method : Ethernet\n");
    std::fprintf(out, "%s", kResultLine);
    auto side = [&](const char *who, const KeyRecord &k) {
        std::fprintf(out, " %s address: LID %#04x QPN %#06x PSN %#06x RKey %#08x VAddr %#016llx\n", who, k.lid, k.qpn,
                     k.psn, k.rkey, static_cast<unsigned long long>(k.vaddr));
        std::fprintf(out, " GID: ");
        for (int i = 0; i < 16; ++i) std::fprintf(out, i ? ":%02d" : "%02d", k.gid[i]);
        std::fprintf(out, "\n");
    };
    side("local", h.local);
    side("remote", h.remote);
    std::fprintf(out, "%s", kResultLine);
}

void print_bw_table_header(FILE *out, bool gbits) {
    if (gbits)
        std::fprintf(out, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
    else
        std::fprintf(out, " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n");
}

void print_bw_line(FILE *out, const BwResult &r) {
    std::fprintf(out, " %-7" PRIu64 "    %-10" PRIu64 "       %-7.2f            %-7.2f            %-7.6f\n", r.bytes,
                 r.iters, r.peak, r.avg, r.msg_rate_mpps);
    std::fflush(out);
}

void print_lat_table_header(FILE *out) {
    std::fprintf(out, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
                      "t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
}

void print_lat_line(FILE *out, const LatResult &r) {
    std::fprintf(out,
                 " %-7" PRIu64 " %-10" PRIu64 "  %-7.2f        %-7.2f      %-7.2f          %-7.2f        %-7.2f"
                 "          %-7.2f                %-7.2f\n",
                 r.bytes, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
    std::fflush(out);
}

std::string bw_json(const Options &o, const HeaderInfo &h, const std::vector<BwResult> &rows) {
    std::string s = common_json(o, h);
    s += "  \"units\": " + str(o.report_gbits ? "Gb/sec" : "MiB/sec") + ",\n";
    s += "  \"results\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
        const BwResult &r = rows[i];
        s += i ? ",\n    " : "\n    ";
        s += "{\"bytes\": " + std::to_string(r.bytes) + ", \"iterations\": " + std::to_string(r.iters) +
             ", \"bw_peak\": " + num(r.peak) + ", \"bw_average\": " + num(r.avg) +
             ", \"msg_rate_mpps\": " + num(r.msg_rate_mpps) + "}";
    }
    s += rows.empty() ? "]\n}\n" : "\n  ]\n}\n";
    return s;
}

std::string lat_json(const Options &o, const HeaderInfo &h, const std::vector<LatResult> &rows) {
    std::string s = common_json(o, h);
    s += "  \"units\": \"usec\",\n";
    s += "  \"results\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
        const LatResult &r = rows[i];
        s += i ? ",\n    " : "\n    ";
        s += "{\"bytes\": " + std::to_string(r.bytes) + ", \"iterations\": " + std::to_string(r.iters) +
             ", \"t_min\": " + num(r.t_min) + ", \"t_max\": " + num(r.t_max) + ", \"t_typical\": " + num(r.t_typical) +
             ", \"t_avg\": " + num(r.t_avg) + ", \"t_stdev\": " + num(r.t_stdev) + ", \"p99\": " + num(r.p99) +
             ", \"p99_9\": " + num(r.p999) + "}";
    }
    s += rows.empty() ? "]\n}\n" : "\n  ]\n}\n";
    return s;
}

bool write_json(const Options &o, const std::string &doc, std::string *err) {
    if (o.json_path.empty() || o.json_path == "-") {
        std::fwrite(doc.data(), 1, doc.size(), stdout);
        std::fflush(stdout);
        return true;
    }
    FILE *f = std::fopen(o.json_path.c_str(), "w");
    if (!f) {
        *err = "cannot write " + o.json_path + ": " + std::strerror(errno);
        return false;
    }
    const bool ok = std::fwrite(doc.data(), 1, doc.size(), f) == doc.size();
    if (std::fclose(f) != 0 || !ok) {
        *err = "cannot write " + o.json_path;
        return false;
    }
    return true;
}

} // namespace ibex::perftest
