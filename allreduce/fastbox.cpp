#include "allreduce/fastbox.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "allreduce/comm.h"
#include "allreduce/cpu/reduce.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

// A peer reads a box's data out of the writer's cache, line by line: past 4 KiB that is
// the slower way whenever the ranks' cores are far apart. On this VM, which switches
// between fast and slow cache-to-cache modes, 2-rank allreduce at 8 and 16 KiB took 1.7
// and 3.3 us through boxes of 16 KiB against 2.5 and 4.2 on the direct path in the fast
// mode, but 5.0 and 10-12 against 2.7 and 4.1 in the slow one (4 ranks: 20-23 and 39-45
// against 15-20 and 17-23). Open MPI's vader hands over to single copy at 4 KiB too.
constexpr size_t kDefaultMax = 4096;
constexpr size_t kLargestMax = 64 << 10;

size_t round_line(size_t b) { return (b + 63) & ~size_t(63); }

// Bytes each rank contributes per slot (0 for a barrier).
size_t slot_payload(const Op &op) {
    return op.kind == OpKind::barrier ? 0 : op.args.count * ibex_datatype_size(op.args.type);
}

} // namespace

std::string Fastbox::said(const Meta &m) {
    const auto kind = static_cast<OpKind>(m.call & 0xff);
    const auto type = static_cast<int>((m.call >> 8) & 0xff);
    const auto op = static_cast<int>(m.call >> 16);
    std::string out = op_kind_name(kind);
    if (kind == OpKind::barrier) return out;
    char buf[160];
    std::snprintf(buf, sizeof buf, " of %llu %s", static_cast<unsigned long long>(m.count),
                  type < IBEX_DATATYPE_COUNT ? ibex_datatype_name(static_cast<ibex_datatype_t>(type)) : "?");
    out += buf;
    if (kind == OpKind::allreduce || kind == OpKind::reduce || kind == OpKind::reduce_scatter)
        out += std::string(" (") + (op < IBEX_REDOP_COUNT ? ibex_redop_name(static_cast<ibex_redop_t>(op)) : "?") + ")";
    if (m.root >= 0) out += " from root " + std::to_string(m.root);
    return out;
}

Fastbox::~Fastbox() { close(); }

void Fastbox::close() {
    peer_box_.clear();
    region_.close();
    box_ = nullptr;
    max_bytes_ = 0;
}

bool Fastbox::wanted(const ibex_comm *c) {
    if (c->nranks < 2 || c->nranks > kMaxRanks || c->opt.forced || !c->topo.shm || c->topo.layout.hosts() != 1)
        return false;
    for (int p = 0; p < c->nranks; ++p)
        if (p != c->rank && !c->topo.local[static_cast<size_t>(p)]) return false;
    return config::get_int("IBEX_FASTBOX_MAX", kDefaultMax, 0, kLargestMax) > 0;
}

uint8_t *Fastbox::inbox(uint64_t seq, int from) const {
    return box_ + (static_cast<size_t>(seq & 1) * static_cast<size_t>(nranks_) + static_cast<size_t>(from)) * slot_bytes_;
}

uint8_t *Fastbox::outbox(uint64_t seq, int to) const {
    return inbox(seq, to) + 2 * static_cast<size_t>(nranks_) * slot_bytes_;
}

ibex_status_t Fastbox::open(ibex_comm *c) {
    exec_ = &c->exec;
    rank_ = c->rank;
    nranks_ = c->nranks;
    const size_t n = static_cast<size_t>(nranks_);
    std::string why;
    size_t want = 0;
    if (wanted(c)) {
        want = static_cast<size_t>(config::get_int("IBEX_FASTBOX_MAX", kDefaultMax, 0, kLargestMax));
        const int link = c->exec.common_link([](int) { return true; });
        if (link < 0) {
            want = 0;
            why = "not every peer has a QP on the shm link";
        }
        if (want) {
            const size_t slot = round_line(kData + want);
            const size_t bytes = 4 * n * slot; // in- and out-boxes, two parities, one slot per rank
            box_ = region_.open_zeroed(c->exec.pd(link), bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE, "box");
            if (!box_) {
                why = ibex_last_error();
                want = 0;
            }
        }
    }
    struct Announce {
        uint64_t addr;
        uint64_t max;
        uint32_t rkey;
        uint32_t reserved;
    };
    Announce mine{reinterpret_cast<uintptr_t>(box_), want, region_.rkey(), 0};
    std::vector<Announce> all(n);
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    size_t agreed = want;
    for (const Announce &a : all) agreed = std::min<size_t>(agreed, a.max);
    if (!agreed) {
        if (want && why.empty()) why = "another rank cannot use them";
        close();
        if (rank_ == 0 && wanted(c))
            IBEX_LOG(info, "communicator: small collectives take the scheduled path (fast boxes off: %s)",
                     why.empty() ? "see the other ranks" : why.c_str());
        return IBEX_OK;
    }
    max_bytes_ = agreed;
    slot_bytes_ = round_line(kData + agreed);
    peer_addr_.resize(n);
    peer_rkey_.resize(n);
    for (size_t r = 0; r < n; ++r) {
        peer_addr_[r] = all[r].addr;
        peer_rkey_[r] = all[r].rkey;
    }
    // Through the mappings where every peer's box has one here (the fd comes over the shm
    // device's socket, so it may still be on its way: ibex_rkey_ptr waits for it).
    // IBEX_FASTBOX_MAP=0 keeps the WRITEs (a comparison, and the path a box that cannot be
    // mapped takes).
    peer_box_.assign(n, nullptr);
    const bool map = config::get_bool("IBEX_FASTBOX_MAP", true);
    if (!map && rank_ == 0) IBEX_LOG(info, "communicator: IBEX_FASTBOX_MAP=0: fast boxes are written with WRITEs");
    for (int p = 0; p < nranks_ && map; ++p) {
        if (p == rank_) continue;
        void *mapped = nullptr;
        if (ibex_rkey_ptr(c->exec.qp_to(p), peer_addr_[static_cast<size_t>(p)], peer_rkey_[static_cast<size_t>(p)],
                          4 * n * slot_bytes_, IBEX_ACCESS_REMOTE_WRITE, &mapped) == IBEX_OK)
            peer_box_[static_cast<size_t>(p)] = static_cast<uint8_t *>(mapped);
        else
            IBEX_LOG(info, "communicator rank %d: rank %d's fast box is not mapped here (%s): WRITEs to it instead",
                     rank_, p, ibex_last_error());
    }
    arrived_.assign(n, 0);
    if (rank_ == 0)
        IBEX_LOG(info, "communicator: collectives of up to %zu bytes per rank go through fast boxes in shared memory",
                 max_bytes_);
    return IBEX_OK;
}

bool Fastbox::takes(const ibex_comm *c, const Op &op) const {
    (void)c;
    if (!max_bytes_) return false;
    switch (op.kind) {
    case OpKind::probe:
    case OpKind::alltoall:
    case OpKind::alltoallv:
    case OpKind::p2p: return false; // every rank's block differs per peer: the executor's
    case OpKind::barrier: return true;
    default: break;
    }
    const CollArgs &a = op.args;
    if (a.count == 0 || slot_payload(op) > max_bytes_) return false;
    // GPU buffers are staged first (allreduce/gpu_staging.h), and their chunks come back
    // here with host buffers. on_gpu looks only at the buffers this rank uses: every rank
    // must answer alike, whatever a rank passes for a buffer it does not use.
    return !op.on_gpu;
}

Fastbox::Meta Fastbox::describe(const Op &op) {
    Meta m{};
    m.count = op.kind == OpKind::barrier ? 0 : op.args.count;
    m.call = static_cast<uint32_t>(op.kind) | static_cast<uint32_t>(op.args.type) << 8 |
             static_cast<uint32_t>(op.args.op) << 16;
    // Only the collectives with a root carry one (the others leave it 0 in the args).
    m.root = op.kind == OpKind::broadcast || op.kind == OpKind::reduce ? op.args.root : -1;
    if (op.kind != OpKind::allreduce && op.kind != OpKind::reduce && op.kind != OpKind::reduce_scatter)
        m.call &= 0xffffu; // no reduction op
    if (op.kind == OpKind::barrier) m.call &= 0xffu;
    return m;
}

ibex_status_t Fastbox::start(ibex_comm *c, const Op &op) {
    (void)c;
    const uint64_t seq = ++seq_;
    const CollArgs &a = op.args;
    const size_t b = slot_payload(op);
    const Meta m = describe(op);
    const auto *send = static_cast<const uint8_t *>(a.sendbuf);
    const bool per_peer = op.kind == OpKind::reduce_scatter; // a different chunk to each peer
    // This rank's own contribution is copied too: the result may overwrite the input (in
    // place), and the WRITEs need registered memory as their source.
    uint8_t *own = outbox(seq, rank_);
    std::memcpy(own + kMeta, &m, sizeof m);
    const bool sends_data =
        b && (op.kind != OpKind::broadcast || rank_ == a.root);
    if (sends_data) std::memcpy(own + kData, per_peer ? send + static_cast<size_t>(rank_) * b : send, b);
    // Each peer gets two WRITEs in one chain: the description and data, then the slot's
    // sequence word. The data's WRITE leaves the word out: one that cannot go in place is
    // copied later, when this rank's own word already reads s, and a copy from the slot's
    // start would land s ahead of the data (a peer then read the first part of the
    // data new and the rest from s-2, under load). Only the word's own WRITE, behind the
    // data's on the same QP, ever writes the peer's word, and shm performs one QP's WRITEs
    // in order. Done in place (the usual case), both are memcpys by this thread in program
    // order with a release fence between them, so a peer that reads the new word with
    // acquire semantics sees the data; queued, the provider copies them in queue order.
    uint8_t *word = own + kSeq;
    std::memcpy(word, &seq, sizeof seq);
    for (int p = 0; p < nranks_; ++p) {
        if (p == rank_) continue;
        const uint8_t *src = own;
        if (per_peer) {
            uint8_t *slot = outbox(seq, p);
            std::memcpy(slot + kMeta, &m, sizeof m);
            std::memcpy(slot + kData, send + static_cast<size_t>(p) * b, b);
            src = slot;
        }
        // A reduce's data matters to the root only; the others get the description alone.
        const size_t bytes = sends_data && (op.kind != OpKind::reduce || p == a.root) ? b : 0;
        const size_t at = static_cast<size_t>(inbox(seq, rank_) - box_);
        if (uint8_t *theirs = peer_box_[static_cast<size_t>(p)]) {
            // The description and data, then the word with release semantics: a peer that
            // reads the word (acquire) sees the rest.
            std::memcpy(theirs + at + kMeta, src + kMeta, kData - kMeta + bytes);
            __atomic_store_n(reinterpret_cast<uint64_t *>(theirs + at + kSeq), seq, __ATOMIC_RELEASE);
            continue;
        }
        const uint64_t remote = peer_addr_[static_cast<size_t>(p)] + at;
        const Executor::WritePiece chain[] = {{src + kMeta, kData - kMeta + bytes, remote + kMeta},
                                              {word, sizeof seq, remote + kSeq}};
        IBEX_TRY(exec_->write_to(p, chain, region_.lkey(), peer_rkey_[static_cast<size_t>(p)]));
    }
    std::fill(arrived_.begin(), arrived_.end(), 0);
    arrived_[static_cast<size_t>(rank_)] = 1;
    missing_ = nranks_ - 1;
    if (!logged_) {
        logged_ = true;
        IBEX_LOG(info, "communicator rank %d: %s of %zu bytes through the fast boxes (up to %zu)", rank_,
                 op_kind_name(op.kind), b, max_bytes_);
    }
    return IBEX_OK;
}

ibex_status_t Fastbox::poll(const Op &op, bool *done, bool *moved) {
    *done = false;
    *moved = false;
    const uint64_t seq = seq_;
    for (int q = 0; q < nranks_ && missing_; ++q) {
        if (arrived_[static_cast<size_t>(q)]) continue;
        const uint8_t *slot = inbox(seq, q);
        const auto *word = reinterpret_cast<const uint64_t *>(slot + kSeq);
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != seq) continue;
        Meta theirs;
        std::memcpy(&theirs, slot + kMeta, sizeof theirs);
        const Meta mine = describe(op);
        if (std::memcmp(&theirs, &mine, sizeof mine) != 0)
            return fail(IBEX_ERR_INVALID_ARGUMENT,
                        "rank %d called %s where this rank called %s: the ranks called different collectives, counts "
                        "or types",
                        q, said(theirs).c_str(), said(mine).c_str());
        arrived_[static_cast<size_t>(q)] = 1;
        --missing_;
        *moved = true;
    }
    if (missing_) return IBEX_OK;
    *done = true;
    return finish(op, outbox(seq, rank_) + kData);
}

ibex_status_t Fastbox::finish(const Op &op, const uint8_t *own) {
    const CollArgs &a = op.args;
    const size_t b = slot_payload(op);
    auto data = [&](int q) -> const uint8_t * { return q == rank_ ? own : inbox(seq_, q) + kData; };
    auto *recv = static_cast<uint8_t *>(a.recvbuf);
    switch (op.kind) {
    case OpKind::reduce:
        if (rank_ != a.root) return IBEX_OK;
        [[fallthrough]];
    case OpKind::allreduce:
    case OpKind::reduce_scatter:
        // Rank order on every rank: the same bits everywhere.
        reduce_into(recv, data(0), data(1), a.count, a.type, a.op);
        for (int q = 2; q < nranks_; ++q) reduce_into(recv, recv, data(q), a.count, a.type, a.op);
        if (a.op == IBEX_AVG) finalize_avg(recv, a.count, a.type, nranks_);
        return IBEX_OK;
    case OpKind::allgather:
        for (int q = 0; q < nranks_; ++q) std::memcpy(recv + static_cast<size_t>(q) * b, data(q), b);
        return IBEX_OK;
    case OpKind::broadcast:
        if (rank_ == a.root) {
            if (recv != a.sendbuf) std::memmove(recv, a.sendbuf, b);
        } else {
            std::memcpy(recv, data(a.root), b);
        }
        return IBEX_OK;
    case OpKind::barrier:
    case OpKind::alltoall:
    case OpKind::alltoallv:
    case OpKind::p2p:
    case OpKind::probe: return IBEX_OK;
    }
    return IBEX_OK;
}

int Fastbox::waiting_on() const {
    for (int q = 0; q < nranks_; ++q)
        if (!arrived_[static_cast<size_t>(q)]) return q;
    return -1;
}

std::string Fastbox::stall_detail() const {
    std::string out = "[fast box, collective " + std::to_string(seq_) + ": silent";
    for (int q = 0; q < nranks_; ++q)
        if (!arrived_[static_cast<size_t>(q)]) out += " " + std::to_string(q);
    return out + "]";
}

} // namespace ibex::coll
