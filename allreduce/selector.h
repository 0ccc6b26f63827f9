// Which allreduce algorithm runs for a message: an alpha-beta-gamma cost model (per message
// latency alpha, per byte transfer time beta, per byte reduction time gamma), with alpha
// and beta measured by a short ping-pong and bulk transfer between neighbouring ranks when
// the communicator is created, and gamma by timing the reduction kernel. Every rank ends
// up with the same constants (the medians of all ranks' measurements), so every rank
// picks the same algorithm for the same message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "allreduce/schedule.h"

namespace ibex::coll {

enum class Algo { tree = 0, rhd = 1, ring = 2 };
constexpr int kAlgoCount = 3;

const char *algo_name(Algo a);
// "ring", "rhd", "tree" (false for anything else).
bool parse_algo(const char *name, Algo *out);

struct CostModel {
    double alpha = 20e-6;          // s per message
    double beta = 1.0 / 1.0e9;     // s per byte moved
    double gamma = 1.0 / 4.0e9;    // s per byte reduced
    bool measured = false;
};

class Selector {
public:
    void configure(int nranks, size_t slice_bytes, const CostModel &m) {
        n_ = nranks;
        slice_ = slice_bytes;
        model_ = m;
    }
    const CostModel &model() const { return model_; }
    double cost(Algo a, size_t bytes) const;
    // Cheapest algorithm; ties go to the one listed first in Algo.
    Algo choose(size_t bytes) const;

private:
    int n_ = 1;
    size_t slice_ = 128 << 10;
    CostModel model_;
};

// The probe, as a schedule between rank pairs (0,1), (2,3), ...: `pings` 8-byte round
// trips, then `bulk` bytes one way and an 8-byte answer. buf needs probe_buffer_bytes().
size_t probe_buffer_bytes(int pings, size_t bulk);
void build_probe(int rank, int nranks, int pings, size_t bulk, void *buf, ScheduleBuilder &b);
// From the probe's step completion times (ns, indexed like the schedule): this rank's
// alpha and beta, or 0 when this rank did not measure (odd ranks, a rank without partner).
void probe_result(int rank, int nranks, int pings, size_t bulk, const std::vector<uint64_t> &done_ns,
                  double *alpha, double *beta);
// Seconds per byte of reduce_into() on f32 sums over buf (needs 3 * bytes).
double measure_gamma(void *buf, size_t bytes);
// Medians of the non-zero values of every rank's (alpha, beta, gamma) triples.
CostModel combine(const std::vector<double> &triples);

} // namespace ibex::coll
