// GDRAA, after MiMatrix's GPUDirect-RDMA-aware allreduce: every rank writes straight into
// its peers' memory, with no per-transfer handshake.
//
// What is implemented. Rank r owns chunk r of the buffer (count cut into n chunks).
//   1. Scatter-reduce: r writes chunk p of its input into rank p's landing zone for r, for
//      every p != r, slice by slice (WRITE_WITH_IMM, the immediate carrying the sequence
//      number); p folds the n - 1 operands into its chunk, peers in rank order, so its
//      chunk's bits are fixed whatever the arrival order.
//   2. Gather: p writes its finished chunk straight into every peer's recvbuf, at the
//      chunk's own offset.
// The landing zones (one per peer, IBEX_GDRAA_ZONE bytes, default 1 MiB) are registered and
// announced once, when the communicator connects; a rank's recvbuf is announced to each
// peer (`ready`: address, rkey, length) only when it differs from the one announced last.
// Nothing else is exchanged: the two synchronisations are the phases' immediates. A peer
// writes collective k + 1's scatter into this rank's zone only after it has this rank's
// gather of k, which this rank sends once its reductions of k read the zone; and its
// gather of k + 1 only after this rank's scatter of k + 1, which follows any new
// announcement on the same connection. A scatter slice that comes before this rank has
// started its collective waits in the zone. The executor runs the schedule with
// Schedule::direct set: each send step names where it lands (Step::lands, remote_off), so
// no credit is asked for or sent.
//
// Against ring, per allreduce and rank (n ranks, message m, slices of s bytes, chunks of
// m / n, k = ceil(m / (n s)) slices per chunk):
//   - control messages: GDRAA none on buffers used before, n - 1 when the recvbuf is new;
//     ring 2 (n - 1) k credits, one per received slice, except slices small enough for the
//     eager ring (32 KiB), which skip them but hand their slots back, one message per 16
//     (measured: AlgorithmsForced.GdraaAnnouncesBuffersOnceAndSendsNoCredits);
//   - synchronisations: GDRAA 2 (the scatter's and the gather's arrivals); ring 2 (n - 1)
//     dependent steps, each waiting for its neighbour;
//   - latency: GDRAA 2 transfer steps; ring 2 (n - 1) steps;
//   - bytes sent: both 2 (n - 1) / n m, but GDRAA sends to n - 1 peers at once, so its link
//     is shared n - 1 ways within each phase while ring uses one neighbour at a time.
// So GDRAA wins where latency dominates, small and mid-size messages on more than two
// ranks, and needs a connection to every peer and n landing zones; ring keeps the large
// messages (and anything beyond n zones' worth, which GDRAA cannot hold). With 2 ranks the
// two coincide in steps, and GDRAA only saves the credits.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {

bool gdraa_fits(size_t count, size_t elem_bytes, int nranks, size_t zone_bytes) {
    if (nranks < 2 || !zone_bytes) return false;
    const size_t chunk = (count + static_cast<size_t>(nranks) - 1) / static_cast<size_t>(nranks);
    return chunk * elem_bytes <= zone_bytes;
}

void build_gdraa_allreduce(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks, r = a.rank;
    if (n == 1) {
        if (a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
        return;
    }
    Schedule &s = *b.schedule();
    s.direct = true;
    s.direct_recvbuf = a.recvbuf;
    s.direct_recv_bytes = a.count * b.elem_bytes();
    const size_t e = b.elem_bytes();
    size_t own_off = 0, own_len = 0;
    chunk_range(a.count, n, r, &own_off, &own_len);
    auto annotate = [&s](int i, Step::Lands where, uint64_t off) {
        s.steps[static_cast<size_t>(i)].lands = where;
        s.steps[static_cast<size_t>(i)].remote_off = off;
    };
    // 1. Chunk p of the input into p's zone for this rank, for every other p.
    for (int k = 1; k < n; ++k) {
        const int p = (r + k) % n;
        size_t off = 0, len = 0;
        chunk_range(a.count, n, p, &off, &len);
        for (size_t j = 0, m = b.slices(len); j < m; ++j) {
            size_t so = 0, sl = 0;
            b.slice(len, j, &so, &sl);
            annotate(b.send(p, b.at(a.sendbuf, off + so), sl), Step::Lands::zone, so * e);
        }
    }
    // The peers' operands for this rank's chunk, folded in rank order (the first into the
    // input's copy), slice by slice; the last one finishes the slice.
    const size_t slices = b.slices(own_len);
    std::vector<int> finished(slices, -1);
    for (size_t j = 0; j < slices; ++j) {
        size_t so = 0, sl = 0;
        b.slice(own_len, j, &so, &sl);
        int prev = -1, seen = 0;
        for (int p = 0; p < n; ++p) {
            if (p == r) continue;
            const void *local = prev < 0 ? b.at(a.sendbuf, own_off + so) : b.at(a.recvbuf, own_off + so);
            prev = b.recv_reduce(p, b.at(a.recvbuf, own_off + so), local, sl, prev, ++seen == n - 1);
            annotate(prev, Step::Lands::zone, so * e);
        }
        finished[j] = prev;
    }
    // 2. The finished chunk into every peer's recvbuf; theirs into this one's.
    for (int k = 1; k < n; ++k) {
        const int p = (r + k) % n;
        for (size_t j = 0; j < slices; ++j) {
            size_t so = 0, sl = 0;
            b.slice(own_len, j, &so, &sl);
            annotate(b.send(p, b.at(a.recvbuf, own_off + so), sl, finished[j]), Step::Lands::recvbuf, (own_off + so) * e);
        }
    }
    for (int k = 1; k < n; ++k) {
        const int p = (r + n - k) % n;
        size_t off = 0, len = 0;
        chunk_range(a.count, n, p, &off, &len);
        for (size_t j = 0, m = b.slices(len); j < m; ++j) {
            size_t so = 0, sl = 0;
            b.slice(len, j, &so, &sl);
            b.recv_copy(p, b.at(a.recvbuf, off + so), sl);
        }
    }
}

std::vector<int> gdraa_peers(int rank, int n) {
    std::vector<int> out;
    for (int p = 0; p < n; ++p)
        if (p != rank) out.push_back(p);
    return out;
}

} // namespace ibex::coll
