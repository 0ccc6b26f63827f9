// Double binary tree for small messages: the data is cut in two halves, each reduced up
// one binary tree to its root and broadcast back down it. Tree 0 numbers the ranks in
// order (node v = rank + 1 of an in-order tree, whose leaves are the odd nodes); tree 1 is
// its mirror image when n is even and a shift by one when n is odd, so a rank that is a
// leaf in one tree is, with at most one exception, an inner node of the other and the
// work of both halves spreads over all ranks. Latency grows with the depth (log2 n), not n.
// A node reduces its children in a fixed order (first, then second) and the root's result
// is only copied downwards, so every rank ends with the same bits.
#include <algorithm>

#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {

int lowbit(int v) { return v & -v; }

// Parent of node v (1..n) in the in-order tree over 1..n: its parent in the perfect tree,
// or the nearest ancestor that exists when that one is beyond n. 0: v is the root.
int tree_parent(int v, int n) {
    for (;;) {
        const int b = lowbit(v);
        int p = ((v / (2 * b)) % 2) ? v - b : v + b;
        if (b * 2 > n && p > n) return 0; // nothing above exists
        if (p >= 1 && p <= n) return p;
        v = p;
    }
}

// Node of rank r in tree t, and back.
int node_of(int t, int r, int n) {
    if (t == 0) return r + 1;
    return (n % 2 == 0) ? n - r : (r + 1) % n + 1;
}
int rank_of(int t, int v, int n) {
    if (t == 0) return v - 1;
    return (n % 2 == 0) ? n - v : (v - 2 + n) % n;
}

} // namespace

TreeLinks tree_links(int t, int rank, int n) {
    TreeLinks l;
    const int v = node_of(t, rank, n);
    const int p = tree_parent(v, n);
    if (p) l.parent = rank_of(t, p, n);
    // Children: the nodes whose parent is v, smaller node first. Only nodes within the
    // span of v's lowest set bit can hang below v.
    const int b = lowbit(v);
    int k = 0;
    for (int u = std::max(1, v - b + 1); u <= std::min(n, v + b - 1) && k < 2; ++u)
        if (u != v && tree_parent(u, n) == v) l.child[k++] = rank_of(t, u, n);
    return l;
}

int tree_depth(int n) {
    int d = 0;
    for (int r = 0; r < n; ++r) {
        int depth = 0;
        for (int v = r + 1; (v = tree_parent(v, n)) != 0;) ++depth;
        d = std::max(d, depth);
    }
    return d;
}

std::vector<int> tree_peers(int rank, int n) {
    std::vector<int> out;
    for (int t = 0; t < 2; ++t) {
        const TreeLinks l = tree_links(t, rank, n);
        for (int p : {l.parent, l.child[0], l.child[1]})
            if (p >= 0) out.push_back(p);
    }
    return out;
}

void build_tree_allreduce(const CollArgs &a, ScheduleBuilder &b) {
    const int n = a.nranks;
    if (n == 1) {
        if (a.sendbuf != a.recvbuf) b.local_copy(a.recvbuf, a.sendbuf, a.count);
        return;
    }
    const size_t half0 = a.count / 2;
    const size_t base[2] = {0, half0}, len[2] = {half0, a.count - half0};
    TreeLinks links[2] = {tree_links(0, a.rank, n), tree_links(1, a.rank, n)};
    const size_t nslices = std::max(b.slices(len[0]), b.slices(len[1]));
    for (size_t j = 0; j < nslices; ++j) {
        for (int t = 0; t < 2; ++t) {
            // An empty half moves nothing (every rank agrees on which half that is).
            if (len[t] == 0 || j >= b.slices(len[t])) continue;
            const TreeLinks &l = links[t];
            size_t o, sl;
            b.slice(len[t], j, &o, &sl);
            o += base[t];
            void *dst = b.at(a.recvbuf, o);
            const void *mine = b.at(a.sendbuf, o);
            const bool root = l.parent < 0;
            int reduced = -1;
            const void *acc = mine;
            for (int c = 0; c < 2; ++c) {
                if (l.child[c] < 0) continue;
                const bool last = root && (c == 1 || l.child[1] < 0);
                reduced = b.recv_reduce(l.child[c], dst, acc, sl, reduced, last);
                acc = dst;
            }
            int have = reduced;
            if (!root) {
                b.send(l.parent, acc, sl, reduced);
                // The result lands over what was just sent up, announced at once: it is
                // computed from that send's data, so it cannot arrive before that has
                // landed, and a later retransmission is a duplicate the parent drops.
                have = b.recv_copy(l.parent, dst, sl);
            }
            for (int c = 0; c < 2; ++c)
                if (l.child[c] >= 0) b.send(l.child[c], dst, sl, have);
        }
    }
}

} // namespace ibex::coll
