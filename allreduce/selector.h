// Which allreduce algorithm runs for a message: an alpha-beta-gamma cost model (per message
// latency alpha, per byte transfer time beta, per byte reduction time gamma) that knows the
// topology: which ranks share a host, and alpha/beta for the links inside a host (shm) and
// between hosts (the network device), each measured by a short ping-pong and bulk transfer
// between a pair of ranks of that kind when the communicator is created; gamma by timing
// the reduction kernel. Every rank ends up with the same constants (the medians of all
// ranks' measurements), so every rank picks the same algorithm for the same message.
//
// A flat algorithm's step costs what its slowest transfer costs: a step with a partner on
// another host pays the network's alpha, and beta scaled by the number of this host's ranks
// that cross at once where more cross than did in the probe (they share the host's link;
// see CostModel::probe_crossing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {

enum class Algo { tree = 0, rhd = 1, ring = 2, hierarchical = 3, gdraa = 4, sumsrv = 5 };
constexpr int kAlgoCount = 6;

const char *algo_name(Algo a);
// "ring", "rhd", "tree", "hierarchical", "gdraa", "sumsrv" (false for anything else).
bool parse_algo(const char *name, Algo *out);

struct CostModel {
    double alpha = 20e-6;          // s per message between hosts (or everywhere, one host)
    double beta = 1.0 / 1.0e9;     // s per byte moved between hosts
    double gamma = 1.0 / 4.0e9;    // s per byte reduced
    double alpha_local = 0;        // the same inside a host (0: as between hosts)
    double beta_local = 0;
    // The per-byte costs again for collectives of big_bytes and more, whose buffers no
    // longer fit the caches (0: as above). beta, beta_local and gamma hold for collectives
    // of small_bytes and less; between the two sizes the model interpolates in log(size).
    double beta_big = 0, beta_local_big = 0, gamma_big = 0;
    size_t small_bytes = 1 << 20, big_bytes = 0;
    // How many ranks of one host crossed to another host at once while beta (between hosts)
    // was measured (1: beta is one rank's alone, as ibex_sim's fabric model gives it). The
    // probe runs every rail at once, as the hierarchical rail phase does, so its beta holds
    // their sharing of the host's link, or of its cores. A step in which c ranks of a host
    // cross pays beta * max(c, probe_crossing) / probe_crossing per byte: more crossing
    // ranks than probed share the link in proportion; fewer are not assumed faster, since
    // where each rail has its own NIC, or the cores are the limit, they are not.
    size_t probe_crossing = 1;
    // Hierarchical and rhd, timed. Across hosts the two move the same bytes over the same
    // links (each host sends and receives the whole buffer once, half per rank on 2x2), so
    // the link probes cannot tell them apart, yet on a host with more busy threads than
    // cores one runs up to 1.5x the other, and which one changes from one communicator to
    // the next. Calibration therefore times both at small_bytes and big_bytes where both
    // apply (hierarchical has phase boundaries: several hosts of two ranks or more) and
    // fits each one's modeled cost to its two times (fit_timed()):
    //   cost = scale * (the model's sum of phases or steps) + joins * join
    // join: seconds that each join adds, where the next phase's group (hierarchical's phase
    // boundaries) or the next step's partner (rhd's changes of partner) starts with its
    // slowest member; scale: how much faster or slower the run's per-byte work went than
    // the probes' betas price it. 0 and 1: not timed.
    double hier_join = 0, rhd_join = 0;
    double hier_scale = 1, rhd_scale = 1;
    bool measured = false;
    double a_local() const { return alpha_local > 0 ? alpha_local : alpha; }
    double b_local() const { return beta_local > 0 ? beta_local : beta; }

    // The per-byte costs that apply to a collective of `bytes` (each rank's buffer).
    struct PerByte {
        double beta, beta_local, gamma;
    };
    PerByte per_byte(double bytes) const;
};

class Selector {
public:
    // Without a layout every rank is on one host and every link costs (alpha, beta).
    void configure(int nranks, size_t slice_bytes, const CostModel &m, const HostLayout *layout = nullptr);
    // GDRAA's landing zone per peer (IBEX_GDRAA_ZONE; 0: GDRAA is off and never chosen).
    void set_gdraa_zone(size_t bytes) { zone_ = bytes; }
    // Whether an allreduce of `bytes` fits GDRAA's landing zones (a chunk of bytes / n,
    // rounded up by one element of the widest type).
    bool gdraa_fits_bytes(size_t bytes) const {
        return zone_ && n_ > 1 && (bytes + static_cast<size_t>(n_) - 1) / static_cast<size_t>(n_) + 8 <= zone_;
    }
    // How many summation servers the communicator reached (IBEX_SUMSRV; 0: sumsrv is off
    // and never chosen), and whether some rank found one on its own machine: such servers
    // share the workers' cores and links, so the model never chooses them (forcing still
    // runs them).
    void set_sumsrv_servers(int k, bool some_on_a_workers_machine = false) {
        servers_ = k;
        servers_local_ = some_on_a_workers_machine;
    }
    int sumsrv_servers() const { return servers_; }
    const CostModel &model() const { return model_; }
    int hosts() const { return hosts_; }
    int ranks_per_host() const { return per_host_; } // 0: uneven
    // Seconds for an allreduce of `bytes`; infinite for hierarchical where it does not apply
    // (uneven layout, one host).
    double cost(Algo a, size_t bytes) const;
    // Cheapest algorithm; ties go to the one listed first in Algo. Without with_sumsrv the
    // summation service is left out (the workers' own part of a sumsrv allreduce).
    Algo choose(size_t bytes, bool with_sumsrv = true) const;
    // Reduce-scatter (bytes per rank's result) and allgather (bytes per rank's input), flat
    // ring or hierarchical.
    double cost_reduce_scatter(bool hierarchical, size_t bytes) const;
    double cost_allgather(bool hierarchical, size_t bytes) const;
    // Phase boundaries of a hierarchical allreduce (in-host reduce-scatter, rail, in-host
    // allgather: 2; rails alone, one rank per host: 0). Reduce-scatter and allgather have
    // half as many.
    int hierarchical_joins() const { return hosts_ > 1 && per_host_ > 1 ? 2 : 0; }
    // Changes of partner between rhd's steps (halving, doubling, and the fold's two steps
    // where the rank count is no power of two), counted where its join is measured (the
    // layouts that have hierarchical joins); 0 elsewhere.
    int rhd_joins() const;

private:
    // One transfer of `bytes` by each rank of a step; `crossing`: how many ranks of the
    // busiest host send to another host in that step (0: the step stays inside hosts).
    double step(const CostModel::PerByte &k, size_t crossing, double bytes) const;
    double rail_allreduce(const CostModel::PerByte &k, double bytes) const; // hierarchical's middle phase

    int n_ = 1;
    size_t slice_ = 128 << 10;
    size_t zone_ = 0;
    int servers_ = 0;
    bool servers_local_ = false;
    CostModel model_;
    int hosts_ = 1, per_host_ = 1, max_per_host_ = 1;
    size_t ring_crossing_ = 0, fold_crossing_ = 0; // ring edges / rhd fold pairs leaving the busiest host
    std::vector<size_t> rhd_crossing_;     // per halving step (distance 2^j)
};

// The probe, as a schedule between this rank and `partner` (-1: none): the lower rank of
// the pair leads `pings` 8-byte round trips, then both send `bulk` bytes to each other at
// once, each reducing what lands into its buffer as a reduce-scatter step does, and the
// partner answers with 8 bytes once it has the leader's. buf needs probe_buffer_bytes().
size_t probe_buffer_bytes(int pings, size_t bulk);
void build_probe(int rank, int partner, int pings, size_t bulk, void *buf, ScheduleBuilder &b);
// The probe partner of a rank for links inside its host (local ranks paired 0-1, 2-3, ...)
// or between hosts (hosts paired 0-1, 2-3, ..., the same local rank on each), or -1.
int probe_partner(const HostLayout &l, int rank, bool between_hosts);
// How many ranks of the busiest host have a partner on another host in that probe (the
// model's probe_crossing; at least 1).
size_t probe_crossing(const HostLayout &l);
// From the probe's step completion times (ns, indexed like the schedule): this rank's
// alpha and beta, or 0 when this rank did not measure (it did not lead a pair).
void probe_result(bool leads, int pings, size_t bulk, const std::vector<uint64_t> &done_ns, double *alpha,
                  double *beta);
// Whether a link has warmed up, from the alphas of its ping-only rounds so far: once at
// least min_rounds (never fewer than kWarmMinRounds) ran, the last kWarmSteady of them each
// came within 10% of the lowest before it, i.e. the round trip stopped falling. The first
// lap of a new link runs several times slower than later ones.
constexpr int kWarmMinRounds = 3, kWarmSteady = 2;
bool link_warm(std::span<const double> alphas, int min_rounds = kWarmMinRounds);
// Seconds per byte of reduce_into() on f32 sums over buf (needs 3 * bytes).
double measure_gamma(void *buf, size_t bytes);
// The median of v (the upper one of an even count), reordering v; 0 when v is empty. The
// calibration's every "median of runs" and "median over ranks".
double median(std::span<double> v);
// Every rank's measurements, kModelFields per rank: alpha, beta (between hosts), gamma,
// alpha_local, beta_local, then beta, gamma and beta_local for big collectives (0: not
// measured by that rank). The model takes the medians of the measured values; the sizes
// the two sets were measured at are the caller's to set.
constexpr size_t kModelFields = 8;
CostModel combine(const std::vector<double> &per_rank);
// Fits an algorithm's scale and join to two timed runs: `t_small` seconds where the model
// (without joins) gives `m_small`, and `t_big` where it gives `m_big`. The scale is the
// slope between the two (kept within [kMinScale, kMaxScale]; 1 when the big run is
// missing or no bigger), the join what the small run took beyond scale * m_small, per
// join (never negative; 0 without joins or a small run).
struct TimedFit {
    double scale = 1, join = 0;
};
constexpr double kMinScale = 0.5, kMaxScale = 2.0;
TimedFit fit_timed(double t_small, double m_small, double t_big, double m_big, int joins);

} // namespace ibex::coll
