// Schedule builders, one algorithm per file, and the peers each one talks to (the
// communicator connects exactly the union of those).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "allreduce/schedule.h"

namespace ibex::coll {

struct CollArgs {
    const void *sendbuf = nullptr;
    void *recvbuf = nullptr;
    size_t count = 0; // allreduce/broadcast/reduce: count; reduce_scatter: recvcount; allgather: sendcount;
                      // alltoall: the elements to or from each rank
    ibex_datatype_t type = IBEX_U8;
    ibex_redop_t op = IBEX_SUM;
    int root = 0;
    int rank = 0;
    int nranks = 1;
    void *scratch = nullptr; // at least scratch_bytes() bytes, registered

    bool operator==(const CollArgs &) const = default;
};

// Elements [off, off + len) of chunk c when count elements are cut into n nearly equal
// chunks (the first count % n chunks one element longer).
void chunk_range(size_t count, int n, int c, size_t *off, size_t *len);

// ring.cpp: reduce-scatter then allgather around the ring, chunked and pipelined.
void build_ring_allreduce(const CollArgs &a, ScheduleBuilder &b);
void build_ring_reduce_scatter(const CollArgs &a, ScheduleBuilder &b); // partials in scratch
void build_ring_allgather(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> ring_peers(int rank, int n);
// The two halves of ring allreduce over chunks placed anywhere in the buffers: chunk c
// (elements [off, off + len) from `chunk`) ends reduced on rank c. The reduce-scatter reads
// sendbuf and keeps partials at the chunk's place in `partials` (also where this rank's
// final lands unless own_final is given); it returns the steps that produced this rank's
// chunk, slice by slice. The allgather sends this rank's chunk from recvbuf once `own` is
// done (may be empty when a step floor covers it) and copies every other chunk into place.
using ChunkPlace = std::function<void(int c, size_t *off, size_t *len)>;
std::vector<int> build_ring_placed_reduce_scatter(const CollArgs &a, ScheduleBuilder &b, const ChunkPlace &chunk,
                                                   void *partials, void *own_final);
void build_ring_placed_allgather(const CollArgs &a, ScheduleBuilder &b, const ChunkPlace &chunk,
                                 const std::vector<int> &own);

// sumsrv.cpp: BytePS's split of an allreduce of count elements between the n workers'
// own allreduce (elements [0, workers)) and k summation servers (per_server elements each,
// server s's from workers + s * per_server). No servers, or one worker: all to the workers.
struct SumsrvSplit {
    size_t workers = 0;
    size_t per_server = 0;
};
SumsrvSplit sumsrv_split(size_t count, int nranks, int servers);

// rhd.cpp: recursive halving (reduce-scatter) and doubling (allgather), Rabenseifner,
// with the non-power-of-two fix-up (the first 2 * (n - 2^k) ranks pair up first).
void build_rhd_allreduce(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> rhd_peers(int rank, int n);
int rhd_steps(int n); // log2 of the largest power of two <= n

// tree.cpp: double binary tree (two complementary trees, each carrying half the data:
// reduce up, broadcast down, pipelined by slices).
struct TreeLinks {
    int parent = -1;
    int child[2] = {-1, -1};
};
TreeLinks tree_links(int tree, int rank, int n);
int tree_depth(int n);
void build_tree_allreduce(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> tree_peers(int rank, int n);

// bigraph.cpp: halving-doubling on EFLOPS's BiGraph (two layers of switches, every upper
// switch linked to every lower one), with ranks placed so that every exchange crosses one
// switch-to-switch link and no link carries two in a step (the file's opening comment).
// Where each rank sits: layer (0 upper, 1 lower), switch in its layer, slot on the switch.
struct BiGraphLayout {
    int switches = 0;   // per layer
    int per_switch = 0; // hosts on each switch
    std::vector<int> layer, sw, slot; // by rank
};
struct BiGraphPlace {
    int layer = 0, sw = 0, slot = 0;
};
// Ranks numbered as ibex_sim numbers BiGraph hosts: blocks of per_switch, alternately on
// upper switch i and lower switch i. Empty when n is not a multiple of 2 * per_switch.
BiGraphLayout bigraph_alternating(int n, int per_switch);
// The mapping needs 2^k ranks filling the fabric, powers of two, and no more hosts per
// switch than switches per layer; false and *why otherwise.
bool bigraph_applies(const BiGraphLayout &l, std::string *why);
// Where virtual rank v sits.
BiGraphPlace bigraph_place(int v, int switches, int per_switch);
// order[v]: the rank at virtual position v (empty when the mapping does not apply).
std::vector<int> bigraph_order(const BiGraphLayout &l);
// rhd over the virtual ranks; with an order that does not fit (empty), plain rhd.
void build_bigraph_allreduce(const CollArgs &a, const std::vector<int> &order, ScheduleBuilder &b);
std::vector<int> bigraph_peers(int rank, const std::vector<int> &order);

// gdraa.cpp: MiMatrix's GDRAA: each rank writes chunk p of its input into rank p's landing
// zone, p folds them in and writes its finished chunk into every peer's recvbuf; no
// credits (Schedule::direct), one `ready` per peer per collective. Needs a connection to
// every peer, and a chunk (count / n, rounded up) that fits the landing zone.
bool gdraa_fits(size_t count, size_t elem_bytes, int nranks, size_t zone_bytes);
void build_gdraa_allreduce(const CollArgs &a, ScheduleBuilder &b);
std::vector<int> gdraa_peers(int rank, int n);

// chain.cpp: broadcast and reduce as pipelined chains along the ring (from the root /
// ending at the root).
void build_chain_broadcast(const CollArgs &a, ScheduleBuilder &b);
void build_chain_reduce(const CollArgs &a, ScheduleBuilder &b); // partials in scratch

// alltoall.cpp: pairwise exchange. Rank r's block for p (count elements at p * count of
// sendbuf) goes to p, which puts it at r * count of its recvbuf; r's own block is a local
// copy. Needs a connection to every peer (comm_connect_all).
void build_pairwise_alltoall(const CollArgs &a, ScheduleBuilder &b);
// Uneven blocks (alltoallv): sendcounts[p] elements at sdispls[p] to p, recvcounts[q] from
// q at rdispls[q] (nranks each; the caller checked that a rank's own two agree).
void build_pairwise_alltoallv(const CollArgs &a, std::span<const size_t> sendcounts, std::span<const size_t> sdispls,
                              std::span<const size_t> recvcounts, std::span<const size_t> rdispls, ScheduleBuilder &b);

// p2p.cpp: a batch of sends and receives (ibex_p2p_batch), each a run of slices of bytes,
// in the batch's order per peer; a send to this rank itself is copied into the batch's next
// receive from itself (the caller checked that they pair up, length for length). A message
// of at most small_max bytes is cut by `small` instead (eager-sized slices: no credit
// round trip), which both ends decide from its length alone.
struct P2pPiece {
    bool send;
    int peer;
    void *buf;
    size_t bytes;
};
void build_p2p(std::span<const P2pPiece> pieces, int rank, ScheduleBuilder &b, ScheduleBuilder &small,
               size_t small_max);

// hierarchical.cpp: which ranks share a host, and the collectives built on it: reduce
// inside each host, cross the network once per local rank (one rail each), spread inside.
struct HostLayout {
    std::vector<int> host_of;              // rank -> host, hosts numbered by their lowest rank
    std::vector<std::vector<int>> members; // host -> its ranks, ascending
    int hosts() const { return static_cast<int>(members.size()); }
    int local_rank(int rank) const;
    int ranks_per_host() const; // the same on every host, else 0
    std::string describe() const; // "2 hosts x 3 ranks", "2 hosts of 3, 1 ranks"
};
// key[r]: any value naming rank r's host (equal keys, same host).
template <typename Key>
HostLayout make_host_layout(const std::vector<Key> &key) {
    HostLayout l;
    for (size_t r = 0; r < key.size(); ++r) {
        size_t h = 0;
        while (h < l.members.size() && key[static_cast<size_t>(l.members[h][0])] != key[r]) ++h;
        if (h == l.members.size()) l.members.emplace_back();
        l.members[h].push_back(static_cast<int>(r));
        l.host_of.push_back(static_cast<int>(h));
    }
    return l;
}
// The hierarchical schedules need every host to hold the same number of ranks; when not,
// false and *why says so.
bool hierarchical_applies(const HostLayout &l, std::string *why);
// Allreduce: ring reduce-scatter inside the host, allreduce of this rank's chunk with the
// same local rank of every other host (rhd for a power of two of hosts, else ring), ring
// allgather inside the host. Reduce-scatter and allgather: the same two or three phases.
void build_hierarchical_allreduce(const CollArgs &a, const HostLayout &l, ScheduleBuilder &b);
void build_hierarchical_reduce_scatter(const CollArgs &a, const HostLayout &l, ScheduleBuilder &b); // scratch: nranks * count
void build_hierarchical_allgather(const CollArgs &a, const HostLayout &l, ScheduleBuilder &b);
std::vector<int> hierarchical_peers(int rank, const HostLayout &l);

} // namespace ibex::coll
