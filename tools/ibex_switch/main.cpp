// ibex_switch: a software switch for soft RoCEv2 endpoints on loopback (README.md).
//   ibex_switch --port 127.0.0.1:5000=127.0.0.2:4791 --port 127.0.0.1:5001=127.0.0.3:4791
//               --rate 2000 --duration 10 --csv queue.csv
//   ibex_switch --memif /tmp/sw0.sock=10.70.0.1,/tmp/sw1.sock=10.70.0.2 --rate 2000
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ibex/ibex.h>

#include "bench/incast/incast.h"
#include "tools/ibex_switch/switch.h"
#include "tools/ibex_switch/switch_ports.h"
#include "transport/soft/dpdk/memif_fabric.h"

using namespace ibex::sw;
using ibex::soft::NetAddr;

namespace {

std::atomic<bool> g_stop{false};

void usage() {
    std::fprintf(stderr,
                 "usage: ibex_switch --port SWITCH_ADDR=ENDPOINT_ADDR [--port ...] [options]\n"
                 "  port i listens on SWITCH_ADDR (ip:port, port 0 = any) for endpoint ENDPOINT_ADDR;\n"
                 "  endpoints address peer j as port j's SWITCH_ADDR.\n"
                 "   or: ibex_switch --memif SOCKET=ENDPOINT_IP[,SOCKET=ENDPOINT_IP...] [options]\n"
                 "  port i serves memif SOCKET (DPDK) for the endpoint with ENDPOINT_IP, which opens\n"
                 "  dpdk:memif:SOCKET,role=client,ip=ENDPOINT_IP; frames go by destination IP.\n"
                 "  --rate MBPS        egress link rate of every port (default 2000)\n"
                 "  --buffer BYTES     buffer of all queues (default 2097152)\n"
                 "  --reserve BYTES    of it, kept by each port for itself (default 32768)\n"
                 "  --kmin BYTES --kmax BYTES --pmax P   RED/ECN marking (default 5120 204800 0.01)\n"
                 "  --no-ecn           never mark\n"
                 "  --pause [--xoff BYTES --xon BYTES]   PFC-style pause per egress queue\n"
                 "  --duration SEC     stop after SEC seconds (default: until SIGINT/SIGTERM)\n"
                 "  --sample-us US     time-series period (default 1000)\n"
                 "  --spin-us US       keep polling this long after a packet before sleeping (default 200)\n"
                 "  --csv PATH         write the per-port time series\n"
                 "incast mode (endpoints in this process; port 0 is the receiver):\n"
                 "  --incast N [--dcqcn off|paper|mlx5] [--line-rate MBPS] [--message BYTES] [--outstanding K]\n");
}

bool num(const char *s, double &out) {
    char *end = nullptr;
    out = std::strtod(s, &end);
    return end != s && !*end && out >= 0;
}

} // namespace

int main(int argc, char **argv) {
    SwitchConfig cfg;
    std::vector<std::pair<NetAddr, NetAddr>> ports;
    double duration = 0;
    std::string csv;
    IncastConfig inc;
    bool incast = false;
    std::string memif;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        double v = 0;
        auto need_num = [&](const char *what) {
            if (!has || !num(argv[++i], v)) {
                std::fprintf(stderr, "ibex_switch: %s needs a non-negative number\n", what);
                std::exit(2);
            }
        };
        if (a == "--port" && has) {
            const std::string spec = argv[++i];
            const size_t eq = spec.find('=');
            NetAddr l, e;
            if (eq == std::string::npos || !parse_addr(spec.substr(0, eq), l) || !parse_addr(spec.substr(eq + 1), e)) {
                std::fprintf(stderr, "ibex_switch: bad --port \"%s\" (want ip:port=ip:port)\n", spec.c_str());
                return 2;
            }
            ports.push_back({l, e});
        } else if (a == "--memif" && has) {
            if (!memif.empty()) memif += ','; // repeatable, like --port
            memif += argv[++i];
        } else if (a == "--rate") {
            need_num("--rate");
            cfg.link_mbps = v;
        } else if (a == "--buffer") {
            need_num("--buffer");
            cfg.buffer_bytes = uint64_t(v);
        } else if (a == "--reserve") {
            need_num("--reserve");
            cfg.reserve_bytes = uint64_t(v);
        } else if (a == "--kmin") {
            need_num("--kmin");
            cfg.red.kmin_bytes = uint64_t(v);
        } else if (a == "--kmax") {
            need_num("--kmax");
            cfg.red.kmax_bytes = uint64_t(v);
        } else if (a == "--pmax") {
            need_num("--pmax");
            cfg.red.pmax = v;
        } else if (a == "--no-ecn") {
            cfg.ecn = false;
        } else if (a == "--pause") {
            cfg.pause = true;
        } else if (a == "--xoff") {
            need_num("--xoff");
            cfg.xoff_bytes = uint64_t(v);
        } else if (a == "--xon") {
            need_num("--xon");
            cfg.xon_bytes = uint64_t(v);
        } else if (a == "--duration") {
            need_num("--duration");
            duration = v;
        } else if (a == "--sample-us") {
            need_num("--sample-us");
            cfg.sample_ns = uint64_t(v * 1000);
        } else if (a == "--spin-us") {
            need_num("--spin-us");
            cfg.spin_ns = uint64_t(v * 1000);
        } else if (a == "--incast") {
            need_num("--incast");
            incast = true;
            inc.senders = int(v);
        } else if (a == "--dcqcn" && has) {
            inc.dcqcn = argv[++i];
        } else if (a == "--line-rate") {
            need_num("--line-rate");
            inc.line_rate_mbps = v;
        } else if (a == "--message") {
            need_num("--message");
            inc.message_bytes = uint32_t(v);
        } else if (a == "--outstanding") {
            need_num("--outstanding");
            inc.outstanding = int(v);
        } else if (a == "--csv" && has) {
            csv = argv[++i];
        } else {
            usage();
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    if (incast) {
        if (inc.senders < 1 || inc.senders > 64 || duration <= 0 || inc.message_bytes == 0 || inc.outstanding < 1) {
            usage();
            return 2;
        }
        inc.sw = cfg;
        inc.seconds = duration;
        const IncastResult r = run_incast(inc);
        std::printf("%s", format_result(inc, r).c_str());
        if (!r.ok) return 1;
        // One machine-readable line for scripts (bench/incast).
        std::printf("csv,%s,%.4f,%.4f,%.1f,%.1f,%.1f,%.1f,%llu,%llu,%llu,%llu,%llu\n", inc.dcqcn.c_str(), r.utilisation,
                    r.jain_last_half, r.queue_p99_bytes / 1024.0, r.queue_max_bytes / 1024.0,
                    r.queue_p90_last_half / 1024.0, r.queue_p99_last_half / 1024.0, (unsigned long long)r.drops,
                    (unsigned long long)r.drops_last_half, (unsigned long long)r.marks, (unsigned long long)r.cnps_sent,
                    (unsigned long long)r.retransmitted);
        std::printf("%s", r.sw->summary().c_str());
        if (const char *path = std::getenv("IBEX_INCAST_RATES")) {
            if (FILE *f = std::fopen(path, "w")) {
                std::fprintf(f, "t_s");
                for (int i = 0; i < inc.senders; ++i) std::fprintf(f, ",rate%d_mbps,alpha%d", i, i);
                std::fprintf(f, "\n");
                for (const RateSample &s : r.rates) {
                    std::fprintf(f, "%.3f", s.t_s);
                    for (size_t i = 0; i < s.rate_mbps.size(); ++i) std::fprintf(f, ",%.2f,%.4f", s.rate_mbps[i], s.alpha[i]);
                    std::fprintf(f, "\n");
                }
                std::fclose(f);
            }
        }
        std::string err;
        if (!csv.empty() && !r.sw->write_csv(csv, err)) {
            std::fprintf(stderr, "ibex_switch: %s\n", err.c_str());
            return 1;
        }
        return 0;
    }
    std::vector<std::unique_ptr<ibex::soft::Port>> ios;
    std::vector<ibex::soft::MemifFabricPort> specs;
    if (!memif.empty()) {
        std::string err;
        if (!parse_memif_ports(memif, specs, err)) {
            std::fprintf(stderr, "ibex_switch: %s\n", err.c_str());
            return 2;
        }
        ibex_status_t st;
        if ((ios = ibex::soft::open_memif_fabric(specs, &st)).empty()) {
            std::fprintf(stderr, "ibex_switch: %s\n", ibex_last_error());
            return 1;
        }
    }
    if (ports.size() + ios.size() < 2 || (!ports.empty() && !ios.empty()) || cfg.link_mbps <= 0 ||
        cfg.red.kmax_bytes < cfg.red.kmin_bytes || cfg.red.pmax > 1 || cfg.sample_ns == 0) {
        usage();
        return 2;
    }
    Switch sw(cfg);
    for (size_t i = 0; i < ios.size(); ++i) {
        const NetAddr endpoint{specs[i].endpoint_ip, 0};
        std::printf("port %zu: memif %s -> endpoint %s\n", i, specs[i].socket.c_str(), format_addr(endpoint).c_str());
        sw.add_port(std::move(ios[i]), endpoint);
    }
    for (auto &[local, endpoint] : ports) {
        std::string err;
        auto io = open_udp_switch_port(local, err);
        if (!io) {
            std::fprintf(stderr, "ibex_switch: %s\n", err.c_str());
            return 1;
        }
        std::printf("port %zu: %s -> endpoint %s\n", sw.ports(), format_addr(io->local()).c_str(),
                    format_addr(endpoint).c_str());
        sw.add_port(std::move(io), endpoint);
    }
    std::printf("rate %.0f Mbit/s per port, buffer %llu bytes, ecn %s (Kmin %llu Kmax %llu Pmax %.3f), pause %s\n",
                cfg.link_mbps, (unsigned long long)cfg.buffer_bytes, cfg.ecn ? "on" : "off",
                (unsigned long long)cfg.red.kmin_bytes, (unsigned long long)cfg.red.kmax_bytes, cfg.red.pmax,
                cfg.pause ? "on" : "off");
    std::fflush(stdout);
    std::signal(SIGINT, [](int) { g_stop = true; });
    std::signal(SIGTERM, [](int) { g_stop = true; });
    sw.run(g_stop, uint64_t(duration * 1e9));
    std::printf("%s", sw.summary().c_str());
    if (!csv.empty()) {
        std::string err;
        if (!sw.write_csv(csv, err)) {
            std::fprintf(stderr, "ibex_switch: %s\n", err.c_str());
            return 1;
        }
        std::printf("time series: %s\n", csv.c_str());
    }
    return 0;
}
