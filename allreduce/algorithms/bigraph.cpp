// BiGraph allreduce (EFLOPS, HPCA 2020): halving-doubling with ranks placed so that every
// exchange crosses exactly one switch-to-switch link, and no two exchanges of a step share
// a link.
//
// The fabric. Two layers of S switches each; every upper switch is linked to every lower
// switch (one link per pair), and H hosts hang off every switch: N = 2 S H hosts. A host
// on an upper switch reaches a host on a lower switch through that one link (host, upper,
// lower, host); two hosts on different switches of one layer need two switch-to-switch
// hops (through some switch of the other layer), and share links with whatever else the
// ECMP hash sends there.
//
// The mapping. Halving-doubling (rhd.cpp) pairs virtual rank v with v ^ 2^k in step k. Here
// every step must change the layer, so a virtual rank's layer is the parity of its bits:
// flipping any one bit flips it. With N = 2^n, S = 2^s, H = 2^t and t <= s, write v's
// low n - 1 bits as a (the low t bits) and b (the next s bits); then
//     layer  = popcount(v) mod 2        (0: upper)
//     switch = b                         on the upper layer,
//              b ^ a                     on the lower layer (a as the low t bits of an s-bit value)
//     slot   = a
// Each (layer, switch, slot) takes exactly one v: a = slot, b follows from the switch and
// the layer, and the top bit makes the parity. The H hosts of upper switch b have the H
// different values of a; in any step their partners are on the other layer, on switches
// (b ^ e_b) ^ (a ^ e_a), where e is the step's bit split the same way: H different lower
// switches, so each upper-lower link carries one exchange each way and none contends. The
// same holds from the lower side (the map a -> switch is one-to-one there too). Every
// step is therefore one switch-to-switch hop for every pair, contention-free, at the
// host's full link rate. With t > s (more hosts per switch than switches per layer) some
// link must carry ceil(H / S) exchanges in some step; the builder then refuses the
// mapping (bigraph_applies) and runs plain rhd over the ranks as numbered.
//
// The schedule is rhd's, unchanged, over virtual ranks: log2 N halving steps, each
// exchanging half of what the previous one kept, then log2 N doubling steps in reverse,
// with the same slices, dependencies and operand order (so every rank ends with the same
// bits). Only the peers differ: virtual rank v's partner in step k is the rank placed at
// v ^ 2^k.
//
// Worked example, N = 8 (S = 2 switches per layer, H = 2 hosts per switch; U0, U1 upper,
// L0, L1 lower; v = c b a in binary):
//     v  a b c  parity  place        v  a b c  parity  place
//     0  0 0 0  0       U0 slot 0    4  0 0 1  1       L0 slot 0
//     1  1 0 0  1       L1 slot 1    5  1 0 1  0       U0 slot 1
//     2  0 1 0  1       L1 slot 0    6  0 1 1  0       U1 slot 0
//     3  1 1 0  0       U1 slot 1    7  1 1 1  1       L0 slot 1
// Step 1 (v ^ 1, half the vector each way): 0-1 U0-L1, 5-4 U0-L0, 3-2 U1-L1, 6-7 U1-L0.
// Step 2 (v ^ 2, a quarter):                0-2 U0-L1, 5-7 U0-L0, 3-1 U1-L1, 6-4 U1-L0.
// Step 3 (v ^ 4, an eighth):                0-4 U0-L0, 5-1 U0-L1, 3-7 U1-L0, 6-2 U1-L1.
// Then steps 3, 2, 1 again with the finished pieces (allgather). In each step the four
// exchanges use the four upper-lower links once each. Plain rhd over hosts numbered
// switch by switch would instead exchange inside a switch (free) in some steps and
// between two switches of one layer (two hops, shared) in others.
//
// Ranks are numbered as ibex_sim's BiGraph numbers its hosts: blocks of H, alternately on
// upper switch i and lower switch i (bigraph_alternating); any other numbering can be
// described by filling a BiGraphLayout by hand.
#include <bit>

#include "allreduce/algorithms/algorithms.h"

namespace ibex::coll {
namespace {

bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

} // namespace

BiGraphLayout bigraph_alternating(int n, int per_switch) {
    BiGraphLayout l;
    if (n < 1 || per_switch < 1 || n % (2 * per_switch)) return l;
    l.per_switch = per_switch;
    l.switches = n / (2 * per_switch);
    for (int r = 0; r < n; ++r) {
        const int block = r / per_switch;
        l.layer.push_back(block % 2);
        l.sw.push_back(block / 2);
        l.slot.push_back(r % per_switch);
    }
    return l;
}

bool bigraph_applies(const BiGraphLayout &l, std::string *why) {
    const int n = static_cast<int>(l.layer.size());
    auto refuse = [&](const std::string &w) {
        if (why) *why = w;
        return false;
    };
    if (n < 2) return refuse("fewer than 2 ranks");
    if (!power_of_two(l.switches) || !power_of_two(l.per_switch))
        return refuse("switches per layer (" + std::to_string(l.switches) + ") and hosts per switch (" +
                      std::to_string(l.per_switch) + ") must be powers of two");
    if (n != 2 * l.switches * l.per_switch)
        return refuse(std::to_string(n) + " ranks do not fill 2 layers x " + std::to_string(l.switches) + " switches x " +
                      std::to_string(l.per_switch) + " hosts");
    if (l.per_switch > l.switches)
        return refuse(std::to_string(l.per_switch) + " hosts per switch exceed " + std::to_string(l.switches) +
                      " switches per layer: some link would carry two exchanges in one step");
    if (static_cast<int>(l.sw.size()) != n || static_cast<int>(l.slot.size()) != n) return refuse("incomplete layout");
    std::vector<bool> seen(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        if (l.layer[r] < 0 || l.layer[r] > 1 || l.sw[r] < 0 || l.sw[r] >= l.switches || l.slot[r] < 0 ||
            l.slot[r] >= l.per_switch)
            return refuse("rank " + std::to_string(r) + " is placed outside the fabric");
        const int place = (l.layer[r] * l.switches + l.sw[r]) * l.per_switch + l.slot[r];
        if (seen[static_cast<size_t>(place)]) return refuse("two ranks share one host");
        seen[static_cast<size_t>(place)] = true;
    }
    return true;
}

BiGraphPlace bigraph_place(int v, int switches, int per_switch) {
    const int t = std::countr_zero(static_cast<unsigned>(per_switch));
    const int a = v & (per_switch - 1);
    const int b = (v >> t) & (switches - 1);
    BiGraphPlace p;
    p.layer = std::popcount(static_cast<unsigned>(v)) & 1;
    p.sw = p.layer == 0 ? b : b ^ a;
    p.slot = a;
    return p;
}

std::vector<int> bigraph_order(const BiGraphLayout &l) {
    if (!bigraph_applies(l, nullptr)) return {};
    const int n = static_cast<int>(l.layer.size());
    std::vector<int> rank_at(static_cast<size_t>(n)); // by (layer, switch, slot)
    for (int r = 0; r < n; ++r)
        rank_at[static_cast<size_t>((l.layer[r] * l.switches + l.sw[r]) * l.per_switch + l.slot[r])] = r;
    std::vector<int> order(static_cast<size_t>(n));
    for (int v = 0; v < n; ++v) {
        const BiGraphPlace p = bigraph_place(v, l.switches, l.per_switch);
        order[static_cast<size_t>(v)] = rank_at[static_cast<size_t>((p.layer * l.switches + p.sw) * l.per_switch + p.slot)];
    }
    return order;
}

void build_bigraph_allreduce(const CollArgs &a, const std::vector<int> &order, ScheduleBuilder &b) {
    if (order.size() != static_cast<size_t>(a.nranks)) return build_rhd_allreduce(a, b);
    CollArgs v = a;
    for (int i = 0; i < a.nranks; ++i)
        if (order[static_cast<size_t>(i)] == a.rank) v.rank = i;
    b.set_group(&order);
    build_rhd_allreduce(v, b);
    b.set_group(nullptr);
}

std::vector<int> bigraph_peers(int rank, const std::vector<int> &order) {
    const int n = static_cast<int>(order.size());
    int v = -1;
    for (int i = 0; i < n; ++i)
        if (order[static_cast<size_t>(i)] == rank) v = i;
    if (v < 0) return {};
    std::vector<int> out;
    for (int p : rhd_peers(v, n)) out.push_back(order[static_cast<size_t>(p)]);
    return out;
}

} // namespace ibex::coll
