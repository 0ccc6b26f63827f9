// Every algorithm's schedules, for all ranks at once, run through the random-order
// simulator: right results for power-of-two and other rank counts, counts that do not
// divide evenly (0, 1, fewer elements than ranks), many slices, in-place and out-of-place,
// and the same bits on every rank and for every interleaving.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <bit>
#include <map>
#include <set>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/cpu/elementwise.h"
#include "tests/allreduce/algorithms/schedule_sim.h"

namespace ibex::coll {
namespace {

enum class Coll { ring, rhd, tree, reduce_scatter, allgather, broadcast, reduce, hier, hier_reduce_scatter, hier_allgather, bigraph, gdraa };

const char *name(Coll c) {
    switch (c) {
    case Coll::ring: return "allreduce/ring";
    case Coll::rhd: return "allreduce/rhd";
    case Coll::tree: return "allreduce/tree";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::allgather: return "allgather";
    case Coll::broadcast: return "broadcast";
    case Coll::reduce: return "reduce";
    case Coll::hier: return "allreduce/hierarchical";
    case Coll::hier_reduce_scatter: return "reduce_scatter/hierarchical";
    case Coll::hier_allgather: return "allgather/hierarchical";
    case Coll::bigraph: return "allreduce/bigraph";
    case Coll::gdraa: return "allreduce/gdraa";
    }
    return "?";
}

struct Case {
    Coll coll;
    int n;
    size_t count;
    bool in_place;
    int root = 0;
    ibex_datatype_t type = IBEX_F32;
    ibex_redop_t op = IBEX_SUM;
    size_t slice_bytes = 64;
    bool random_values = false;
    std::vector<int> host_of = {}; // hierarchical: rank -> host
    int bigraph_per = 0;           // bigraph: hosts per switch (ibex_sim's numbering); 0: none fits
};

bool is_reduce_scatter(Coll c) { return c == Coll::reduce_scatter || c == Coll::hier_reduce_scatter; }
bool is_allgather(Coll c) { return c == Coll::allgather || c == Coll::hier_allgather; }

std::string describe(const Case &c) {
    return std::string(name(c.coll)) + " n=" + std::to_string(c.n) + " count=" + std::to_string(c.count) +
           (c.in_place ? " in-place" : " out-of-place") + " root=" + std::to_string(c.root) + " type=" +
           ibex_datatype_name(c.type) + " op=" + ibex_redop_name(c.op) + " slice=" + std::to_string(c.slice_bytes) +
           (c.host_of.empty() ? "" : " layout=" + make_host_layout(c.host_of).describe()) +
           (c.bigraph_per ? " hosts/switch=" + std::to_string(c.bigraph_per) : "");
}

// Input element i of rank r: small integers (exact in every type, so any summation order
// gives the same reference) or random floats (to see accumulation-order differences). For
// products: 1, -1 or 2, so that any product of up to 16 ranks is a power of two that every
// floating type holds exactly (integers wrap, which any order does alike).
void fill(const Case &c, int r, uint8_t *p, size_t count, size_t base) {
    std::mt19937 rng(static_cast<unsigned>(r * 1000003 + base));
    for (size_t i = 0; i < count; ++i) {
        const size_t k = static_cast<size_t>(r) * 7 + (base + i) * 3;
        const long v = c.op == IBEX_PROD ? (k % 5 == 0 ? 2 : k % 2 ? 1 : -1) : static_cast<long>(k % 11) - 5;
        const float f = c.random_values ? std::uniform_real_distribution<float>(-1, 1)(rng) : static_cast<float>(v);
        switch (c.type) {
        case IBEX_U8: p[i] = static_cast<uint8_t>(v); break;
        case IBEX_I32: {
            const auto x = static_cast<int32_t>(v);
            std::memcpy(p + 4 * i, &x, 4);
            break;
        }
        case IBEX_I64: {
            const auto x = static_cast<int64_t>(v);
            std::memcpy(p + 8 * i, &x, 8);
            break;
        }
        case IBEX_F16: {
            const uint16_t h = cpu::f32_to_f16(f);
            std::memcpy(p + 2 * i, &h, 2);
            break;
        }
        case IBEX_BF16: {
            const auto h = static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); // exact for these values
            std::memcpy(p + 2 * i, &h, 2);
            break;
        }
        case IBEX_F32: std::memcpy(p + 4 * i, &f, 4); break;
        case IBEX_F64: {
            const double d = f;
            std::memcpy(p + 8 * i, &d, 8);
            break;
        }
        default: FAIL() << "unknown type";
        }
    }
}

// Every type with every op, for algorithms checked on all of them.
template <typename Each>
void every_type_and_op(Each each) {
    for (int t = 0; t < IBEX_DATATYPE_COUNT; ++t)
        for (int o = 0; o < IBEX_REDOP_COUNT; ++o) each(static_cast<ibex_datatype_t>(t), static_cast<ibex_redop_t>(o));
}

struct Outcome {
    std::vector<std::vector<uint8_t>> recv; // per rank, the result region
};

// Builds and simulates the collective; returns each rank's result region.
Outcome run_case(const Case &c, uint64_t seed) {
    const size_t e = ibex_datatype_size(c.type);
    const int n = c.n;
    const size_t cnt = c.count;
    size_t send_elems = cnt, recv_elems = cnt;
    if (is_reduce_scatter(c.coll)) send_elems = cnt * static_cast<size_t>(n);
    if (is_allgather(c.coll)) recv_elems = cnt * static_cast<size_t>(n);
    std::vector<std::vector<uint8_t>> send(n), recv(n), scratch(n);
    std::vector<Schedule> scheds(n);
    std::vector<CollArgs> args(n);
    for (int r = 0; r < n; ++r) {
        send[r].assign(std::max<size_t>(send_elems, 1) * e, 0xAB);
        recv[r].assign(std::max<size_t>(recv_elems, 1) * e, 0xCD);
        scratch[r].assign(std::max<size_t>(send_elems, 1) * e + 64, 0xEF);
        CollArgs &a = args[r];
        a.count = cnt;
        a.type = c.type;
        a.op = c.op;
        a.root = c.root;
        a.rank = r;
        a.nranks = n;
        a.scratch = scratch[r].data();
        if (!c.in_place) {
            fill(c, r, send[r].data(), send_elems, 0);
            a.sendbuf = send[r].data();
            a.recvbuf = recv[r].data();
            continue;
        }
        switch (c.coll) {
        case Coll::allgather:
        case Coll::hier_allgather:
            fill(c, r, recv[r].data() + static_cast<size_t>(r) * cnt * e, cnt, 0);
            a.recvbuf = recv[r].data();
            a.sendbuf = recv[r].data() + static_cast<size_t>(r) * cnt * e;
            break;
        case Coll::reduce_scatter:
        case Coll::hier_reduce_scatter:
            fill(c, r, send[r].data(), send_elems, 0);
            a.sendbuf = send[r].data();
            a.recvbuf = send[r].data() + static_cast<size_t>(r) * cnt * e;
            break;
        default:
            fill(c, r, recv[r].data(), recv_elems, 0);
            a.sendbuf = a.recvbuf = recv[r].data();
            break;
        }
    }
    const HostLayout layout = make_host_layout(c.host_of);
    const std::vector<int> order = c.bigraph_per ? bigraph_order(bigraph_alternating(n, c.bigraph_per)) : std::vector<int>{};
    if (c.bigraph_per) {
        EXPECT_EQ(order.size(), static_cast<size_t>(n)) << "the mapping should apply";
    }
    for (int r = 0; r < n; ++r) {
        ScheduleBuilder b(&scheds[r], e, c.slice_bytes);
        switch (c.coll) {
        case Coll::hier: build_hierarchical_allreduce(args[r], layout, b); break;
        case Coll::hier_reduce_scatter: build_hierarchical_reduce_scatter(args[r], layout, b); break;
        case Coll::hier_allgather: build_hierarchical_allgather(args[r], layout, b); break;
        case Coll::ring: build_ring_allreduce(args[r], b); break;
        case Coll::rhd: build_rhd_allreduce(args[r], b); break;
        case Coll::bigraph: build_bigraph_allreduce(args[r], order, b); break;
        case Coll::gdraa: build_gdraa_allreduce(args[r], b); break;
        case Coll::tree: build_tree_allreduce(args[r], b); break;
        case Coll::reduce_scatter: build_ring_reduce_scatter(args[r], b); break;
        case Coll::allgather: build_ring_allgather(args[r], b); break;
        case Coll::broadcast: build_chain_broadcast(args[r], b); break;
        case Coll::reduce: build_chain_reduce(args[r], b); break;
        }
    }
    const test::SimResult res = test::simulate(scheds, c.type, c.op, seed);
    EXPECT_TRUE(res.ok) << describe(c) << ": " << res.error;
    Outcome out;
    out.recv.resize(n);
    for (int r = 0; r < n; ++r) {
        const uint8_t *p = static_cast<const uint8_t *>(args[r].recvbuf);
        out.recv[r].assign(p, p + recv_elems * e);
    }
    return out;
}

// Reference: inputs folded in rank order on one side.
std::vector<uint8_t> reference(const Case &c) {
    const size_t e = ibex_datatype_size(c.type);
    const int n = c.n;
    const size_t elems = is_reduce_scatter(c.coll) ? c.count * static_cast<size_t>(n) : c.count;
    if (is_allgather(c.coll)) {
        std::vector<uint8_t> all(c.count * static_cast<size_t>(n) * e);
        for (int r = 0; r < n; ++r) fill(c, r, all.data() + static_cast<size_t>(r) * c.count * e, c.count, 0);
        return all;
    }
    std::vector<uint8_t> acc(std::max<size_t>(elems, 1) * e), in(acc.size());
    if (c.coll == Coll::broadcast) {
        fill(c, c.root, acc.data(), elems, 0);
        acc.resize(elems * e);
        return acc;
    }
    fill(c, 0, acc.data(), elems, 0);
    for (int r = 1; r < n; ++r) {
        fill(c, r, in.data(), elems, 0);
        reduce_into(acc.data(), acc.data(), in.data(), elems, c.type, c.op);
    }
    if (c.op == IBEX_AVG) finalize_avg(acc.data(), elems, c.type, n);
    acc.resize(elems * e);
    return acc;
}

void check(const Case &c) {
    SCOPED_TRACE(describe(c));
    const size_t e = ibex_datatype_size(c.type);
    const std::vector<uint8_t> ref = reference(c);
    Outcome first;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        Outcome o = run_case(c, seed);
        if (::testing::Test::HasFailure()) return;
        for (int r = 0; r < c.n; ++r) {
            std::vector<uint8_t> want;
            switch (c.coll) {
            case Coll::reduce_scatter:
            case Coll::hier_reduce_scatter:
                want.assign(ref.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * c.count * e),
                            ref.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r + 1) * c.count * e));
                break;
            case Coll::reduce:
                if (r != c.root) continue;
                want = ref;
                break;
            default: want = ref; break;
            }
            if (c.random_values) {
                // Different association than the reference: same bits on every rank and
                // every interleaving instead, checked below; here only closeness.
                ASSERT_EQ(o.recv[r].size(), want.size());
                for (size_t i = 0; i < want.size() / 4; ++i) {
                    float got, w;
                    std::memcpy(&got, o.recv[r].data() + 4 * i, 4);
                    std::memcpy(&w, want.data() + 4 * i, 4);
                    ASSERT_NEAR(got, w, 1e-4 * c.n) << "rank " << r << " element " << i;
                }
            } else {
                ASSERT_EQ(o.recv[r], want) << "rank " << r << " seed " << seed;
            }
            if (c.coll == Coll::ring || c.coll == Coll::rhd || c.coll == Coll::tree || c.coll == Coll::hier ||
                c.coll == Coll::bigraph || c.coll == Coll::gdraa) {
                ASSERT_EQ(o.recv[r], o.recv[0]) << "rank " << r << " differs from rank 0";
            }
        }
        if (seed == 1) {
            first = o;
            continue;
        }
        for (int r = 0; r < c.n; ++r) {
            if (c.coll != Coll::reduce || r == c.root) {
                ASSERT_EQ(o.recv[r], first.recv[r]) << "interleaving changed the bits of rank " << r;
            }
        }
    }
}

const int kRanks[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16};

std::vector<size_t> counts_for(int n) {
    std::set<size_t> s = {0, 1, 2, 7, static_cast<size_t>(n) - 1 + 1, static_cast<size_t>(n) + 1,
                          static_cast<size_t>(3 * n + 2), 16, 17, 100};
    return {s.begin(), s.end()};
}

TEST(Schedules, AllreduceEveryAlgorithm) {
    for (Coll algo : {Coll::ring, Coll::rhd, Coll::tree})
        for (int n : kRanks)
            for (size_t count : counts_for(n))
                for (bool in_place : {false, true}) {
                    check({algo, n, count, in_place});
                    if (HasFailure()) return;
                }
}

TEST(Schedules, AllreduceOpsAndTypes) {
    for (Coll algo : {Coll::ring, Coll::rhd, Coll::tree})
        for (int n : {3, 5, 6, 8})
            for (auto [type, op] : {std::pair{IBEX_I32, IBEX_MAX}, std::pair{IBEX_I32, IBEX_MIN},
                                   std::pair{IBEX_I32, IBEX_PROD}, std::pair{IBEX_F32, IBEX_AVG},
                                   std::pair{IBEX_I32, IBEX_AVG}}) {
                Case c{algo, n, 23, false};
                c.type = type;
                c.op = op;
                check(c);
                if (HasFailure()) return;
            }
}

TEST(Schedules, AllreduceSameBitsWithRoundedSums) {
    for (Coll algo : {Coll::ring, Coll::rhd, Coll::tree})
        for (int n : {3, 4, 5, 7}) {
            Case c{algo, n, 41, false};
            c.random_values = true;
            check(c);
            if (HasFailure()) return;
        }
}

TEST(Schedules, OtherCollectives) {
    for (Coll coll : {Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce})
        for (int n : kRanks)
            for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(33)})
                for (bool in_place : {false, true})
                    for (int root : {0, n - 1, n / 2}) {
                        Case c{coll, n, count, in_place, root};
                        if (coll == Coll::reduce_scatter || coll == Coll::reduce) c.op = IBEX_AVG;
                        check(c);
                        if (HasFailure()) return;
                        if (coll == Coll::reduce_scatter || coll == Coll::allgather) break; // no root
                    }
}

// Alltoall: rank q's recv block p is rank p's send block q, for every interleaving of
// every rank's steps, with blocks of whole slices, a slice and a half, and less.
TEST(Schedules, AlltoallEveryRankCountAndSlicing) {
    for (ibex_datatype_t type : {IBEX_F32, IBEX_U8, IBEX_F64})
        for (int n : kRanks)
            for (size_t count : {size_t(0), size_t(1), size_t(5), size_t(24), size_t(33)}) {
                Case c{Coll::allgather, n, count, false};
                c.type = type;
                const size_t e = ibex_datatype_size(type), all = count * static_cast<size_t>(n);
                SCOPED_TRACE("alltoall n=" + std::to_string(n) + " count=" + std::to_string(count) + " type=" +
                             ibex_datatype_name(type));
                std::vector<std::vector<uint8_t>> send(n), recv(n);
                std::vector<Schedule> scheds(n);
                for (int r = 0; r < n; ++r) {
                    send[r].assign(std::max<size_t>(all, 1) * e, 0);
                    fill(c, r, send[r].data(), all, 0);
                    recv[r].assign(std::max<size_t>(all, 1) * e, 0xCD);
                    CollArgs a;
                    a.sendbuf = send[r].data();
                    a.recvbuf = recv[r].data();
                    a.count = count;
                    a.type = type;
                    a.rank = r;
                    a.nranks = n;
                    ScheduleBuilder b(&scheds[r], e, 8 * e); // 8 elements a slice
                    build_pairwise_alltoall(a, b);
                    for (const Step &st : scheds[r].steps)
                        ASSERT_TRUE(st.peer != r) << "a transfer to itself";
                }
                if (count == 0) continue; // start_op runs no schedule for an empty collective
                for (uint64_t seed = 1; seed <= 3; ++seed) {
                    for (int r = 0; r < n; ++r) std::fill(recv[r].begin(), recv[r].end(), 0xCD);
                    const test::SimResult res = test::simulate(scheds, type, IBEX_SUM, seed);
                    ASSERT_TRUE(res.ok) << res.error;
                    for (int q = 0; q < n; ++q)
                        for (int p = 0; p < n; ++p)
                            ASSERT_EQ(0, std::memcmp(recv[q].data() + static_cast<size_t>(p) * count * e,
                                                     send[p].data() + static_cast<size_t>(q) * count * e, count * e))
                                << "rank " << q << "'s block from rank " << p << ", seed " << seed;
                }
            }
}

TEST(Schedules, LargeSlicesAndOneSlice) {
    for (Coll algo : {Coll::ring, Coll::rhd, Coll::tree})
        for (size_t slice : {size_t(4), size_t(1 << 20)}) {
            Case c{algo, 5, 77, false};
            c.slice_bytes = slice;
            check(c);
            if (HasFailure()) return;
        }
}

// rank -> host for `hosts` hosts of `per` ranks each; interleaved: rank r on host r % hosts.
std::vector<int> layout_of(int hosts, int per, bool interleaved) {
    std::vector<int> h;
    for (int r = 0; r < hosts * per; ++r) h.push_back(interleaved ? r % hosts : r / per);
    return h;
}

struct LayoutCase {
    int hosts, per;
    bool interleaved;
};
const LayoutCase kLayouts[] = {{1, 1, false}, {1, 4, false}, {2, 1, false}, {2, 2, false}, {2, 2, true},
                               {2, 3, false}, {3, 2, false}, {3, 2, true}, {4, 1, false}, {4, 2, false},
                               {2, 4, true},  {3, 3, false}, {5, 2, false}};

TEST(Hierarchical, EveryLayoutAndCount) {
    for (Coll coll : {Coll::hier, Coll::hier_reduce_scatter, Coll::hier_allgather})
        for (const LayoutCase &lc : kLayouts) {
            const int n = lc.hosts * lc.per;
            for (size_t count : counts_for(n))
                for (bool in_place : {false, true}) {
                    Case c{coll, n, count, in_place};
                    c.host_of = layout_of(lc.hosts, lc.per, lc.interleaved);
                    if (coll == Coll::hier_reduce_scatter) c.op = IBEX_AVG;
                    check(c);
                    if (HasFailure()) return;
                }
        }
}

TEST(Hierarchical, OpsTypesAndSlices) {
    for (const LayoutCase &lc : kLayouts)
        for (auto [type, op] : {std::pair{IBEX_I32, IBEX_MAX}, std::pair{IBEX_I32, IBEX_MIN},
                               std::pair{IBEX_I32, IBEX_PROD}, std::pair{IBEX_F32, IBEX_AVG},
                               std::pair{IBEX_I32, IBEX_AVG}, std::pair{IBEX_F32, IBEX_SUM}})
            for (size_t slice : {size_t(4), size_t(64), size_t(1 << 20)}) {
                Case c{Coll::hier, lc.hosts * lc.per, 53, false};
                c.host_of = layout_of(lc.hosts, lc.per, lc.interleaved);
                c.type = type;
                c.op = op;
                c.slice_bytes = slice;
                check(c);
                if (HasFailure()) return;
            }
}

// Large enough that the allreduce is cut into pieces whose phases overlap (2 and 4 pieces
// of at least 4 MiB): every piece still right, in and out of place.
TEST(Hierarchical, PipelinedPieces) {
    for (const LayoutCase &lc : {LayoutCase{2, 2, false}, LayoutCase{3, 2, true}, LayoutCase{2, 3, false}})
        for (size_t count : {(size_t(8) << 20) / 4 + 3, (size_t(16) << 20) / 4 + 5})
            for (auto [type, op] : {std::pair{IBEX_I32, IBEX_SUM}, std::pair{IBEX_F32, IBEX_AVG}}) {
                Case c{Coll::hier, lc.hosts * lc.per, count, count % 2 == 1};
                c.host_of = layout_of(lc.hosts, lc.per, lc.interleaved);
                c.type = type;
                c.op = op;
                c.slice_bytes = size_t(1) << 20;
                check(c);
                if (HasFailure()) return;
            }
}

TEST(Hierarchical, SameBitsWithRoundedSums) {
    for (const LayoutCase &lc : kLayouts) {
        Case c{Coll::hier, lc.hosts * lc.per, 97, true};
        c.host_of = layout_of(lc.hosts, lc.per, lc.interleaved);
        c.random_values = true;
        check(c);
        if (HasFailure()) return;
    }
}

TEST(Hierarchical, UnevenLayoutIsRefusedWithAReason) {
    const HostLayout l = make_host_layout(std::vector<int>{0, 0, 0, 1});
    std::string why;
    EXPECT_FALSE(hierarchical_applies(l, &why));
    EXPECT_NE(why.find("2 hosts of 3, 1 ranks"), std::string::npos) << why;
    EXPECT_TRUE(hierarchical_peers(0, l).empty());
    EXPECT_EQ(make_host_layout(std::vector<std::string>{"b", "a", "b", "a"}).describe(), "2 hosts x 2 ranks");
}

TEST(Hierarchical, SchedulesTalkOnlyToTheirPeers) {
    for (const LayoutCase &lc : kLayouts) {
        const HostLayout l = make_host_layout(layout_of(lc.hosts, lc.per, lc.interleaved));
        const int n = lc.hosts * lc.per;
        for (int r = 0; r < n; ++r) {
            const std::vector<int> peers = hierarchical_peers(r, l);
            for (int p : peers) {
                const std::vector<int> back = hierarchical_peers(p, l);
                ASSERT_NE(std::find(back.begin(), back.end(), r), back.end()) << r << "->" << p;
            }
            std::vector<float> buf(4 * static_cast<size_t>(n) * 40);
            CollArgs a;
            a.sendbuf = buf.data();
            a.recvbuf = buf.data() + n * 40;
            a.scratch = buf.data() + 2 * n * 40;
            a.count = 37;
            a.type = IBEX_F32;
            a.rank = r;
            a.nranks = n;
            for (int which = 0; which < 3; ++which) {
                Schedule s;
                ScheduleBuilder b(&s, 4, 16);
                if (which == 0) build_hierarchical_allreduce(a, l, b);
                if (which == 1) build_hierarchical_reduce_scatter(a, l, b);
                if (which == 2) build_hierarchical_allgather(a, l, b);
                for (const Step &st : s.steps)
                    if (st.kind != StepKind::local_copy) {
                        ASSERT_NE(std::find(peers.begin(), peers.end(), st.peer), peers.end())
                            << "rank " << r << " talks to " << st.peer << " in collective " << which;
                    }
            }
        }
    }
}

// BiGraph shapes the mapping applies to: (ranks, hosts per switch), switches per layer
// = ranks / (2 * hosts per switch) >= hosts per switch.
const std::pair<int, int> kBiGraphShapes[] = {{2, 1}, {4, 1}, {8, 1}, {8, 2}, {16, 2}, {32, 2}, {32, 4}, {64, 4}};

TEST(BiGraph, EveryShapeAndCount) {
    for (auto [n, per] : kBiGraphShapes)
        for (size_t count : counts_for(n))
            for (bool in_place : {false, true}) {
                Case c{Coll::bigraph, n, count, in_place};
                c.bigraph_per = per;
                check(c);
                if (HasFailure()) return;
            }
    // Where the mapping does not apply, plain rhd over the ranks as numbered.
    for (int n : {3, 5, 6, 7, 9, 12, 13}) {
        check({Coll::bigraph, n, 29, false});
        if (HasFailure()) return;
    }
}

TEST(BiGraph, EveryTypeOpAndSlice) {
    for (auto [n, per] : {std::pair{2, 1}, std::pair{8, 2}, std::pair{16, 2}})
        every_type_and_op([&, n = n, per = per](ibex_datatype_t type, ibex_redop_t op) {
            for (size_t slice : {ibex_datatype_size(type), size_t(64), size_t(1 << 20)}) {
                Case c{Coll::bigraph, n, 53, false};
                c.type = type;
                c.op = op;
                c.slice_bytes = slice;
                c.bigraph_per = per;
                check(c);
                if (HasFailure()) return;
            }
        });
    for (auto [n, per] : {std::pair{8, 2}, std::pair{32, 4}}) {
        Case c{Coll::bigraph, n, 41, false};
        c.random_values = true;
        c.bigraph_per = per;
        check(c);
        if (HasFailure()) return;
    }
}

// The file's worked example: where each virtual rank of 8 sits.
TEST(BiGraph, WorkedExamplePlacesEightRanks) {
    const BiGraphPlace want[8] = {{0, 0, 0}, {1, 1, 1}, {1, 1, 0}, {0, 1, 1}, {1, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 1}};
    for (int v = 0; v < 8; ++v) {
        const BiGraphPlace p = bigraph_place(v, 2, 2);
        EXPECT_EQ(p.layer, want[v].layer) << v;
        EXPECT_EQ(p.sw, want[v].sw) << v;
        EXPECT_EQ(p.slot, want[v].slot) << v;
    }
    // ibex_sim's numbering: ranks 0-1 on U0, 2-3 on L0, 4-5 on U1, 6-7 on L1.
    EXPECT_EQ(bigraph_order(bigraph_alternating(8, 2)), (std::vector<int>{0, 7, 6, 5, 2, 1, 4, 3}));
}

// Per step of halving-doubling, each exchange goes between the layers (one switch-to-switch
// link) and no directed link carries two; with the ranks in plain order some exchanges
// stay in one layer across switches (two hops) or share a link.
TEST(BiGraph, EveryStepCrossesOneLinkAndNoneShares) {
    for (auto [n, per] : {std::pair{8, 2}, std::pair{16, 2}, std::pair{32, 4}, std::pair{64, 4}, std::pair{256, 8},
                          std::pair{1024, 16}}) {
        const BiGraphLayout l = bigraph_alternating(n, per);
        ASSERT_TRUE(bigraph_applies(l, nullptr)) << n;
        const std::vector<int> order = bigraph_order(l);
        const std::vector<int> plain = [n] {
            std::vector<int> v(static_cast<size_t>(n));
            for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
            return v;
        }();
        for (const std::vector<int> *o : {&order, &plain}) {
            int bad_steps = 0;
            for (int mask = 1; mask < n; mask <<= 1) {
                std::vector<int> load(static_cast<size_t>(l.switches * l.switches * 2));
                bool bad = false;
                for (int v = 0; v < n; ++v) {
                    const int r = (*o)[static_cast<size_t>(v)], p = (*o)[static_cast<size_t>(v ^ mask)];
                    if (l.layer[r] == l.layer[p]) {
                        bad = bad || l.sw[r] != l.sw[p]; // same switch: no link at all
                        continue;
                    }
                    const int up = l.layer[r] == 0 ? l.sw[r] : l.sw[p], down = l.layer[r] == 0 ? l.sw[p] : l.sw[r];
                    const int dir = l.layer[r]; // 0: upper to lower
                    bad = bad || ++load[static_cast<size_t>((up * l.switches + down) * 2 + dir)] > 1;
                }
                if (o == &order) {
                    EXPECT_FALSE(bad) << "n=" << n << " step " << mask;
                }
                bad_steps += bad;
            }
            if (o == &plain) {
                EXPECT_GT(bad_steps, 0) << "n=" << n << ": plain order should contend somewhere";
            }
        }
        for (int r = 0; r < n; ++r) {
            const std::vector<int> peers = bigraph_peers(r, order);
            EXPECT_EQ(peers.size(), static_cast<size_t>(std::countr_zero(static_cast<unsigned>(n))));
            for (int p : peers) EXPECT_NE(l.layer[p], l.layer[r]) << "n=" << n << " " << r << "->" << p;
        }
    }
}

TEST(BiGraph, ShapesThatCannotBeContentionFreeAreRefused) {
    std::string why;
    EXPECT_FALSE(bigraph_applies(bigraph_alternating(64, 16), &why)); // 2 switches per layer, 16 hosts each
    EXPECT_NE(why.find("exceed"), std::string::npos) << why;
    EXPECT_FALSE(bigraph_applies(bigraph_alternating(24, 2), &why)); // 6 switches per layer
    EXPECT_NE(why.find("powers of two"), std::string::npos) << why;
    EXPECT_TRUE(bigraph_alternating(10, 4).layer.empty()); // does not fill whole switches
    EXPECT_TRUE(bigraph_order(bigraph_alternating(64, 16)).empty());
    BiGraphLayout l = bigraph_alternating(8, 2);
    l.slot[1] = 0; // two ranks on one host
    EXPECT_FALSE(bigraph_applies(l, &why));
    EXPECT_NE(why.find("share one host"), std::string::npos) << why;
}

TEST(Gdraa, EveryRankCountAndCount) {
    for (int n : kRanks)
        for (size_t count : counts_for(n))
            for (bool in_place : {false, true}) {
                check({Coll::gdraa, n, count, in_place});
                if (HasFailure()) return;
            }
}

TEST(Gdraa, EveryTypeOpAndSlice) {
    for (int n : {2, 3, 5, 8, 16})
        every_type_and_op([&](ibex_datatype_t type, ibex_redop_t op) {
            for (size_t slice : {ibex_datatype_size(type), size_t(64), size_t(1 << 20)}) {
                Case c{Coll::gdraa, n, 53, false};
                c.type = type;
                c.op = op;
                c.slice_bytes = slice;
                check(c);
                if (HasFailure()) return;
            }
        });
    for (int n : {3, 4, 7}) {
        Case c{Coll::gdraa, n, 41, false};
        c.random_values = true;
        check(c);
        if (HasFailure()) return;
    }
}

// Every send says where it lands, the schedule runs without credits, and each rank's
// reductions find their operands at distinct places of its zone for that peer.
TEST(Gdraa, SendsNameTheirLandingAndZonesDoNotOverlap) {
    for (int n : {2, 3, 6}) {
        std::vector<float> buf(3 * 1000);
        for (int r = 0; r < n; ++r) {
            CollArgs a;
            a.sendbuf = buf.data();
            a.recvbuf = buf.data() + 1000;
            a.count = 999;
            a.type = IBEX_F32;
            a.rank = r;
            a.nranks = n;
            Schedule s;
            ScheduleBuilder b(&s, 4, 64);
            build_gdraa_allreduce(a, b);
            EXPECT_TRUE(s.direct);
            EXPECT_EQ(s.direct_recvbuf, a.recvbuf);
            EXPECT_EQ(s.direct_recv_bytes, 999u * 4);
            std::map<int, std::set<uint64_t>> zone_offsets;
            for (const Step &st : s.steps) {
                if (st.kind == StepKind::send) {
                    EXPECT_NE(st.lands, Step::Lands::credit);
                } else if (st.kind == StepKind::recv_reduce) {
                    EXPECT_EQ(st.lands, Step::Lands::zone);
                    EXPECT_TRUE(zone_offsets[st.peer].insert(st.remote_off).second) << "two operands at one place";
                    EXPECT_LE(st.remote_off + st.bytes, (999u + n - 1) / n * 4);
                }
            }
            EXPECT_EQ(zone_offsets.size(), static_cast<size_t>(n - 1));
        }
    }
    EXPECT_TRUE(gdraa_fits(1000, 4, 4, 1000));
    EXPECT_FALSE(gdraa_fits(1001 * 4, 4, 4, 4000));
    EXPECT_FALSE(gdraa_fits(10, 4, 4, 0));
}

TEST(Trees, ShapeAndComplement) {
    for (int n = 1; n <= 40; ++n) {
        for (int t = 0; t < 2; ++t) {
            int roots = 0;
            for (int r = 0; r < n; ++r) {
                const TreeLinks l = tree_links(t, r, n);
                if (l.parent < 0) ++roots;
                for (int c : l.child) {
                    if (c < 0) continue;
                    ASSERT_EQ(tree_links(t, c, n).parent, r) << "n=" << n << " tree " << t;
                }
                if (l.parent >= 0) {
                    const TreeLinks p = tree_links(t, l.parent, n);
                    ASSERT_TRUE(p.child[0] == r || p.child[1] == r) << "n=" << n << " tree " << t << " rank " << r;
                }
                // Everybody reaches the root within the depth bound.
                int steps = 0;
                for (int x = r; tree_links(t, x, n).parent >= 0; x = tree_links(t, x, n).parent) {
                    ASSERT_LE(++steps, n);
                }
                ASSERT_LE(steps, tree_depth(n));
            }
            ASSERT_EQ(roots, 1) << "n=" << n << " tree " << t;
        }
        ASSERT_LE(tree_depth(n), static_cast<int>(std::ceil(std::log2(n + 1))));
        int leaf_in_both = 0;
        for (int r = 0; r < n; ++r) {
            const bool leaf0 = tree_links(0, r, n).child[0] < 0, leaf1 = tree_links(1, r, n).child[0] < 0;
            if (leaf0 && leaf1) ++leaf_in_both;
        }
        if (n >= 4) {
            EXPECT_LE(leaf_in_both, n % 2 ? 1 : 0) << "n=" << n;
        }
    }
}

TEST(Peers, SymmetricAndSmall) {
    for (int n = 1; n <= 33; ++n)
        for (int r = 0; r < n; ++r)
            for (auto fn : {ring_peers, rhd_peers, tree_peers})
                for (int p : fn(r, n)) {
                    ASSERT_NE(p, r) << "n=" << n;
                    const std::vector<int> back = fn(p, n);
                    ASSERT_NE(std::find(back.begin(), back.end(), r), back.end()) << "n=" << n << " " << r << "->" << p;
                }
}

} // namespace
} // namespace ibex::coll
