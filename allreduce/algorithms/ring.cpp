// Ring: n - 1 reduce-scatter steps then n - 1 allgather steps, each rank sending to its
// right neighbour and receiving from its left. Each chunk is cut into slices so a slice
// moves on as soon as it is reduced (pipelining); every chunk's final value is computed
// once, by the rank that owns it, and then only copied, so all ranks end bit-identical.
#include <algorithm>

#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {

int mod(int x, int n) { return ((x % n) + n) % n; }

using SliceIndex = std::vector<std::vector<int>>; // [chunk][slice] -> step index

} // namespace

void chunk_range(size_t count, int n, int c, size_t *off, size_t *len) {
    const size_t base = count / static_cast<size_t>(n), extra = count % static_cast<size_t>(n);
    const size_t cc = static_cast<size_t>(c);
    *len = base + (cc < extra ? 1 : 0);
    *off = cc * base + std::min(cc, extra);
}

std::vector<int> ring_peers(int rank, int n) {
    if (n == 1) return {};
    if (n == 2) return {1 - rank};
    return {mod(rank + 1, n), mod(rank - 1, n)};
}

// Reduce-scatter around the ring. Chunk c of `chunk` (offset and length in elements) ends
// fully reduced on rank c, in final_dst(c); partials live in partial_dst(c).
template <typename ChunkFn, typename PartialFn, typename FinalFn>
static void ring_reduce_scatter(const CollArgs &a, ScheduleBuilder &b, ChunkFn chunk, PartialFn partial_dst,
                                FinalFn final_dst, SliceIndex *produced) {
    const int n = a.nranks, r = a.rank, right = mod(r + 1, n), left = mod(r - 1, n);
    produced->assign(n, {});
    for (int s = 0; s + 1 < n; ++s) {
        const int sc = mod(r - s - 1, n), rc = mod(r - s - 2, n);
        size_t soff, slen, roff, rlen;
        chunk(sc, &soff, &slen);
        chunk(rc, &roff, &rlen);
        const size_t ns = b.slices(slen), nr = b.slices(rlen);
        const bool last = s + 2 == n;
        for (size_t j = 0; j < std::max(ns, nr); ++j) {
            size_t o, l;
            if (j < ns) {
                b.slice(slen, j, &o, &l);
                const void *src = s == 0 ? b.at(a.sendbuf, soff + o) : b.at(partial_dst(sc), o);
                const int dep = s == 0 ? -1 : (*produced)[sc][j];
                b.send(right, src, l, dep);
            }
            if (j < nr) {
                b.slice(rlen, j, &o, &l);
                void *dst = last ? b.at(final_dst(rc), o) : b.at(partial_dst(rc), o);
                (*produced)[rc].push_back(b.recv_reduce(left, dst, b.at(a.sendbuf, roff + o), l, -1, last));
            }
        }
    }
}

std::vector<int> build_ring_placed_reduce_scatter(const CollArgs &a, ScheduleBuilder &b, const ChunkPlace &chunk,
                                                   void *partials, void *own_final) {
    auto partial_dst = [&](int c) {
        size_t off, len;
        chunk(c, &off, &len);
        return b.at(partials, off);
    };
    auto final_dst = [&](int c) { return c == a.rank && own_final ? own_final : partial_dst(c); };
    SliceIndex produced;
    ring_reduce_scatter(a, b, chunk, partial_dst, final_dst, &produced);
    return produced[static_cast<size_t>(a.rank)];
}

void build_ring_placed_allgather(const CollArgs &a, ScheduleBuilder &b, const ChunkPlace &chunk,
                                 const std::vector<int> &own) {
    const int n = a.nranks, r = a.rank, right = mod(r + 1, n), left = mod(r - 1, n);
    SliceIndex got(n);
    for (int t = 0; t + 1 < n; ++t) {
        const int sc = mod(r - t, n), rc = mod(r - t - 1, n);
        size_t soff, slen, roff, rlen;
        chunk(sc, &soff, &slen);
        chunk(rc, &roff, &rlen);
        const size_t ns = b.slices(slen), nr = b.slices(rlen);
        for (size_t j = 0; j < std::max(ns, nr); ++j) {
            size_t o, l;
            if (j < ns) {
                b.slice(slen, j, &o, &l);
                const int dep = t == 0 ? (own.empty() ? -1 : own[std::min(j, own.size() - 1)]) : got[sc][j];
                b.send(right, b.at(a.recvbuf, soff + o), l, dep);
            }
            if (j < nr) {
                b.slice(rlen, j, &o, &l);
                // The final value overwrites the partial this rank sent on. It is computed
                // from that partial, so it cannot land before the partial has; a later
                // retransmission of the partial is a duplicate the responder drops. So the
                // destination is announced at once, not after the send completes.
                got[rc].push_back(b.recv_copy(left, b.at(a.recvbuf, roff + o), l));
            }
        }
    }
}

void build_ring_allreduce(const CollArgs &a, ScheduleBuilder &b) {
    if (a.nranks == 1) {
        if (a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
        return;
    }
    // Partials and finals both live in recvbuf: each chunk is written once per rank.
    const ChunkPlace chunk = [&](int c, size_t *off, size_t *len) { chunk_range(a.count, a.nranks, c, off, len); };
    build_ring_placed_allgather(a, b, chunk, build_ring_placed_reduce_scatter(a, b, chunk, a.recvbuf, nullptr));
}

void build_ring_reduce_scatter(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks;
    if (n == 1) {
        if (a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
        return;
    }
    auto chunk = [&](int c, size_t *off, size_t *len) {
        *off = static_cast<size_t>(c) * a.count;
        *len = a.count;
    };
    auto partial = [&](int c) { return b.at(a.scratch, static_cast<size_t>(c) * a.count); };
    auto final_dst = [&](int) { return a.recvbuf; };
    SliceIndex produced;
    ring_reduce_scatter(a, b, chunk, partial, final_dst, &produced);
}

void build_ring_allgather(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks, r = a.rank, right = mod(r + 1, n), left = mod(r - 1, n);
    const size_t m = a.count;
    void *mine = b.at(a.recvbuf, static_cast<size_t>(r) * m);
    if (a.sendbuf != mine) b.local_copy(mine, a.sendbuf, m);
    SliceIndex got(n);
    for (int t = 0; t + 1 < n; ++t) {
        const int sc = mod(r - t, n), rc = mod(r - t - 1, n);
        for (size_t j = 0, ns = b.slices(m); j < ns; ++j) {
            size_t o, l;
            b.slice(m, j, &o, &l);
            // The first step sends straight from sendbuf, not waiting for the local copy.
            if (t == 0)
                b.send(right, b.at(a.sendbuf, o), l);
            else
                b.send(right, b.at(a.recvbuf, static_cast<size_t>(sc) * m + o), l, got[sc][j]);
            got[rc].push_back(b.recv_copy(left, b.at(a.recvbuf, static_cast<size_t>(rc) * m + o), l));
        }
    }
}

} // namespace ibex::coll
