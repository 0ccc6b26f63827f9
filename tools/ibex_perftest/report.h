// Numbers and their presentation: perftest's bandwidth and latency definitions, its
// header block and table lines, the congestion-control lines, and a JSON rendering.
#pragma once

#include <ibex/ibex.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/ibex_perftest/oob.h"
#include "tools/ibex_perftest/options.h"

namespace ibex::perftest {

inline constexpr const char *kResultLine =
    "---------------------------------------------------------------------------------------\n";

struct BwResult {
    uint64_t bytes = 0;
    uint64_t iters = 0;
    double peak = 0; // in the report unit (MiB/s or Gb/s); 0 when not measured (-D)
    double avg = 0;
    double msg_rate_mpps = 0;
};

struct LatResult {
    uint64_t bytes = 0;
    uint64_t iters = 0;
    double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, p99 = 0, p999 = 0; // usec
};

// Bandwidth from post and completion times (ns). tposted[i]: when message i was posted;
// signaled: the indexes whose completion time is in tcompleted[index] (a signaled message
// completes every message of its QP before it), in increasing order, the last message
// included. Average = bytes x messages / (last completion - first post); peak = bytes /
// the shortest mean time per message over any window from a post to a later signaled
// completion (perftest's definition).
BwResult bw_result(uint64_t bytes, const std::vector<uint64_t> &tposted, const std::vector<uint64_t> &tcompleted,
                   const std::vector<uint64_t> &signaled, bool gbits);
// Average only (duration mode, intervals): messages between first_ns and last_ns.
BwResult bw_result_avg(uint64_t bytes, uint64_t messages, uint64_t first_ns, uint64_t last_ns, bool gbits);
// Both directions of a bidirectional run: the figures add up.
BwResult bw_sum(const BwResult &a, const BwResult &b);

// Latency from consecutive post times (ns): the samples are the differences, sorted,
// divided by rtt_factor (2: half round trip for write/send, 1: the full round trip for
// read/atomic). As perftest: typical = median, average and deviation over all but the 2
// largest samples; maximum and percentiles at perftest's indexes (see report.cpp).
LatResult lat_result(uint64_t bytes, const std::vector<uint64_t> &tposted, int rtt_factor);

// The samples lat_result summarises (usec, rtt_factor as there), in the order measured.
std::vector<double> lat_samples(const std::vector<uint64_t> &tposted, int rtt_factor);
// -H / -U: "#, usec" and one "index, sample" line per sample, sorted unless `unsorted`.
void print_lat_histogram(FILE *out, std::vector<double> samples, bool unsorted);

// Rows cross the out-of-band connection as text control messages.
std::string to_msg(const BwResult &r);
std::string to_msg(const LatResult &r);
bool from_msg(const std::string &m, BwResult *r);
bool from_msg(const std::string &m, LatResult *r);

// The perftest header block: test title, device, connection, MTU, local/remote lines.
struct HeaderInfo {
    std::string title; // "RDMA_Write BW Test"
    std::string device;
    uint32_t num_qps = 1;
    uint32_t tx_depth = 0; // 0: not printed (a passive server)
    uint32_t rx_depth = 0; // 0: not printed
    uint32_t cq_mod = 0;   // 0: not printed (latency)
    uint32_t out_reads = 0; // read/atomic: "Outstand reads" instead of "Max inline data"
    uint32_t inline_size = 0;
    uint32_t post_list = 1; // > 1: printed
    int traffic_class = 0;  // as the provider reports QP 0's; printed when not 0
    int sl = 0;             // service level, likewise
    int mtu = 0;
    std::string numa;   // NUMA placement summary
    std::string memory; // "host" or "GPU <n>"
    std::vector<KeyRecord> local, remote;
};
// "RDMA_Write BW Test", "Atomic FETCH_AND_ADD Bidirectional BW Test", "Send Latency Test"
std::string test_title(const Options &o);
void print_header(FILE *out, const HeaderInfo &h);

void print_bw_table_header(FILE *out, bool gbits);
void print_bw_line(FILE *out, const BwResult &r);
void print_lat_table_header(FILE *out);
void print_lat_line(FILE *out, const LatResult &r);

// Congestion control after the table: CNPs sent (as notification point) and handled (as
// reaction point) from the context's counters, and each QP's final DCQCN rate. Printed
// when DCQCN runs on a QP or any CNP or ECN mark was seen, and always with
// IBEX_PERFTEST_COUNTERS=1 (then with the engine counters too).
struct CcReport {
    bool show = false;
    ibex_counters_t counters{};
    std::vector<uint32_t> qpns;      // QPs that run DCQCN
    std::vector<ibex_qp_cc_t> qps;   // their state at the end of the run
    // Loss recovery (ibex_query_qp_retransmit), summed over the run's QPs; shown when the
    // provider reports it and something was lost, or the mode is selective.
    bool show_rtx = false;
    ibex_qp_retransmit_t rtx{};
};
CcReport query_cc(ibex_context_t *ctx, const std::vector<ibex_qp_t *> &qps);
void print_cc(FILE *out, const CcReport &cc);

// JSON document of a run: parameters, both key records, the rows as printed, and for
// --report-both the two directions.
std::string bw_json(const Options &o, const HeaderInfo &h, const std::vector<BwResult> &rows,
                    const std::vector<BwResult> &local, const std::vector<BwResult> &remote, const CcReport &cc);
std::string lat_json(const Options &o, const HeaderInfo &h, const std::vector<LatResult> &rows, const CcReport &cc);

// --output: one figure per row on stdout (BW average in the table's unit, MsgRate in Mpps,
// or t_typical in usec); nothing for Output::table.
void print_output(const Options &o, const std::vector<BwResult> &rows);
void print_output(const Options &o, const std::vector<LatResult> &rows);

// -w and -y: empty when every row meets them, else which row missed which limit.
std::string limits_missed(const Options &o, const std::vector<BwResult> &rows);

// Writes the JSON to o.json_path or stdout; false (with *err) if the file cannot be written.
bool write_json(const Options &o, const std::string &doc, std::string *err);

} // namespace ibex::perftest
