// Recursive halving-doubling (Rabenseifner): log2(p) exchange steps halve the vector each
// rank is responsible for (reduce-scatter), then log2(p) steps double it back (allgather),
// with p the largest power of two <= n. The first 2 * (n - p) ranks first fold pairwise
// (even into odd) and the odd ones stand in for both; the evens get the result at the end.
// Every element's value is computed by exactly one rank per step, so ranks stay
// bit-identical. Two ranks instead swap whole vectors and both reduce (one step), and
// small messages use recursive doubling (log2(p) whole-vector swaps); see below.
#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {

struct Layout {
    int p = 1;   // participants: largest power of two <= n
    int rem = 0; // n - p ranks fold into a partner first
};

Layout layout(int n) {
    Layout l;
    while (l.p * 2 <= n) l.p *= 2;
    l.rem = n - l.p;
    return l;
}

// Virtual rank among the p participants, or -1 for the even ranks that fold away.
int vrank(int r, const Layout &l) {
    if (r < 2 * l.rem) return (r % 2) ? r / 2 : -1;
    return r - l.rem;
}
int real_rank(int v, const Layout &l) { return v < l.rem ? 2 * v + 1 : v + l.rem; }

// Two ranks: halving then doubling is two dependent transfers (each a credit and a write),
// while swapping whole vectors and reducing on both sides is one, with half the messages
// and the same bytes on the wire. Both ranks apply op to (rank 0's value, rank 1's value)
// in that order (landed_first on rank 1) with the same kernel, so their bits agree.
void build_pair_exchange(const CollArgs &a, ScheduleBuilder &b) {
    const int partner = 1 - a.rank;
    const bool in_place = a.sendbuf == a.recvbuf;
    for (size_t j = 0, k = b.slices(a.count); j < k; ++j) {
        size_t off, len;
        b.slice(a.count, j, &off, &len);
        const int sent = b.send(partner, b.at(a.sendbuf, off), len);
        // In place the result overwrites the slice being sent, which the transport may
        // still read to retransmit: fold it in only once the send is done.
        b.recv_reduce(partner, b.at(a.recvbuf, off), b.at(a.sendbuf, off), len, in_place ? sent : -1, true, -1,
                      a.rank == 1);
    }
}

// Small messages: recursive doubling. Each of the log2(p) steps swaps the whole running
// value with the partner and both reduce, so a step is one transfer per direction instead
// of two (halving, then doubling back); the bytes grow to log2(p) * m, which only pays
// while latency dominates. Partners apply op to (value of the half whose bit is clear,
// value of the other half) in that order, so both compute the same bits. Folding for
// n != p is as in the halving-doubling below.
constexpr size_t kDoublingMaxBytes = 64 << 10;

void build_doubling(const CollArgs &a, ScheduleBuilder &b, const Layout &l, int v) {
    const int r = a.rank;
    const void *cur = a.sendbuf;
    int last = -1;
    if (r < 2 * l.rem) {
        last = b.recv_reduce(r - 1, a.recvbuf, a.sendbuf, a.count);
        cur = a.recvbuf;
    }
    for (int mask = 1; mask < l.p; mask <<= 1) {
        const int partner = real_rank(v ^ mask, l);
        const int sent = b.send(partner, cur, a.count, last);
        // Folding into the buffer being sent waits until the transport no longer reads it.
        last = b.recv_reduce(partner, a.recvbuf, cur, a.count, cur == a.recvbuf ? sent : -1, mask * 2 == l.p, -1,
                             (v & mask) != 0);
        cur = a.recvbuf;
    }
    if (r < 2 * l.rem) b.send(r - 1, a.recvbuf, a.count, last);
}

} // namespace

int rhd_steps(int n) {
    int k = 0;
    for (int p = 1; p * 2 <= n; p *= 2) ++k;
    return k;
}

std::vector<int> rhd_peers(int rank, int n) {
    const Layout l = layout(n);
    std::vector<int> out;
    if (rank < 2 * l.rem) out.push_back(rank ^ 1);
    const int v = vrank(rank, l);
    if (v >= 0)
        for (int mask = 1; mask < l.p; mask <<= 1) out.push_back(real_rank(v ^ mask, l));
    return out;
}

void build_rhd_allreduce(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks, r = a.rank;
    if (n == 1) {
        if (a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
        return;
    }
    if (n == 2) {
        build_pair_exchange(a, b);
        return;
    }
    const Layout l = layout(n);
    const int v = vrank(r, l);
    if (v < 0) {
        // Folded even rank: hand everything to the odd partner, get the result back. (In
        // place the result overwrites what was sent; see the allgather below for why that
        // needs no dependency.)
        b.send_run(r + 1, a.sendbuf, a.count);
        b.recv_copy_run(r + 1, a.recvbuf, a.count);
        return;
    }
    if (b.slices(a.count) == 1 && a.count * b.elem_bytes() <= kDoublingMaxBytes) {
        build_doubling(a, b, l, v);
        return;
    }
    // `cur` holds this rank's running values: sendbuf until something is reduced into recvbuf.
    const void *cur = a.sendbuf;
    int last_reduce = -1;
    if (r < 2 * l.rem) {
        last_reduce = b.recv_reduce_run(r - 1, a.recvbuf, a.sendbuf, a.count, -1, false);
        cur = a.recvbuf;
    }
    const int steps = rhd_steps(n);
    struct Half {
        size_t lo, hi;     // elements kept after the step
        size_t slo, shi;   // elements sent away
    };
    std::vector<Half> h(static_cast<size_t>(steps));
    size_t lo = 0, hi = a.count;
    int k = 0;
    for (int mask = 1; mask < l.p; mask <<= 1, ++k) {
        const int partner = real_rank(v ^ mask, l);
        const size_t mid = lo + (hi - lo) / 2;
        Half &x = h[static_cast<size_t>(k)];
        if ((v & mask) == 0) {
            x = {lo, mid, mid, hi};
        } else {
            x = {mid, hi, lo, mid};
        }
        const bool last = mask * 2 == l.p;
        // Sends read values this rank finished reducing in the previous step; the
        // reduction reads them too, so both wait for it.
        b.send_run(partner, b.at(cur, x.slo), x.shi - x.slo, last_reduce);
        last_reduce = b.recv_reduce_run(partner, b.at(a.recvbuf, x.lo), b.at(cur, x.lo), x.hi - x.lo, last_reduce,
                                        last);
        cur = a.recvbuf;
        lo = x.lo;
        hi = x.hi;
    }
    // Allgather: undo the halvings in reverse, copying the partner's finished half straight
    // into recvbuf, over the partial this rank sent it in the halving. The destination is
    // announced without waiting for that send to complete: the finished values are computed
    // from the partial, so they cannot arrive before it has landed, and anything the
    // transport sends again after that is a duplicate the responder does not write.
    // A send waits for the previous step's receive and the previous send, which itself
    // waited for everything before: so it never goes out with a range still arriving.
    int last_got = last_reduce, last_sent = -1;
    k = steps - 1;
    for (int mask = l.p / 2; mask >= 1; mask >>= 1, --k) {
        const int partner = real_rank(v ^ mask, l);
        const Half &x = h[static_cast<size_t>(k)];
        last_sent = b.send_run(partner, b.at(a.recvbuf, x.lo), x.hi - x.lo, last_got, last_sent);
        last_got = b.recv_copy_run(partner, b.at(a.recvbuf, x.slo), x.shi - x.slo);
    }
    if (r < 2 * l.rem) b.send_run(r - 1, a.recvbuf, a.count, last_got, last_sent);
}

} // namespace ibex::coll
