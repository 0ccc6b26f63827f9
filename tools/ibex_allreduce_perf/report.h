// nccl-tests' table (header, one line per size with out-of-place and in-place columns,
// the "# Avg bus bandwidth" footer) and the same results as JSON.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "tools/ibex_allreduce_perf/options.h"

namespace ibex::collperf {

struct Result {
    double time_us = 0;
    double algbw = 0; // GB/s (10^9 bytes)
    double busbw = 0;
    long long wrong = -1; // -1: not checked (N/A)
    bool ran = true;      // false: the collective has no such form (alltoall in place): N/A
};

struct Row {
    size_t bytes = 0;
    size_t count = 0; // elements (total for allgather/reduce_scatter, as nccl-tests prints)
    ibex_datatype_t type = IBEX_F32;
    ibex_redop_t op = IBEX_SUM;
    int root = -1;    // -1 where the collective has none
    bool has_op = true;
    std::string algo; // allreduce algorithm at this size ("" otherwise)
    Result oop, ip;
};

// Bandwidths of one measurement: algbw = bytes / time, busbw = algbw x bus_factor.
Result make_result(Coll c, int nranks, size_t bytes, double time_us, long long wrong);

void print_header(FILE *f);
void print_row(FILE *f, const Row &r);
// Mean busbw over every out-of-place and in-place result, as nccl-tests averages it.
double average_busbw(const std::vector<Row> &rows);
void print_footer(FILE *f, const std::vector<Row> &rows, long long total_wrong, bool checked);

struct RunInfo {
    Coll coll;
    int nranks;
    std::string launcher;
    std::string device;
    std::string reduce_isa;
    const Options *opts;
};
void write_json(FILE *f, const RunInfo &info, const std::vector<Row> &rows);

} // namespace ibex::collperf
