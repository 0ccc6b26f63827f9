// Numbers and their presentation: perftest's bandwidth and latency definitions, its
// header block and table lines, and a JSON rendering of the same results.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ibex_perftest/oob.h"
#include "ibex_perftest/options.h"

namespace ibex::perftest {

inline constexpr const char *kResultLine =
    "---------------------------------------------------------------------------------------\n";

struct BwResult {
    uint64_t bytes = 0;
    uint64_t iters = 0;
    double peak = 0;   // in the report unit (MiB/s or Gb/s); 0 when not measured (-D)
    double avg = 0;
    double msg_rate_mpps = 0;
};

struct LatResult {
    uint64_t bytes = 0;
    uint64_t iters = 0;
    double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0; // usec
};

// Bandwidth at the client. tposted[i] / tcompleted[i] in ns; tcompleted is only set for
// signaled WRs (every cq_mod-th and the last). Average = bytes x iterations / (last
// completion - first post); peak = size / the shortest mean time per message over any
// window from a post to a later signaled completion (perftest's definition).
BwResult bw_result(uint64_t bytes, uint64_t iters, const std::vector<uint64_t> &tposted,
                   const std::vector<uint64_t> &tcompleted, uint32_t cq_mod, bool gbits, bool peak);
// Average only (duration mode): iters messages between first_post_ns and last_completion_ns.
BwResult bw_result_avg(uint64_t bytes, uint64_t iters, uint64_t first_post_ns, uint64_t last_completion_ns, bool gbits);

// Latency from consecutive post times (ns): the samples are the differences, sorted, the
// 2 largest dropped; divided by rtt_factor (2: half round trip for write/send). typical =
// median; percentiles by nearest rank over the kept samples.
LatResult lat_result(uint64_t bytes, const std::vector<uint64_t> &tposted, int rtt_factor);

// The perftest header block: test title, device, connection, MTU, local/remote lines.
struct HeaderInfo {
    std::string title;       // "RDMA_Write BW Test"
    std::string device;
    uint32_t tx_depth = 0;
    uint32_t cq_mod = 0;
    int mtu = 0;
    KeyRecord local, remote;
};
void print_header(FILE *out, const HeaderInfo &h);

void print_bw_table_header(FILE *out, bool gbits);
void print_bw_line(FILE *out, const BwResult &r);
void print_lat_table_header(FILE *out);
void print_lat_line(FILE *out, const LatResult &r);

// JSON document of a run.
std::string bw_json(const Options &o, const HeaderInfo &h, const std::vector<BwResult> &rows);
std::string lat_json(const Options &o, const HeaderInfo &h, const std::vector<LatResult> &rows);

// Writes the JSON to o.json_path or stdout; false (with *err) if the file cannot be written.
bool write_json(const Options &o, const std::string &doc, std::string *err);

} // namespace ibex::perftest
