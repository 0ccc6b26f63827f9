// ibex_sumsrv: a summation server for the sumsrv allreduce (README.md).
//   ibex_sumsrv --listen 0.0.0.0:18600 [--device udp:eth0] [--threads 4]
// Workers find it through IBEX_SUMSRV=host:port[,host:port...].
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <ibex/ibex.h>

#include "tools/ibex_sumsrv/server.h"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop.store(true); }

void usage() {
    std::fprintf(stderr,
                 "usage: ibex_sumsrv [options]\n"
                 "  --listen HOST:PORT  where workers connect (default 0.0.0.0:18600; port 0 = any)\n"
                 "  --device NAME       the ibex device to serve on (default: the one each job's\n"
                 "                      workers name, which suits servers on the workers' host)\n"
                 "  --threads N         summing threads, the serving one included (default: min(4, cores))\n"
                 "  --port-file PATH    write the bound port there once listening (for scripts)\n"
                 "  --duration SEC      stop after SEC seconds (default: until SIGINT/SIGTERM)\n");
}

} // namespace

int main(int argc, char **argv) {
    ibex::sumsrv::ServerOptions opt;
    opt.listen = "0.0.0.0:18600";
    opt.threads = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
    std::string port_file;
    double duration = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--listen" && has) {
            opt.listen = argv[++i];
        } else if (a == "--device" && has) {
            opt.device = argv[++i];
        } else if (a == "--threads" && has) {
            opt.threads = std::atoi(argv[++i]);
            if (opt.threads < 1 || opt.threads > 256) {
                std::fprintf(stderr, "ibex_sumsrv: --threads wants 1..256\n");
                return 2;
            }
        } else if (a == "--port-file" && has) {
            port_file = argv[++i];
        } else if (a == "--duration" && has) {
            duration = std::atof(argv[++i]);
        } else if (a == "-h" || a == "--help") {
            usage();
            return 0;
        } else {
            std::fprintf(stderr, "ibex_sumsrv: unknown or incomplete option \"%s\"\n", a.c_str());
            usage();
            return 2;
        }
    }
    ibex::sumsrv::Server server;
    if (server.open(opt) != IBEX_OK) {
        std::fprintf(stderr, "ibex_sumsrv: %s\n", ibex_last_error());
        return 1;
    }
    std::printf("ibex_sumsrv: listening on port %u with %d summing threads\n", server.port(), opt.threads);
    std::fflush(stdout);
    if (!port_file.empty()) {
        const std::string tmp = port_file + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "w");
        if (!f || std::fprintf(f, "%u\n", server.port()) < 0 || std::fclose(f) != 0 ||
            std::rename(tmp.c_str(), port_file.c_str()) != 0) {
            std::fprintf(stderr, "ibex_sumsrv: cannot write %s: %s\n", port_file.c_str(), std::strerror(errno));
            return 1;
        }
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::thread timer;
    if (duration > 0)
        timer = std::thread([duration] {
            for (int i = 0; i < static_cast<int>(duration * 10) && !g_stop.load(); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            g_stop.store(true);
        });
    const ibex_status_t st = server.run(g_stop);
    g_stop.store(true);
    if (timer.joinable()) timer.join();
    const ibex::sumsrv::ServerStats &s = server.stats();
    std::printf("ibex_sumsrv: %llu jobs (%llu failed), %llu chunks, %.1f MiB summed per worker\n",
                static_cast<unsigned long long>(s.jobs), static_cast<unsigned long long>(s.failed_jobs),
                static_cast<unsigned long long>(s.chunks), static_cast<double>(s.bytes) / (1 << 20));
    if (st != IBEX_OK) {
        std::fprintf(stderr, "ibex_sumsrv: %s\n", ibex_last_error());
        return 1;
    }
    return 0;
}
