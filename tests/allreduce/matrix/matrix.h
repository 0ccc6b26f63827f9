// The correctness matrix, shared by the tests that run it (tests/allreduce/matrix on
// udp:lo, tests/allreduce/hierarchical across network namespaces): every collective x type
// x op x in-place/out-of-place against a reference every rank computes alone from all
// ranks' inputs (a pure function of rank and index). Integers, min and max must match
// exactly; float sums and products within the error any accumulation order allows. Each
// rank reports a hash of every result all ranks hold in full; expect_same_bits compares
// them across ranks.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <vector>

#include "tests/allreduce/cpu/reduce_reference.h"
#include "tests/allreduce/ranks.h"

namespace ibex::test::matrix {



enum class Coll { allreduce, reduce_scatter, allgather, broadcast, reduce };
inline const char *name(Coll c) {
    static const char *n[] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"};
    return n[static_cast<int>(c)];
}
inline bool reduces(Coll c) { return c == Coll::allreduce || c == Coll::reduce_scatter || c == Coll::reduce; }

// Small counts that do not divide evenly by any rank count here (and one element).
inline constexpr size_t kCounts[] = {1, 61, 1000, 4099};

inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

// Rank r's input element i of combination `combo`: integers are any bits (wraparound is
// exact in any order); floats are ordinary values (sum: [-4, 4); prod: magnitude in
// [0.5, 2), so eight factors stay far from overflow), NaN-free so tolerances mean something.
inline void input(ibex_datatype_t t, ibex_redop_t op, int combo, int r, size_t i, uint8_t *out) {
    const uint64_t h = mix((static_cast<uint64_t>(combo) << 40) ^ (static_cast<uint64_t>(r) << 32) ^ i);
    const size_t sz = ibex_datatype_size(t);
    if (t == IBEX_U8 || t == IBEX_I32 || t == IBEX_I64) {
        std::memcpy(out, &h, sz);
        return;
    }
    const double unit = static_cast<double>(h >> 11) / 9007199254740992.0; // [0, 1)
    double v = op == IBEX_PROD ? (0.5 + 1.5 * unit) * ((h & 1) ? -1 : 1) : 8.0 * unit - 4.0;
    switch (t) {
    case IBEX_F64: std::memcpy(out, &v, 8); break;
    case IBEX_F32: { const float f = static_cast<float>(v); std::memcpy(out, &f, 4); break; }
    case IBEX_F16: { const uint16_t x = ref::f16_encode(static_cast<float>(v)); std::memcpy(out, &x, 2); break; }
    default: { const uint16_t x = ref::bf16_encode(static_cast<float>(v)); std::memcpy(out, &x, 2); break; }
    }
}

// Unit roundoff of each float type (half an ulp of 1).
inline double roundoff(ibex_datatype_t t) {
    switch (t) {
    case IBEX_F16: return std::ldexp(1.0, -11);
    case IBEX_BF16: return std::ldexp(1.0, -8);
    case IBEX_F32: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -53);
    }
}

struct Expected {
    std::vector<uint8_t> exact; // integers, min, max, and copies: the bits required
    std::vector<double> value;  // float sum/prod/avg: the value in double ...
    std::vector<double> bound;  // ... and the error any accumulation order may add
};

// Reduction over all ranks of the inputs at index i, as the reference defines it.
inline void expect_reduced(ibex_datatype_t t, ibex_redop_t op, int combo, int n, size_t i, size_t k, Expected *e) {
    const size_t sz = ibex_datatype_size(t);
    const bool is_float = t == IBEX_F16 || t == IBEX_BF16 || t == IBEX_F32 || t == IBEX_F64;
    uint8_t acc[8], x[8];
    input(t, op, combo, 0, i, acc);
    if (!is_float || op == IBEX_MIN || op == IBEX_MAX) {
        for (int r = 1; r < n; ++r) {
            input(t, op, combo, r, i, x);
            ref::element(t, op, acc, acc, x);
        }
        if (op == IBEX_AVG) ref::divide(t, acc, n);
        std::memcpy(&e->exact[k * sz], acc, sz);
        return;
    }
    // Floats: exact-ish value in double; the bound covers n-1 roundings of partial results
    // (each at most u x the sum of magnitudes so far), plus the final rounding to the type.
    const double u = roundoff(t);
    double v = ref::as_double(t, acc), mag = std::fabs(v);
    for (int r = 1; r < n; ++r) {
        input(t, op, combo, r, i, x);
        const double y = ref::as_double(t, x);
        v = op == IBEX_PROD ? v * y : v + y;
        mag = op == IBEX_PROD ? mag * std::fabs(y) : mag + std::fabs(y);
    }
    double bound = 1.01 * n * u * mag + std::ldexp(1.0, -24) * n; // + an absolute floor for f16 subnormals
    if (op == IBEX_AVG) {
        v /= n;
        bound = bound / n + 2 * u * std::fabs(v);
    }
    e->value[k] = v;
    e->bound[k] = bound;
}

struct Combo {
    int id;
    Coll coll;
    ibex_datatype_t type;
    ibex_redop_t op;
    size_t count;
    int root;
};

inline std::vector<Combo> combos(int n) {
    std::vector<Combo> v;
    int id = 0;
    for (Coll c : {Coll::allreduce, Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce}) {
        for (int t = 0; t < IBEX_DATATYPE_COUNT; ++t) {
            for (int op = 0; op < (reduces(c) ? IBEX_REDOP_COUNT : 1); ++op) {
                v.push_back({id, c, static_cast<ibex_datatype_t>(t), static_cast<ibex_redop_t>(op),
                             kCounts[static_cast<size_t>(id) % std::size(kCounts)], id % n});
                ++id;
            }
        }
    }
    return v;
}

inline uint64_t fnv1a(const uint8_t *p, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// Where run_combo's buffers come from: the heap, or ibex_comm_mem_alloc on the
// communicator (memory its same-host peers map).
enum class Buffers { heap, comm_memory };

// A buffer of either kind, poisoned with `fill`.
class ComboBuffer {
public:
    ComboBuffer(ibex_comm_t *comm, Buffers from, size_t bytes, uint8_t fill) {
        if (from == Buffers::comm_memory && ibex_comm_mem_alloc(comm, bytes ? bytes : 1, &shared_) == IBEX_OK) {
            comm_ = comm;
            p_ = static_cast<uint8_t *>(shared_);
            ok_ = true;
        } else if (from == Buffers::heap) {
            heap_.resize(bytes ? bytes : 1);
            p_ = heap_.data();
            ok_ = true;
        }
        if (ok_) std::memset(p_, fill, bytes);
    }
    ~ComboBuffer() {
        if (comm_) ibex_comm_mem_free(comm_, shared_);
    }
    ComboBuffer(const ComboBuffer &) = delete;
    ComboBuffer &operator=(const ComboBuffer &) = delete;
    bool ok() const { return ok_; }
    uint8_t *data() const { return p_; }
    uint8_t &operator[](size_t i) const { return p_[i]; }

private:
    std::vector<uint8_t> heap_;
    ibex_comm_t *comm_ = nullptr;
    void *shared_ = nullptr;
    uint8_t *p_ = nullptr;
    bool ok_ = false;
};

// Runs one combination in one placement; returns the result bytes this rank holds
// (empty for reduce on a non-root rank), or reports and returns false on failure.
inline bool run_combo(RankCtx &ctx, ibex_comm_t *comm, const Combo &c, bool in_place, std::vector<uint8_t> *result,
                      Buffers from = Buffers::heap) {
    const int n = ctx.nranks, me = ctx.rank;
    const size_t sz = ibex_datatype_size(c.type), cnt = c.count;
    const size_t in_elems = c.coll == Coll::reduce_scatter ? cnt * n : cnt;
    const size_t out_elems = c.coll == Coll::allgather ? cnt * n : cnt;
    const size_t buf_elems = std::max(in_elems, out_elems);
    // Poisoned output so a collective that writes nothing cannot pass.
    ComboBuffer send(comm, from, buf_elems * sz, 0), recv(comm, from, buf_elems * sz, 0xa5);
    if (!send.ok() || !recv.ok()) {
        ctx.say("rank %d: ibex_comm_mem_alloc of %zu bytes: %s", me, buf_elems * sz, ibex_last_error());
        return false;
    }
    for (size_t i = 0; i < in_elems; ++i) input(c.type, c.op, c.id, me, i, &send[i * sz]);
    const void *sp = send.data();
    void *rp = recv.data();
    uint8_t *view = recv.data(); // where this rank's result lies afterwards
    if (in_place) {
        switch (c.coll) {
        case Coll::allgather:
            std::memcpy(&recv[static_cast<size_t>(me) * cnt * sz], send.data(), cnt * sz);
            sp = &recv[static_cast<size_t>(me) * cnt * sz];
            break;
        case Coll::reduce_scatter:
            std::memcpy(recv.data(), send.data(), in_elems * sz);
            sp = recv.data();
            rp = view = &recv[static_cast<size_t>(me) * cnt * sz];
            break;
        default:
            std::memcpy(recv.data(), send.data(), in_elems * sz);
            sp = recv.data();
            break;
        }
    } else if (c.coll == Coll::reduce && me != c.root) {
        rp = nullptr; // allowed off the root
    }
    // In-place runs go through a request, out-of-place ones complete in the call.
    ibex_request_t *req = nullptr;
    ibex_request_t **reqp = in_place ? &req : nullptr;
    ibex_status_t st = IBEX_OK;
    switch (c.coll) {
    case Coll::allreduce: st = ibex_allreduce(sp, rp, cnt, c.type, c.op, comm, reqp); break;
    case Coll::reduce_scatter: st = ibex_reduce_scatter(sp, rp, cnt, c.type, c.op, comm, reqp); break;
    case Coll::allgather: st = ibex_allgather(sp, rp, cnt, c.type, comm, reqp); break;
    case Coll::broadcast: st = ibex_broadcast(sp, rp, cnt, c.type, c.root, comm, reqp); break;
    case Coll::reduce: st = ibex_reduce(sp, rp, cnt, c.type, c.op, c.root, comm, reqp); break;
    }
    if (st == IBEX_OK && req) st = ibex_wait(req);
    const char *place = in_place ? "in-place" : "out-of-place";
    if (st != IBEX_OK) {
        ctx.say("rank %d: %s %s %s %s count %zu: %s: %s", me, name(c.coll), ibex_datatype_name(c.type),
                ibex_redop_name(c.op), place, cnt, ibex_strerror(st), ibex_last_error());
        return false;
    }
    result->clear();
    if (c.coll == Coll::reduce && me != c.root) return true;
    result->assign(view, view + out_elems * sz);

    Expected e;
    e.exact.assign(out_elems * sz, 0);
    e.value.assign(out_elems, NAN);
    e.bound.assign(out_elems, 0);
    for (size_t k = 0; k < out_elems; ++k) {
        switch (c.coll) {
        case Coll::allreduce:
        case Coll::reduce: expect_reduced(c.type, c.op, c.id, n, k, k, &e); break;
        case Coll::reduce_scatter: expect_reduced(c.type, c.op, c.id, n, static_cast<size_t>(me) * cnt + k, k, &e); break;
        case Coll::allgather: input(c.type, c.op, c.id, static_cast<int>(k / cnt), k % cnt, &e.exact[k * sz]); break;
        case Coll::broadcast: input(c.type, c.op, c.id, c.root, k, &e.exact[k * sz]); break;
        }
    }
    size_t wrong = 0, first = 0;
    for (size_t k = 0; k < out_elems; ++k) {
        bool ok;
        if (std::isnan(e.value[k])) {
            ok = std::memcmp(&(*result)[k * sz], &e.exact[k * sz], sz) == 0;
        } else {
            const double got = ref::as_double(c.type, &(*result)[k * sz]);
            ok = std::fabs(got - e.value[k]) <= e.bound[k];
        }
        if (!ok && wrong++ == 0) first = k;
    }
    if (wrong) {
        const double got = ref::as_double(c.type, &(*result)[first * sz]);
        const double want = std::isnan(e.value[first]) ? ref::as_double(c.type, &e.exact[first * sz]) : e.value[first];
        ctx.say("rank %d of %d: %s %s %s %s count %zu root %d: %zu wrong, first at %zu: got %.9g want %.9g (bound %.3g)",
                me, n, name(c.coll), ibex_datatype_name(c.type), ibex_redop_name(c.op), place, cnt, c.root, wrong, first,
                got, want, e.bound[first]);
        return false;
    }
    return true;
}

// Every combination, out of place then in place, on one communicator: the number that
// failed (each reported through ctx).
inline int run_matrix(RankCtx &ctx, ibex_comm_t *comm) {
    int failures = 0;
    for (const Combo &c : combos(ctx.nranks)) {
        std::vector<uint8_t> oop, ip;
        const bool ok_oop = run_combo(ctx, comm, c, false, &oop);
        const bool ok_ip = run_combo(ctx, comm, c, true, &ip);
        if (!ok_oop || !ok_ip) {
            ++failures;
            if (failures > 5) break; // enough to diagnose; the communicator may be broken
            continue;
        }
        if (oop != ip) {
            ctx.say("rank %d: %s %s %s count %zu: in-place and out-of-place results differ in their bits", ctx.rank,
                    name(c.coll), ibex_datatype_name(c.type), ibex_redop_name(c.op), c.count);
            ++failures;
        }
        // Results every rank holds in full must be the same bits everywhere: the parent compares.
        const bool shared = c.coll == Coll::allreduce || c.coll == Coll::allgather || c.coll == Coll::broadcast;
        if (shared) ctx.say("H %d %016llx", c.id, static_cast<unsigned long long>(fnv1a(oop.data(), oop.size())));
    }
    return failures;
}

// What run_path_matrix hands back: failures, the next combination id, and a hash over the
// results every rank holds in full (with how many went into it).
struct PathTally {
    int failures = 0;
    int next_id = 0;
    uint64_t hash = 0, shared = 0;
};

// Every collective x type x op at counts(coll, type), out of place then in place, on a
// path (fast boxes, direct reads) whose counter taken() must grow by two per combination:
// results against the reference, in-place bits equal to out-of-place ones. Stops at the
// first failure (the communicator may be broken), each reported through ctx.
template <class Counts, class Taken>
inline PathTally run_path_matrix(RankCtx &ctx, ibex_comm_t *comm, const char *path, Counts counts, Taken taken,
                                 Buffers from = Buffers::heap) {
    PathTally t;
    uint64_t expect = taken();
    for (Coll coll : {Coll::allreduce, Coll::reduce_scatter, Coll::allgather, Coll::broadcast, Coll::reduce}) {
        for (int ty = 0; ty < IBEX_DATATYPE_COUNT && !t.failures; ++ty) {
            const auto type = static_cast<ibex_datatype_t>(ty);
            for (int op = 0; op < (reduces(coll) ? IBEX_REDOP_COUNT : 1) && !t.failures; ++op) {
                for (size_t count : counts(coll, type)) {
                    const Combo c{t.next_id, coll, type, static_cast<ibex_redop_t>(op), count, t.next_id % ctx.nranks};
                    ++t.next_id;
                    std::vector<uint8_t> oop, ip;
                    if (!run_combo(ctx, comm, c, false, &oop, from) || !run_combo(ctx, comm, c, true, &ip, from)) {
                        ++t.failures;
                        break;
                    }
                    expect += 2;
                    if (taken() != expect) {
                        ctx.say("rank %d: %s %s %s count %zu did not take the %s (%llu taken, expected %llu)", ctx.rank,
                                name(coll), ibex_datatype_name(type), ibex_redop_name(c.op), count, path,
                                static_cast<unsigned long long>(taken()), static_cast<unsigned long long>(expect));
                        ++t.failures;
                        break;
                    }
                    if (oop != ip) {
                        ctx.say("rank %d: %s %s %s count %zu: in-place and out-of-place bits differ", ctx.rank,
                                name(coll), ibex_datatype_name(type), ibex_redop_name(c.op), count);
                        ++t.failures;
                    }
                    if (coll == Coll::allreduce || coll == Coll::allgather || coll == Coll::broadcast) {
                        t.hash = mix(t.hash ^ fnv1a(oop.data(), oop.size()));
                        ++t.shared;
                    }
                }
            }
        }
    }
    return t;
}

// Ranks holding the same result hold the same bits (from the hashes each rank reported).
inline void expect_same_bits(const std::vector<RankOutcome> &out, int n) {
    std::vector<std::map<int, std::string>> hashes(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        std::istringstream in(out[static_cast<size_t>(r)].text);
        std::string tag, hash;
        int id = 0;
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            if (ls >> tag >> id >> hash && tag == "H") hashes[static_cast<size_t>(r)][id] = hash;
        }
    }
    size_t expected = 0;
    for (const Combo &c : combos(n))
        expected += c.coll == Coll::allreduce || c.coll == Coll::allgather || c.coll == Coll::broadcast;
    EXPECT_EQ(hashes[0].size(), expected) << "rank 0 did not report every shared result";
    for (int r = 1; r < n; ++r) {
        for (const auto &[id, h] : hashes[0]) {
            const auto it = hashes[static_cast<size_t>(r)].find(id);
            ASSERT_NE(it, hashes[static_cast<size_t>(r)].end()) << "rank " << r << " has no result for combination " << id;
            const Combo c = combos(n)[static_cast<size_t>(id)];
            EXPECT_EQ(it->second, h) << "rank " << r << " and rank 0 hold different bits: " << name(c.coll) << " "
                                     << ibex_datatype_name(c.type) << " " << ibex_redop_name(c.op) << " count " << c.count;
        }
    }
}

} // namespace ibex::test::matrix
