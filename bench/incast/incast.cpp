#include "bench/incast/incast.h"

#include <ibex/ibex.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

#include "tests/support/qp_endpoint.h"
#include "tools/ibex_switch/switch_ports.h"

namespace ibex::sw {
namespace {

// One side of the scenario: the receiver has a QP per sender, each sender one QP.
using Side = test::QpEndpoint;

std::string last_error(const char *what, ibex_status_t st) {
    return std::string(what) + ": " + ibex_strerror(st) + ": " + ibex_last_error();
}

bool open_side(Side &s, const IncastConfig &cfg, int nqp, size_t bytes, std::string &err) {
    ibex_context_attr_t a = IBEX_CONTEXT_ATTR_INIT;
    a.dcqcn = cfg.dcqcn.c_str();
    a.dcqcn_line_rate_mbps = static_cast<uint32_t>(cfg.line_rate_mbps > 0 ? cfg.line_rate_mbps : cfg.sw.link_mbps);
    s.max_send_wr = 1024;
    s.max_recv_wr = 16;
    s.mr_access = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE;
    ibex_status_t st = s.open(bytes, "udp:lo", &a, 4096);
    if (st != IBEX_OK) return err = last_error("open", st), false;
    for (int i = 1; i < nqp; ++i) {
        ibex_qp_t *qp = nullptr;
        if ((st = s.add_qp(&qp)) != IBEX_OK) return err = last_error("qp", st), false;
    }
    std::memset(s.buf.data(), 0x5a, s.buf.size());
    return true;
}

soft::NetAddr addr_of(const ibex_ep_addr_t &e) {
    return {uint32_t(e.gid[12]) << 24 | uint32_t(e.gid[13]) << 16 | uint32_t(e.gid[14]) << 8 | e.gid[15], e.udp_port};
}

// The peer as seen through the switch: its QP, reached at the switch port standing for it.
ibex_ep_addr_t via(ibex_ep_addr_t e, const soft::NetAddr &port) {
    std::memset(e.gid, 0, 10);
    e.gid[10] = e.gid[11] = 0xff;
    e.gid[12] = uint8_t(port.ip >> 24);
    e.gid[13] = uint8_t(port.ip >> 16);
    e.gid[14] = uint8_t(port.ip >> 8);
    e.gid[15] = uint8_t(port.ip);
    e.udp_port = port.port;
    return e;
}

ibex_status_t post_write(Side &s, const Side &r, uint32_t len, uint64_t id) {
    return s.post_rdma(IBEX_WR_RDMA_WRITE, id, 0, len, r.va(), ibex_mr_rkey(r.mr));
}

uint64_t percentile(std::vector<uint64_t> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * double(v.size() - 1) + 0.5));
    return v[i];
}

} // namespace

double jain_index(const std::vector<double> &x) {
    double s = 0, s2 = 0;
    for (double v : x) s += v, s2 += v * v;
    return s2 > 0 ? s * s / (double(x.size()) * s2) : 0;
}

IncastResult run_incast(const IncastConfig &cfg) {
    IncastResult r;
    // The contexts' progress threads do the sending (and the pacing): this loop polls the
    // CQs only every millisecond and must not make them stand aside meanwhile.
    setenv("IBEX_APP_IDLE_US", "0", 0);
    // Six threads share the host's cores here: the progress threads block at once instead
    // of spinning. The scenario's threads (the contexts' progress threads inherit this
    // thread's nice value) ask for a higher priority than the host's other work, so that
    // the run measures DCQCN rather than how long the scheduler leaves a receiver
    // unscheduled; without root they keep their own.
    setenv("IBEX_POLL_SPIN_US", "0", 0);
    errno = 0;
    const int old_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    const bool reniced = errno == 0 && setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), -10) == 0;
    struct Restore {
        bool on;
        int nice;
        ~Restore() {
            if (on) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), nice);
        }
    } restore{reniced, old_nice};
    const int n = cfg.senders;
    Side rx;
    std::vector<Side> tx(static_cast<size_t>(n));
    r.owner = std::make_shared<Switch>(cfg.sw);
    r.sw = r.owner.get();
    Switch &sw = *r.sw;
    std::atomic<bool> stop{false};
    std::thread sw_thread;
    auto fail_with = [&](std::string e) {
        r.error = std::move(e);
        stop = true;
        if (sw_thread.joinable()) sw_thread.join();
        for (Side &s : tx) s.close();
        rx.close();
        return r;
    };
    std::string err;
    if (!open_side(rx, cfg, n, cfg.message_bytes, err)) return fail_with("receiver " + err);
    for (Side &s : tx)
        if (!open_side(s, cfg, 1, cfg.message_bytes, err)) return fail_with("sender " + err);

    // Port 0 stands for the receiver, port i + 1 for sender i.
    std::vector<ibex_ep_addr_t> rx_addr(static_cast<size_t>(n)), tx_addr(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        ibex_qp_local_addr(rx.qp_at(size_t(i)), &rx_addr[size_t(i)]);
        ibex_qp_local_addr(tx[size_t(i)].qp, &tx_addr[size_t(i)]);
    }
    for (int i = -1; i < n; ++i) {
        auto io = open_udp_switch_port({0x7f000001, 0}, err);
        if (!io) return fail_with("switch port: " + err);
        sw.add_port(std::move(io), addr_of(i < 0 ? rx_addr[0] : tx_addr[size_t(i)]));
    }
    for (int i = 0; i < n; ++i) {
        const ibex_ep_addr_t to_rx = via(rx_addr[size_t(i)], sw.port_addr(0));
        const ibex_ep_addr_t to_tx = via(tx_addr[size_t(i)], sw.port_addr(size_t(i) + 1));
        ibex_status_t st;
        if ((st = ibex_qp_connect(tx[size_t(i)].qp, &to_rx)) != IBEX_OK) return fail_with(last_error("connect", st));
        if ((st = ibex_qp_connect(rx.qp_at(size_t(i)), &to_tx)) != IBEX_OK) return fail_with(last_error("connect", st));
    }
    sw_thread = std::thread([&] {
        // The switch stands in for hardware: above the endpoints it serves.
        if (reniced) setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), -15);
        sw.run(stop, 0);
    });

    r.flows.resize(static_cast<size_t>(n));
    std::vector<int> inflight(static_cast<size_t>(n), 0);
    std::vector<bool> broken(static_cast<size_t>(n), false);
    const auto t0 = std::chrono::steady_clock::now();
    const auto end = t0 + std::chrono::duration<double>(cfg.seconds);
    // Bounded drain after the run: what is in flight completes or is abandoned.
    const auto drain_end = end + std::chrono::seconds(3);
    ibex_wc_t wc[64];
    auto next_rate_sample = t0;
    for (auto now = t0; now < drain_end; now = std::chrono::steady_clock::now()) {
        const bool running = now < end;
        bool busy = false;
        for (int i = 0; i < n; ++i) {
            Side &s = tx[size_t(i)];
            int got = 0;
            ibex_poll_cq(s.cq, 64, wc, &got);
            for (int k = 0; k < got; ++k) {
                --inflight[size_t(i)];
                if (wc[k].status == IBEX_WC_SUCCESS)
                    ++r.flows[size_t(i)].completed;
                else
                    ++r.flows[size_t(i)].errors, broken[size_t(i)] = true;
            }
            while (running && !broken[size_t(i)] && inflight[size_t(i)] < cfg.outstanding &&
                   post_write(s, rx, cfg.message_bytes, 0) == IBEX_OK)
                ++inflight[size_t(i)];
            busy |= inflight[size_t(i)] > 0;
        }
        if (!running && !busy) break;
        if (running && now >= next_rate_sample) {
            RateSample rs{std::chrono::duration<double>(now - t0).count(), {}, {}};
            for (Side &s : tx) {
                ibex_qp_cc_t c{};
                c.size = sizeof c;
                ibex_query_qp_cc(s.qp, &c);
                rs.rate_mbps.push_back(c.rate_mbps);
                rs.alpha.push_back(c.alpha);
            }
            r.rates.push_back(std::move(rs));
            next_rate_sample = now + std::chrono::milliseconds(10);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stop = true;
    sw_thread.join();

    for (int i = 0; i < n; ++i) {
        ibex_qp_cc_t c{};
        c.size = sizeof c;
        if (ibex_query_qp_cc(tx[size_t(i)].qp, &c) == IBEX_OK) {
            r.flows[size_t(i)].rate_mbps = c.rate_mbps;
            r.flows[size_t(i)].alpha = c.alpha;
            r.flows[size_t(i)].cnps_handled = c.rp_cnp_handled;
        }
        ibex_counters_t k{};
        tx[size_t(i)].query_counters(&k);
        r.retransmitted += k.retransmitted_packets;
    }
    ibex_counters_t rk{};
    rx.query_counters(&rk);
    r.cnps_sent = rk.np_cnp_sent;
    for (Side &s : tx) s.close();
    rx.close();

    // The bottleneck is port 0's egress: its samples give the queue and per-flow bytes.
    std::vector<const Sample *> s0;
    for (const Sample &s : sw.samples())
        if (s.port == 0 && s.t_ns <= uint64_t(cfg.seconds * 1e9)) s0.push_back(&s);
    if (s0.size() < 4) return r.error = "too few switch samples", r;
    const Sample &last = *s0.back();
    const Sample *half = s0[s0.size() / 2];
    const double dt_us = double(last.t_ns - half->t_ns) / 1e3;
    std::vector<double> rates;
    double total = 0;
    for (int i = 0; i < n; ++i) {
        FlowResult &f = r.flows[size_t(i)];
        f.bytes = last.from[size_t(i) + 1];
        f.mbps_last_half = double(last.from[size_t(i) + 1] - half->from[size_t(i) + 1]) * 8 / dt_us;
        rates.push_back(f.mbps_last_half);
        total += f.mbps_last_half;
    }
    r.utilisation = total / cfg.sw.link_mbps;
    r.jain_last_half = jain_index(rates);
    std::vector<uint64_t> q;
    for (const Sample *s : s0) q.push_back(s->queue_bytes);
    r.queue_p99_bytes = percentile(q, 0.99);
    std::vector<uint64_t> q2;
    for (size_t i = s0.size() / 2; i < s0.size(); ++i) q2.push_back(s0[i]->queue_bytes);
    r.queue_p90_last_half = percentile(q2, 0.90);
    r.queue_p99_last_half = percentile(q2, 0.99);
    r.drops_last_half = last.dropped - half->dropped;
    r.queue_max_bytes = sw.counters(0).max_queue_bytes;
    r.drops = sw.counters(0).dropped;
    r.switch_stalled_ms = double(sw.stalled_ns()) / 1e6;
    r.marks = sw.counters(0).marked;
    r.ok = true;
    return r;
}

std::string format_result(const IncastConfig &cfg, const IncastResult &r) {
    if (!r.ok) return "incast failed: " + r.error + "\n";
    char b[512];
    std::string out;
    std::snprintf(b, sizeof b,
                  "incast %d:1, dcqcn %s, link %.0f Mbit/s, %.1f s: utilisation %.3f, Jain %.3f (last half), queue "
                  "p99 %.1f KB max %.1f KB (last half p90 %.1f KB p99 %.1f KB), drops %llu (last half %llu), marks %llu, "
                  "CNPs %llu, retransmitted %llu, switch stalled %.0f ms\n",
                  cfg.senders, cfg.dcqcn.c_str(), cfg.sw.link_mbps, cfg.seconds, r.utilisation, r.jain_last_half,
                  r.queue_p99_bytes / 1024.0, r.queue_max_bytes / 1024.0, r.queue_p90_last_half / 1024.0,
                  r.queue_p99_last_half / 1024.0, (unsigned long long)r.drops, (unsigned long long)r.drops_last_half,
                  (unsigned long long)r.marks, (unsigned long long)r.cnps_sent, (unsigned long long)r.retransmitted,
                  r.switch_stalled_ms);
    out += b;
    for (size_t i = 0; i < r.flows.size(); ++i) {
        const FlowResult &f = r.flows[i];
        std::snprintf(b, sizeof b,
                      "  flow %zu: %.1f Mbit/s (last half), %llu WRITEs, %llu errors, DCQCN rate %.1f alpha %.3f "
                      "CNPs %llu\n",
                      i, f.mbps_last_half, (unsigned long long)f.completed, (unsigned long long)f.errors, f.rate_mbps,
                      f.alpha, (unsigned long long)f.cnps_handled);
        out += b;
    }
    return out;
}

} // namespace ibex::sw
