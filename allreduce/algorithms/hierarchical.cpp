// Hierarchical collectives: the ranks of one host talk over shared memory, and each local
// rank crosses the network only with the same local rank of the other hosts (its rail), so
// the network carries each byte once per host instead of once per rank pair the flat ring
// happens to lay across hosts.
//
// Phases are sub-collectives built by the flat builders on a group of ranks
// (ScheduleBuilder::set_group); a phase waits for the one before through a step floor.
// Every final value is still computed once (intra-host chunk on its local owner, then the
// rail algorithm's own rule) and only copied after, so all ranks end bit-identical.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// This rank's rail: local rank i of every host, in host order.
std::vector<int> rail_of(const HostLayout &l, int i) {
    std::vector<int> rail;
    for (const auto &m : l.members) rail.push_back(m[static_cast<size_t>(i)]);
    return rail;
}

// This rank's place in the layout, and the collective's arguments as seen by each of its
// two groups: the ranks of its host (index i of L) and its rail (index h of H).
struct Where {
    Where(const CollArgs &a, const HostLayout &l)
        : H(l.hosts()), L(l.ranks_per_host()), h(l.host_of[static_cast<size_t>(a.rank)]), i(l.local_rank(a.rank)),
          local(l.members[static_cast<size_t>(h)]), rail(rail_of(l, i)), in_host(a), on_rail(a) {
        in_host.rank = i;
        in_host.nranks = L;
        on_rail.rank = h;
        on_rail.nranks = H;
    }
    const int H, L, h, i;
    const std::vector<int> &local;
    const std::vector<int> rail;
    CollArgs in_host, on_rail;
};

// The reduction steps from `first` on produce partials, not final values (the rail phase
// finalises an average).
void keep_partial(Schedule &s, size_t first) {
    for (size_t i = first; i < s.steps.size(); ++i) s.steps[i].finalize = false;
}

} // namespace

int HostLayout::local_rank(int rank) const {
    const auto &m = members[static_cast<size_t>(host_of[static_cast<size_t>(rank)])];
    return static_cast<int>(std::find(m.begin(), m.end(), rank) - m.begin());
}

int HostLayout::ranks_per_host() const {
    if (members.empty()) return 0;
    for (const auto &m : members)
        if (m.size() != members[0].size()) return 0;
    return static_cast<int>(members[0].size());
}

std::string HostLayout::describe() const {
    char buf[64];
    if (const int l = ranks_per_host(); l > 0) {
        std::snprintf(buf, sizeof buf, "%d host%s x %d rank%s", hosts(), hosts() == 1 ? "" : "s", l, l == 1 ? "" : "s");
        return buf;
    }
    std::string s = std::to_string(hosts()) + " hosts of ";
    for (size_t h = 0; h < members.size(); ++h) s += (h ? ", " : "") + std::to_string(members[h].size());
    return s + " ranks";
}

bool hierarchical_applies(const HostLayout &l, std::string *why) {
    if (l.ranks_per_host() > 0) return true;
    if (why) *why = l.describe() + ": the hosts hold different numbers of ranks, so the rails do not line up";
    return false;
}

std::vector<int> hierarchical_peers(int rank, const HostLayout &l) {
    if (!hierarchical_applies(l, nullptr)) return {};
    const int h = l.host_of[static_cast<size_t>(rank)], i = l.local_rank(rank);
    const auto &local = l.members[static_cast<size_t>(h)];
    const std::vector<int> rail = rail_of(l, i);
    std::vector<int> out;
    for (int p : ring_peers(i, static_cast<int>(local.size()))) out.push_back(local[static_cast<size_t>(p)]);
    for (int p : ring_peers(h, l.hosts())) out.push_back(rail[static_cast<size_t>(p)]);
    for (int p : rhd_peers(h, l.hosts())) out.push_back(rail[static_cast<size_t>(p)]);
    return out;
}

// Pieces a large allreduce is cut into when it has both an in-host and a rail phase, so
// that their phases overlap: each piece is at least kPieceBytes.
constexpr size_t kPieceBytes = size_t(4) << 20;
constexpr size_t kMaxPieces = 4;

size_t hierarchical_pieces(const CollArgs &a, const HostLayout &l, size_t elem_bytes) {
    if (l.hosts() < 2 || l.ranks_per_host() < 2) return 1;
    return std::clamp<size_t>(a.count * elem_bytes / kPieceBytes, 1, kMaxPieces);
}

// The three phases of one piece (or of the whole buffer), built phase by phase over all
// pieces: every channel then carries all pieces' in-host reduce-scatter before any
// allgather, so piece j+1's in-host phase runs while piece j crosses the network, and
// piece j's allgather while piece j+1 does. Each piece's rail phase waits for its own
// reduce-scatter, its allgather for its own rail phase (step floors).
void build_hierarchical_allreduce(const CollArgs &a, const HostLayout &l, ScheduleBuilder &b) {
    if (a.nranks == 1) return build_ring_allreduce(a, b);
    struct Piece {
        CollArgs args;
        std::unique_ptr<Where> w;
        size_t off = 0, len = 0; // this rank's in-host chunk of the piece
        int floor = -1;
        std::vector<int> own;
    };
    const size_t n = hierarchical_pieces(a, l, b.elem_bytes());
    std::vector<Piece> pieces(n);
    for (size_t j = 0; j < n; ++j) {
        Piece &p = pieces[j];
        size_t poff, plen;
        chunk_range(a.count, static_cast<int>(n), static_cast<int>(j), &poff, &plen);
        p.args = a;
        p.args.count = plen;
        p.args.sendbuf = b.at(a.sendbuf, poff);
        p.args.recvbuf = b.at(a.recvbuf, poff);
        p.w = std::make_unique<Where>(p.args, l);
        chunk_range(plen, p.w->L, p.w->i, &p.off, &p.len);
    }
    const int H = pieces[0].w->H, L = pieces[0].w->L;
    // 1. Reduce-scatter inside the host: chunk i of each piece, summed over the host, lands
    //    in recvbuf.
    if (L > 1) {
        for (Piece &p : pieces) {
            const CollArgs &pa = p.args;
            const ChunkPlace chunk = [&](int c, size_t *off, size_t *len) { chunk_range(pa.count, L, c, off, len); };
            const size_t first = b.steps();
            b.set_group(&p.w->local);
            p.own = build_ring_placed_reduce_scatter(p.w->in_host, b, chunk, pa.recvbuf, nullptr);
            b.set_group(nullptr);
            if (H > 1) keep_partial(*b.schedule(), first);
            p.floor = p.own.back(); // one peer, reductions applied in order: the last slice means all
        }
    }
    // 2. Allreduce of each piece's chunk i along the rail, in place.
    if (H > 1) {
        for (Piece &p : pieces) {
            CollArgs &on_rail = p.w->on_rail;
            on_rail.count = p.len;
            on_rail.sendbuf = L > 1 ? b.at(p.args.recvbuf, p.off) : b.at(p.args.sendbuf, p.off);
            on_rail.recvbuf = b.at(p.args.recvbuf, p.off);
            const size_t first = b.steps();
            b.set_group(&p.w->rail, p.floor);
            if (power_of_two(H))
                build_rhd_allreduce(on_rail, b);
            else
                build_ring_allreduce(on_rail, b);
            b.set_group(nullptr);
            p.floor = b.join(first);
        }
    }
    // 3. Allgather inside the host.
    if (L > 1) {
        for (Piece &p : pieces) {
            const CollArgs &pa = p.args;
            const ChunkPlace chunk = [&](int c, size_t *off, size_t *len) { chunk_range(pa.count, L, c, off, len); };
            b.set_group(&p.w->local, p.floor);
            build_ring_placed_allgather(p.w->in_host, b, chunk, H > 1 ? std::vector<int>{} : p.own);
            b.set_group(nullptr);
        }
    }
}

void build_hierarchical_reduce_scatter(const CollArgs &a, const HostLayout &l, ScheduleBuilder &b) {
    if (l.hosts() == 1) return build_ring_reduce_scatter(a, b);
    Where w(a, l);
    const size_t m = a.count;
    // 1. Inside the host, once per host of the job: the blocks of that host's ranks, summed
    //    over this host, end on the local rank with the same index, at their place in scratch.
    int floor = -1;
    if (w.L > 1) {
        const size_t first = b.steps();
        b.set_group(&w.local);
        for (const std::vector<int> &dest : l.members) {
            const ChunkPlace block = [&](int c, size_t *off, size_t *len) {
                *off = static_cast<size_t>(dest[static_cast<size_t>(c)]) * m;
                *len = m;
            };
            build_ring_placed_reduce_scatter(w.in_host, b, block, a.scratch, nullptr);
        }
        b.set_group(nullptr);
        keep_partial(*b.schedule(), first);
        floor = b.join(first);
    }
    // 2. Along the rail: each block of a rank on this rail, summed over all hosts, ends on
    //    its owner, in recvbuf.
    w.on_rail.sendbuf = w.L > 1 ? a.scratch : a.sendbuf;
    const ChunkPlace block = [&](int c, size_t *off, size_t *len) {
        *off = static_cast<size_t>(w.rail[static_cast<size_t>(c)]) * m;
        *len = m;
    };
    b.set_group(&w.rail, floor);
    build_ring_placed_reduce_scatter(w.on_rail, b, block, a.scratch, a.recvbuf);
    b.set_group(nullptr);
}

void build_hierarchical_allgather(const CollArgs &a, const HostLayout &l, ScheduleBuilder &b) {
    if (l.hosts() == 1) return build_ring_allgather(a, b);
    Where w(a, l);
    const size_t m = a.count;
    void *mine = b.at(a.recvbuf, static_cast<size_t>(a.rank) * m);
    const size_t first = b.steps();
    std::vector<int> own;
    if (a.sendbuf != mine) own.push_back(b.local_copy(mine, a.sendbuf, m));
    // 1. Along the rail: the blocks of this rail's ranks.
    const ChunkPlace block = [&](int c, size_t *off, size_t *len) {
        *off = static_cast<size_t>(w.rail[static_cast<size_t>(c)]) * m;
        *len = m;
    };
    b.set_group(&w.rail);
    build_ring_placed_allgather(w.on_rail, b, block, own);
    b.set_group(nullptr);
    if (w.L == 1) return;
    const int floor = b.join(first);
    // 2. Inside the host, once per host of the job: local rank c holds the block of that
    //    host's rank c.
    b.set_group(&w.local, floor);
    for (const std::vector<int> &src : l.members) {
        const ChunkPlace place = [&](int c, size_t *off, size_t *len) {
            *off = static_cast<size_t>(src[static_cast<size_t>(c)]) * m;
            *len = m;
        };
        build_ring_placed_allgather(w.in_host, b, place, {});
    }
    b.set_group(nullptr);
}

} // namespace ibex::coll
