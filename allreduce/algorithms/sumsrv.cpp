// BytePS's summation service (OSDI 2020) as an allreduce: k CPU-only server processes
// (tools/ibex_sumsrv) sum part of every tensor, and the n workers allreduce the rest among
// themselves, both at once.
//
// The split, from BytePS's analysis. Each worker has one link of bandwidth B, and so does
// each server. Give each server a partition of S bytes of an M-byte tensor and let the
// workers allreduce the remaining M - kS with a bandwidth-optimal algorithm (ring: each
// worker sends 2(n-1)/n of it). A worker then sends
//     kS + 2(n-1)(M - kS)/n
// bytes (and receives as many), and a server receives nS and sends nS. Both links finish
// together when nS equals the worker's volume, which gives
//     S = 2(n-1)M / (n^2 + kn - 2k),    the worker part  M - kS = n(n-k)M / (n^2 + kn - 2k),
// and the time
//     t_opt = 2n(n-1)M / ((n^2 + kn - 2k) B).
// k = 0 is plain allreduce (t = 2(n-1)M / (nB)); k = n is a parameter server (S = M/n, the
// workers' part is empty); for 0 < k the time is n^2 / (n^2 + kn - 2k) of ring's, a gain
// from n = 3 on (with n = 2 the worker's link carries M either way).
//
// Placement, in elements: the worker part is [0, w), server s's partition is
// [w + s*p, w + (s+1)*p) with p = floor(2(n-1)count / (n^2 + kn - 2k)); the floor's
// remainder stays with the workers. Every worker computes the same split from count, n and
// k, so nobody exchanges it.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {

SumsrvSplit sumsrv_split(size_t count, int nranks, int servers) {
    SumsrvSplit s;
    s.workers = count;
    if (servers <= 0 || nranks <= 1) return s;
    const auto n = static_cast<unsigned __int128>(nranks);
    const auto k = static_cast<unsigned __int128>(servers);
    const unsigned __int128 denominator = n * n + k * n - 2 * k; // > 0 for n >= 2
    s.per_server = static_cast<size_t>(2 * (n - 1) * count / denominator);
    s.workers = count - static_cast<size_t>(servers) * s.per_server;
    return s;
}

} // namespace ibex::coll
