#include "tools/ibex_perftest/report.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/base/config.h"

namespace ibex::perftest {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// bytes over ns -> report unit per second (MiB = 2^20 bytes; Gb = 10^9 bits)
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

std::string keys_json(const std::vector<KeyRecord> &keys) {
    std::string s = "[";
    for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + key_json(keys[i]);
    return s + "]";
}

std::string common_json(const Options &o, const HeaderInfo &h) {
    std::string s = "{\n";
    s += "  \"test\": " + str(test_tag(o.test)) + ",\n";
    s += "  \"title\": " + str(h.title) + ",\n";
    s += "  \"tool\": " + str(tool_name(o.test)) + ",\n";
    s += "  \"role\": " + str(o.is_server() ? "server" : "client") + ",\n";
    s += "  \"device\": " + str(h.device) + ",\n";
    s += "  \"connection\": \"RC\",\n";
    s += "  \"num_qps\": " + std::to_string(h.num_qps) + ",\n";
    s += "  \"mtu\": " + std::to_string(h.mtu) + ",\n";
    s += "  \"tx_depth\": " + std::to_string(o.tx_depth) + ",\n";
    s += "  \"bidirectional\": " + std::string(o.bidirectional ? "true" : "false") + ",\n";
    s += "  \"duration_s\": " + std::to_string(o.duration) + ",\n";
    s += "  \"cq_mod\": " + std::to_string(h.cq_mod) + ",\n";
    s += "  \"post_list\": " + std::to_string(h.post_list) + ",\n";
    s += "  \"inline_size\": " + std::to_string(h.inline_size) + ",\n";
    s += "  \"traffic_class\": " + std::to_string(h.traffic_class) + ",\n";
    s += "  \"sl\": " + std::to_string(h.sl) + ",\n";
    s += "  \"qp_timeout\": " + std::to_string(o.qp_timeout) + ",\n";
    s += "  \"numa\": " + str(h.numa) + ",\n";
    s += "  \"memory\": " + str(h.memory) + ",\n";
    s += "  \"local\": " + keys_json(h.local) + ",\n";
    s += "  \"remote\": " + keys_json(h.remote) + ",\n";
    return s;
}

std::string rtx_json(const CcReport &cc) {
    if (!cc.show_rtx) return "";
    const ibex_qp_retransmit_t &r = cc.rtx;
    char b[512];
    std::snprintf(b, sizeof b,
                  "  \"retransmit\": {\"mode\": \"%s\", \"timeouts\": %" PRIu64 ", \"tail_timeouts\": %" PRIu64
                  ", \"naks_sent\": %" PRIu64 ", \"naks_received\": %" PRIu64 ", \"packets_resent\": %" PRIu64
                  ", \"ooo_packets_held\": %" PRIu64 ", \"ooo_window\": %u, \"inflight_cap\": %u},\n",
                  r.mode == IBEX_RETRANSMIT_SELECTIVE ? "selective" : "gbn", r.timeouts, r.tail_timeouts, r.naks_sent,
                  r.naks_received, r.packets_resent, r.ooo_packets_held, r.ooo_window, r.inflight_cap);
    return b;
}

std::string cc_json(const CcReport &cc) {
    if (!cc.show) return rtx_json(cc);
    char b[256];
    std::snprintf(b, sizeof b,
                  "  \"congestion\": {\"dcqcn\": %s, \"cnp_sent\": %" PRIu64 ", \"cnp_handled\": %" PRIu64
                  ", \"ecn_marked\": %" PRIu64 ", \"qps\": [",
                  cc.qps.empty() ? "false" : "true", cc.counters.np_cnp_sent, cc.counters.rp_cnp_handled,
                  cc.counters.np_ecn_marked_roce_packets);
    std::string s = b;
    for (size_t i = 0; i < cc.qps.size(); ++i) {
        const ibex_qp_cc_t &q = cc.qps[i];
        s += (i ? ", " : "") + std::string("{\"qpn\": ") + std::to_string(cc.qpns[i]) +
             ", \"rate_mbps\": " + num(q.rate_mbps) + ", \"target_rate_mbps\": " + num(q.target_rate_mbps) +
             ", \"alpha\": " + num(q.alpha) + ", \"cnp_handled\": " + std::to_string(q.rp_cnp_handled) + "}";
    }
    return s + "]},\n" + rtx_json(cc);
}

std::string bw_rows_json(const std::vector<BwResult> &rows) {
    std::string s = "[";
    for (size_t i = 0; i < rows.size(); ++i) {
        const BwResult &r = rows[i];
        s += i ? ",\n    " : "\n    ";
        s += "{\"bytes\": " + std::to_string(r.bytes) + ", \"iterations\": " + std::to_string(r.iters) +
             ", \"bw_peak\": " + num(r.peak) + ", \"bw_average\": " + num(r.avg) +
             ", \"msg_rate_mpps\": " + num(r.msg_rate_mpps) + "}";
    }
    return s + (rows.empty() ? "]" : "\n  ]");
}

} // namespace

BwResult bw_result(uint64_t bytes, const std::vector<uint64_t> &tposted, const std::vector<uint64_t> &tcompleted,
                   const std::vector<uint64_t> &signaled, bool gbits) {
    BwResult r;
    r.bytes = bytes;
    r.iters = tposted.size();
    if (tposted.empty() || signaled.empty()) return r;
    const uint64_t n = tposted.size();
    const double total_ns = double(tcompleted[signaled.back()] - tposted[0]);
    r.avg = rate(double(bytes) * double(n), total_ns, gbits);
    r.msg_rate_mpps = total_ns > 0 ? double(n) * 1e3 / total_ns : 0;
    double best = std::numeric_limits<double>::infinity();
    size_t first = 0;
    // perftest tries every start; for long runs sample the starts so the search stays
    // near 5e7 steps.
    const uint64_t work = n * uint64_t(signaled.size());
    const uint64_t stride = work > 50000000 ? work / 50000000 + 1 : 1;
    for (uint64_t i = 0; i < n; i += stride) {
        while (first < signaled.size() && signaled[first] < i) ++first;
        for (size_t s = first; s < signaled.size(); ++s) {
            const uint64_t j = signaled[s];
            const double per_msg = double(tcompleted[j] - tposted[i]) / double(j - i + 1);
            best = std::min(best, per_msg);
        }
    }
    if (std::isfinite(best) && best > 0) r.peak = rate(double(bytes), best, gbits);
    return r;
}

BwResult bw_result_avg(uint64_t bytes, uint64_t messages, uint64_t first_ns, uint64_t last_ns, bool gbits) {
    BwResult r;
    r.bytes = bytes;
    r.iters = messages;
    const double ns = last_ns > first_ns ? double(last_ns - first_ns) : 0;
    r.avg = rate(double(bytes) * double(messages), ns, gbits);
    r.msg_rate_mpps = ns > 0 ? double(messages) * 1e3 / ns : 0;
    return r;
}

BwResult bw_sum(const BwResult &a, const BwResult &b) {
    BwResult r = a;
    r.peak += b.peak;
    r.avg += b.avg;
    r.msg_rate_mpps += b.msg_rate_mpps;
    return r;
}

std::vector<double> lat_samples(const std::vector<uint64_t> &tposted, int rtt_factor) {
    std::vector<double> d;
    d.reserve(tposted.size() > 1 ? tposted.size() - 1 : 0);
    for (size_t i = 0; i + 1 < tposted.size(); ++i) d.push_back(double(tposted[i + 1] - tposted[i]) / 1000.0 / rtt_factor);
    return d;
}

void print_lat_histogram(FILE *out, std::vector<double> samples, bool unsorted) {
    if (!unsorted) std::sort(samples.begin(), samples.end());
    std::fprintf(out, "#, usec\n");
    for (size_t i = 0; i < samples.size(); ++i) std::fprintf(out, "%zu, %.3f\n", i + 1, samples[i]);
}

LatResult lat_result(uint64_t bytes, const std::vector<uint64_t> &tposted, int rtt_factor) {
    LatResult r;
    r.bytes = bytes;
    r.iters = tposted.size();
    if (tposted.size() < 4) return r;
    std::vector<double> d = lat_samples(tposted, rtt_factor);
    std::sort(d.begin(), d.end());
    // perftest keeps all but the 2 largest samples for the median, average and deviation;
    // its maximum and percentiles index the sorted samples at n, ceil(0.99 n) and
    // ceil(0.999 n) (0-based, n = the kept count), so they may reach the second largest.
    const size_t n = d.size() - 2;
    r.t_min = d.front();
    r.t_max = d[n];
    r.t_typical = (n % 2) ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += d[i];
    r.t_avg = sum / double(n);
    double var = 0;
    for (size_t i = 0; i < n; ++i) var += (d[i] - r.t_avg) * (d[i] - r.t_avg);
    r.t_stdev = std::sqrt(var / double(n));
    auto at = [&](double p) { return d[std::min(n, static_cast<size_t>(std::ceil(p * double(n))))]; };
    r.p99 = at(0.99);
    r.p999 = at(0.999);
    return r;
}

std::string to_msg(const BwResult &r) {
    char b[kCtrlMsgSize];
    std::snprintf(b, sizeof b, "bw %" PRIu64 " %" PRIu64 " %.17g %.17g %.17g", r.bytes, r.iters, r.peak, r.avg,
                  r.msg_rate_mpps);
    return b;
}

std::string to_msg(const LatResult &r) {
    char b[kCtrlMsgSize];
    std::snprintf(b, sizeof b, "lat %" PRIu64 " %" PRIu64 " %.17g %.17g %.17g %.17g %.17g %.17g %.17g", r.bytes, r.iters,
                  r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999);
    return b;
}

bool from_msg(const std::string &m, BwResult *r) {
    return std::sscanf(m.c_str(), "bw %" SCNu64 " %" SCNu64 " %lg %lg %lg", &r->bytes, &r->iters, &r->peak, &r->avg,
                       &r->msg_rate_mpps) == 5;
}

bool from_msg(const std::string &m, LatResult *r) {
    return std::sscanf(m.c_str(), "lat %" SCNu64 " %" SCNu64 " %lg %lg %lg %lg %lg %lg %lg", &r->bytes, &r->iters,
                       &r->t_min, &r->t_max, &r->t_typical, &r->t_avg, &r->t_stdev, &r->p99, &r->p999) == 9;
}

std::string test_title(const Options &o) {
    static const char *const kVerb[] = {"Send", "RDMA_Write", "RDMA_Read", "Atomic"};
    std::string t = kVerb[static_cast<int>(o.test.verb)];
    if (o.test.verb == Verb::atomic)
        t += o.atomic_type == AtomicType::fetch_and_add ? " FETCH_AND_ADD" : " CMP_AND_SWAP";
    if (o.is_bw()) t += o.bidirectional ? " Bidirectional BW" : " BW";
    else t += " Latency";
    return t + " Test";
}

void print_header(FILE *out, const HeaderInfo &h) {
    std::fprintf(out, "%s", kResultLine);
    std::fprintf(out, "                    %s\n", h.title.c_str());
    std::fprintf(out, " Dual-port       : OFF\t\tDevice         : %s\n", h.device.c_str());
    std::fprintf(out, " Number of qps   : %u\t\tTransport type : IB\n", h.num_qps);
    std::fprintf(out, " Connection type : RC\t\tUsing SRQ      : OFF\n");
    if (h.tx_depth) std::fprintf(out, " TX depth        : %u\n", h.tx_depth);
    if (h.rx_depth) std::fprintf(out, " RX depth        : %u\n", h.rx_depth);
    if (h.cq_mod) std::fprintf(out, " CQ Moderation   : %u\n", h.cq_mod);
    std::fprintf(out, " Mtu             : %d[B]\n", h.mtu);
    std::fprintf(out, " Link type       : Ethernet\n");
    std::fprintf(out, " GID index       : 0\n");
    if (h.out_reads) std::fprintf(out, " Outstand reads  : %u\n", h.out_reads);
    else std::fprintf(out, " Max inline data : %u[B]\n", h.inline_size);
    if (h.post_list > 1) std::fprintf(out, " Post List       : %u\n", h.post_list);
    if (h.traffic_class) std::fprintf(out, " Traffic class   : %d (DSCP %d)\n", h.traffic_class, h.traffic_class >> 2);
    if (h.sl) std::fprintf(out, " Service level   : %d\n", h.sl);
    std::fprintf(out, " rdma_cm QPs\t : OFF\n");
    std::fprintf(out, " Data ex. method : Ethernet\n");
    std::fprintf(out, " NUMA binding    : %s\n", h.numa.c_str());
    std::fprintf(out, " Buffer memory   : %s\n", h.memory.c_str());
    std::fprintf(out, "%s", kResultLine);
    auto side = [&](const char *who, const KeyRecord &k) {
        std::fprintf(out, " %s address: LID %#04x QPN %#06x PSN %#06x RKey %#08x VAddr %#016llx\n", who, k.lid, k.qpn,
                     k.psn, k.rkey, static_cast<unsigned long long>(k.vaddr));
        // perftest prints the GID bytes in decimal; so do we, for scripts that parse it.
        std::fprintf(out, " GID: ");
        for (int i = 0; i < 16; ++i) std::fprintf(out, i ? ":%02d" : "%02d", k.gid[i]);
        std::fprintf(out, "\n");
    };
    for (const KeyRecord &k : h.local) side("local", k);
    for (const KeyRecord &k : h.remote) side("remote", k);
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

CcReport query_cc(ibex_context_t *ctx, const std::vector<ibex_qp_t *> &qps) {
    CcReport cc;
    cc.counters.size = sizeof cc.counters;
    if (ibex_query_counters(ctx, &cc.counters) != IBEX_OK) return cc;
    for (ibex_qp_t *qp : qps) {
        ibex_qp_cc_t q{};
        q.size = sizeof q;
        // NOT_SUPPORTED: the provider has no software DCQCN (verbs: the NIC runs it).
        if (ibex_query_qp_cc(qp, &q) == IBEX_OK && q.enabled) {
            cc.qpns.push_back(ibex_qp_num(qp));
            cc.qps.push_back(q);
        }
    }
    for (ibex_qp_t *qp : qps) {
        ibex_qp_retransmit_t r{};
        r.size = sizeof r;
        // NOT_SUPPORTED: the NIC retransmits (verbs).
        if (ibex_query_qp_retransmit(qp, &r) != IBEX_OK) continue;
        ibex_qp_retransmit_t &t = cc.rtx;
        t.mode = r.mode;
        t.timeouts += r.timeouts;
        t.tail_timeouts += r.tail_timeouts;
        t.naks_sent += r.naks_sent;
        t.naks_received += r.naks_received;
        t.packets_resent += r.packets_resent;
        t.ooo_packets_held += r.ooo_packets_held;
        t.ooo_window = r.ooo_window;
        t.inflight_cap = r.inflight_cap;
        cc.show_rtx = true;
    }
    const ibex_qp_retransmit_t &t = cc.rtx;
    cc.show_rtx = cc.show_rtx && (t.mode == IBEX_RETRANSMIT_SELECTIVE || t.timeouts || t.naks_sent ||
                                  t.naks_received || t.packets_resent ||
                                  ibex::config::get_bool("IBEX_PERFTEST_COUNTERS", false));
    const ibex_counters_t &c = cc.counters;
    cc.show = !cc.qps.empty() || c.np_cnp_sent || c.rp_cnp_handled || c.np_ecn_marked_roce_packets ||
              ibex::config::get_bool("IBEX_PERFTEST_COUNTERS", false);
    return cc;
}

void print_rtx(FILE *out, const CcReport &cc) {
    if (!cc.show_rtx) return;
    const ibex_qp_retransmit_t &r = cc.rtx;
    if (r.mode == IBEX_RETRANSMIT_SELECTIVE)
        std::fprintf(out, " Loss recovery   : selective (out-of-order store %u packets, in-flight cap %u)\n",
                     r.ooo_window, r.inflight_cap);
    else
        std::fprintf(out, " Loss recovery   : go-back-N\n");
    std::fprintf(out,
                 " timeouts %" PRIu64 "  tail timeouts %" PRIu64 "  NAKs sent %" PRIu64 "  NAKs received %" PRIu64
                 "  packets resent %" PRIu64 "  held out of order %" PRIu64 "\n",
                 r.timeouts, r.tail_timeouts, r.naks_sent, r.naks_received, r.packets_resent, r.ooo_packets_held);
}

void print_cc(FILE *out, const CcReport &cc) {
    print_rtx(out, cc);
    if (!cc.show) return;
    const ibex_counters_t &c = cc.counters;
    std::fprintf(out,
                 " DCQCN           : %s\n"
                 " CNPs sent       : %" PRIu64 "\t\tCNPs handled   : %" PRIu64 "\n"
                 " ECN-marked packets received : %" PRIu64 "\n",
                 cc.qps.empty() ? "off" : "on", c.np_cnp_sent, c.rp_cnp_handled, c.np_ecn_marked_roce_packets);
    for (size_t i = 0; i < cc.qps.size(); ++i) {
        const ibex_qp_cc_t &q = cc.qps[i];
        std::fprintf(out, " QP %#06x final rate : %.1f Mbit/s (target %.1f, alpha %.3f, CNPs handled %" PRIu64 ")\n",
                     cc.qpns[i], q.rate_mbps, q.target_rate_mbps, q.alpha, q.rp_cnp_handled);
    }
    if (ibex::config::get_bool("IBEX_PERFTEST_COUNTERS", false))
        std::fprintf(out,
                     " counters: tx_packets %" PRIu64 " rx_packets %" PRIu64 " retransmitted %" PRIu64
                     " ack_timeouts %" PRIu64 " seq_naks %" PRIu64 " out_of_sequence %" PRIu64 " duplicates %" PRIu64
                     " icrc_errors %" PRIu64 " rnr_naks_received %" PRIu64 " gso_trains %" PRIu64 " gro_trains %" PRIu64 "\n",
                     c.tx_packets, c.rx_packets, c.retransmitted_packets, c.local_ack_timeout_err, c.packet_seq_err,
                     c.out_of_sequence, c.duplicate_request, c.rx_icrc_errors, c.rnr_nak_received, c.tx_gso_trains,
                     c.rx_gro_trains);
}

std::string bw_json(const Options &o, const HeaderInfo &h, const std::vector<BwResult> &rows,
                    const std::vector<BwResult> &local, const std::vector<BwResult> &remote, const CcReport &cc) {
    std::string s = common_json(o, h);
    s += cc_json(cc);
    s += "  \"units\": " + str(o.report_gbits ? "Gb/sec" : "MiB/sec") + ",\n";
    if (o.report_both && o.bidirectional) {
        s += "  \"local_results\": " + bw_rows_json(local) + ",\n";
        s += "  \"remote_results\": " + bw_rows_json(remote) + ",\n";
    }
    s += "  \"results\": " + bw_rows_json(rows) + "\n}\n";
    return s;
}

std::string lat_json(const Options &o, const HeaderInfo &h, const std::vector<LatResult> &rows, const CcReport &cc) {
    std::string s = common_json(o, h);
    s += cc_json(cc);
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

void print_output(const Options &o, const std::vector<BwResult> &rows) {
    if (o.output != Output::bandwidth && o.output != Output::message_rate) return;
    for (const BwResult &r : rows) std::printf("%.2f\n", o.output == Output::bandwidth ? r.avg : r.msg_rate_mpps);
    std::fflush(stdout);
}

void print_output(const Options &o, const std::vector<LatResult> &rows) {
    if (o.output != Output::latency) return;
    for (const LatResult &r : rows) std::printf("%.2f\n", r.t_typical);
    std::fflush(stdout);
}

std::string limits_missed(const Options &o, const std::vector<BwResult> &rows) {
    const char *unit = o.report_gbits ? "Gb/sec" : "MiB/sec";
    char buf[256];
    for (const BwResult &r : rows) {
        if (o.limit_bw > 0 && r.avg < o.limit_bw) {
            std::snprintf(buf, sizeof buf, "%" PRIu64 " B: BW average %.2f %s is below the limit -w %.2f", r.bytes, r.avg,
                          unit, o.limit_bw);
            return buf;
        }
        if (o.limit_msgrate > 0 && r.msg_rate_mpps < o.limit_msgrate) {
            std::snprintf(buf, sizeof buf, "%" PRIu64 " B: MsgRate %.6f Mpps is below the limit -y %.6f", r.bytes,
                          r.msg_rate_mpps, o.limit_msgrate);
            return buf;
        }
    }
    return "";
}

} // namespace ibex::perftest
