// Broadcast and reduce as pipelined chains along the ring: slices flow root -> root+1 ->
// ... (broadcast, each rank forwarding a slice as soon as it has landed in its recvbuf), or
// root+1 -> ... -> root (reduce, each rank folding its own contribution in on the way).
// Bandwidth-optimal for long messages; the fixed order of the chain makes the result the
// same on every run.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {
int mod(int x, int n) { return ((x % n) + n) % n; }
} // namespace

void build_chain_broadcast(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks, r = a.rank, right = mod(r + 1, n), left = mod(r - 1, n);
    const int pos = mod(r - a.root, n); // 0 = root, n - 1 = end of the chain
    if (pos == 0 && a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
    if (n == 1) return;
    for (size_t j = 0, ns = b.slices(a.count); j < ns; ++j) {
        size_t o, l;
        b.slice(a.count, j, &o, &l);
        if (pos == 0) {
            b.send(right, b.at(a.sendbuf, o), l);
            continue;
        }
        const int got = b.recv_copy(left, b.at(a.recvbuf, o), l);
        if (pos + 1 < n) b.send(right, b.at(a.recvbuf, o), l, got);
    }
}

void build_chain_reduce(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks, r = a.rank, right = mod(r + 1, n), left = mod(r - 1, n);
    if (n == 1) {
        if (a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
        return;
    }
    const int pos = mod(r - a.root - 1, n); // 0 = first after the root, n - 1 = the root
    for (size_t j = 0, ns = b.slices(a.count); j < ns; ++j) {
        size_t o, l;
        b.slice(a.count, j, &o, &l);
        if (pos == 0) {
            b.send(right, b.at(a.sendbuf, o), l);
        } else if (pos + 1 < n) {
            void *partial = b.at(a.scratch, o);
            const int got = b.recv_reduce(left, partial, b.at(a.sendbuf, o), l);
            b.send(right, partial, l, got);
        } else {
            b.recv_reduce(left, b.at(a.recvbuf, o), b.at(a.sendbuf, o), l, -1, true);
        }
    }
}

} // namespace ibex::coll
