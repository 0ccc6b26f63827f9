#include "allreduce/gpu_direct.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "allreduce/comm.h"
#include "allreduce/cuda/dispatch.h"
#include "allreduce/cuda/reduce.h"
#include "runtime/base/config.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

constexpr size_t kDefaultMin = 256 << 10;

const GpuDirect::Ipc *g_test_ipc = nullptr;


struct Hello {
    uint32_t want;     // this rank's IBEX_GPU_DIRECT_MIN (0: off, or no GPU)
    uint32_t box_room; // the fast boxes carry an announcement
    uint32_t leader;   // IBEX_GPU_DIRECT_LEADER: rank 0 may run an op on one GPU whole
};

} // namespace

void GpuDirect::set_ipc_for_tests(const Ipc *ipc) { g_test_ipc = ipc; }

ibex_status_t GpuDirect::open(ibex_comm *c) {
    close();
    rank_ = c->rank;
    nranks_ = c->nranks;
    test_ipc_ = g_test_ipc != nullptr;
    ipc_ = test_ipc_ ? *g_test_ipc : Ipc{cuda::ipc_export, {cuda::ipc_open, cuda::ipc_close}};
    maps_.emplace(ipc_.opener);
    Hello mine{};
    // One kernel folds every rank's input and stores into every rank's output: at most
    // kMaxFold ranks (a host's GPUs); more stage.
    const bool gpus = test_ipc_ || cuda::available();
    if (nranks_ <= kMaxFold && c->fast.max_bytes() && gpus && config::get_int("IBEX_GPU_DIRECT", 1, 0, 1))
        mine.want = static_cast<uint32_t>(config::get_int("IBEX_GPU_DIRECT_MIN", kDefaultMin, 1, int64_t(1) << 31));
    mine.box_room = c->fast.max_bytes() >= sizeof(Announce) ? 1 : 0;
    mine.leader = static_cast<uint32_t>(config::get_int("IBEX_GPU_DIRECT_LEADER", 1, 0, 1));
    profile_.start("IBEX_GPU_DIRECT_PROFILE", {"export", "settle", "announce", "map", "opened", "launch", "gpu", "barrier"});
    std::vector<Hello> all(static_cast<size_t>(nranks_));
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    size_t min = 0;
    bool leader = true;
    for (const Hello &h : all) {
        if (!h.want || !h.box_room) return IBEX_OK; // off on every rank: each saw the same
        min = std::max<size_t>(min, h.want);
        leader = leader && h.leader;
    }
    min_bytes_ = min;
    leader_ok_ = leader;
    all_.assign(static_cast<size_t>(nranks_), Announce{});
    all_opened_.assign(static_cast<size_t>(nranks_), 0);
    peer_bases_.assign(static_cast<size_t>(nranks_), {});
    send_at_.assign(static_cast<size_t>(nranks_), nullptr);
    recv_at_.assign(static_cast<size_t>(nranks_), nullptr);
    if (rank_ == 0)
        IBEX_LOG(info, "communicator: collectives on GPU buffers of %zu bytes and more map the peers' buffers (CUDA IPC)",
                 min_bytes_);
    return IBEX_OK;
}

void GpuDirect::close() {
    report_profile();
    abandon();
    if (maps_) maps_->clear();
    peer_bases_.clear();
    exports_.clear();
    min_bytes_ = 0;
}

bool GpuDirect::takes(const Op &op) const {
    if (!min_bytes_ || !op.on_gpu || op.gpu_direct_refused || op.algo || op.args.count == 0) return false;
    switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::reduce_scatter:
    case OpKind::allgather:
    case OpKind::broadcast:
    case OpKind::reduce: break;
    default: return false;
    }
    const OpBytes b = op_bytes(op, rank_, nranks_);
    return std::max(b.send, b.recv) >= min_bytes_;
}

bool GpuDirect::export_side(const void *p, uint64_t len, Side *out) {
    *out = Side{};
    if (!p || !len) return true; // unused
    if (!cuda::is_device_pointer(p)) {
        note_fallback("a rank passed host memory beside GPU memory");
        return false;
    }
    cuda::IpcExport x{};
    if (ipc_.export_memory(p, &x) != IBEX_OK) {
        note_fallback(ibex_last_error());
        return false;
    }
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (a < x.base || len > x.size || a - x.base > x.size - len) {
        note_fallback("a buffer runs past the end of its GPU allocation");
        return false;
    }
    auto it = exports_.find(x.base);
    if (it == exports_.end() && exports_.size() >= kMaxExports) {
        exports_.clear(); // forgotten ids are simply new ones next time (peers map again)
        it = exports_.end();
    }
    if (it == exports_.end() || std::memcmp(it->second.handle, x.handle, sizeof x.handle) != 0) {
        Exported e{};
        std::memcpy(e.handle, x.handle, sizeof x.handle);
        e.id = ++next_id_;
        it = exports_.insert_or_assign(x.base, e).first;
    }
    out->x = x;
    out->id = it->second.id;
    out->off = a - x.base;
    out->addr = a;
    device_ = x.device >= 0 ? x.device : 0;
    return true;
}

void GpuDirect::note_fallback(const char *why) {
    fallback_reason_ = why;
    static std::atomic<int> logged{0};
    if (logged.fetch_add(1) < 4) IBEX_LOG(info, "GPU collective staged through host memory: %s", why);
}

void GpuDirect::report_profile() {
    char extra[64];
    std::snprintf(extra, sizeof extra, " (%llu run whole by rank 0)", static_cast<unsigned long long>(taken_whole_));
    profile_.report("GPU-direct", rank_, extra);
}

// Every side some rank uses lies on one GPU, known by its key.
bool GpuDirect::one_gpu() const {
    uint32_t key = 0;
    for (const Announce &t : all_)
        for (const Side *s : {&t.send, &t.recv}) {
            if (!s->id) continue;
            if (!s->x.gpu_key || (key && s->x.gpu_key != key)) return false;
            key = s->x.gpu_key;
        }
    return key != 0;
}

ibex_status_t GpuDirect::begin(const Op &op) {
    lap(-1);
    mine_ = Announce{};
    mine_.count = op.args.count;
    mine_.pid = static_cast<int32_t>(getpid());
    mine_.call = call_word(op);
    mine_.root = op.kind == OpKind::broadcast || op.kind == OpKind::reduce ? op.args.root : -1;
    const OpBytes b = op_bytes(op, rank_, nranks_);
    const bool in_place = op.args.sendbuf == op.args.recvbuf;
    const bool ok_recv = export_side(op.args.recvbuf, b.recv, &mine_.recv);
    bool ok_send = true;
    if (in_place && b.send <= b.recv)
        mine_.send = mine_.recv; // the same allocation: one id, so one mapping
    else
        ok_send = export_side(b.send ? op.args.sendbuf : nullptr, b.send, &mine_.send);
    mine_.ok = ok_send && ok_recv ? 1 : 0;
    lap(0);
    // The peers read and write these buffers from their own streams as soon as the
    // announcement lands: what this process queued on them must be done by then.
    if (mine_.ok && !test_ipc_) IBEX_TRY(settle_legacy_stream(device_));
    lap(1);
    sub_ = Op{};
    sub_.kind = OpKind::allgather;
    sub_.args.sendbuf = &mine_;
    sub_.args.recvbuf = all_.data();
    sub_.args.count = sizeof(Announce);
    sub_.args.type = IBEX_U8;
    phase_ = Phase::announce;
    return IBEX_OK;
}

ibex_status_t GpuDirect::map_side(int q, const Side &s, uint64_t len, uint8_t **out) {
    *out = nullptr;
    if (!s.id) return IBEX_OK;
    const Announce &a = all_[static_cast<size_t>(q)];
    if (q == rank_ || a.pid == static_cast<int32_t>(getpid())) {
        *out = reinterpret_cast<uint8_t *>(s.addr); // this process's own memory
        return IBEX_OK;
    }
    uint64_t &known = peer_bases_[static_cast<size_t>(q)][s.x.base];
    if (known && known != s.id) maps_->forget(static_cast<uint64_t>(q), known);
    known = s.id;
    if (peer_bases_[static_cast<size_t>(q)].size() > 4 * kMaxMappingsPerPeer) peer_bases_[static_cast<size_t>(q)].clear();
    IBEX_TRY(maps_->get(static_cast<uint64_t>(q), s.id, s.x, s.off, len, out));
    maps_->trim(static_cast<uint64_t>(q), kMaxMappingsPerPeer, {a.send.id, a.recv.id});
    return IBEX_OK;
}

ibex_status_t GpuDirect::advance(const Op &op, bool *done, bool *fallback) {
    *done = *fallback = false;
    switch (phase_) {
    case Phase::announce: {
        lap(2);
        IBEX_TRY(check_same_call(all_, mine_));
        bool ok = true;
        for (const Announce &t : all_) ok = ok && t.ok;
        if (!ok) { // every rank saw the same announcements
            if (mine_.ok) note_fallback("another rank could not export its GPU buffers");
            fall_back(fallback);
            return IBEX_OK;
        }
        const OpBytes b = op_bytes(op, rank_, nranks_);
        const size_t whole = std::max(b.send, b.recv);
        whole_ = leader_ok_ && one_gpu(); // the same answer on every rank
        opened_ = 1;
        for (int q = 0; q < nranks_ && opened_; ++q) {
            const Announce &t = all_[static_cast<size_t>(q)];
            // Only what this rank's share reads (send) and writes (receive): an allgather
            // writes the peers' receive buffers, a reduce-scatter reads their send buffers,
            // a broadcast reads the root's; this rank's own buffers are always at hand. A peer's
            // sides have the sizes of this rank's, but for the root's send buffer of a
            // broadcast (the whole buffer).
            // Run whole, rank 0 reads and writes every buffer the op has, and the others none.
            const bool self = q == rank_;
            const bool root_only_reads = op.kind == OpKind::broadcast, root_only_writes = op.kind == OpKind::reduce;
            const bool reads = whole_ ? rank_ == 0 && (!root_only_reads || q == op.args.root)
                                      : self || (op.kind != OpKind::allgather && (!root_only_reads || q == op.args.root));
            const bool writes = whole_ ? rank_ == 0 && (!root_only_writes || q == op.args.root)
                                       : self || (op.kind != OpKind::reduce_scatter && (!root_only_writes || q == op.args.root));
            const uint64_t send_len = op.kind == OpKind::broadcast ? whole : b.send;
            send_at_[static_cast<size_t>(q)] = recv_at_[static_cast<size_t>(q)] = nullptr;
            if ((reads && map_side(q, t.send, send_len, &send_at_[static_cast<size_t>(q)]) != IBEX_OK) ||
                (writes && map_side(q, t.recv, b.recv, &recv_at_[static_cast<size_t>(q)]) != IBEX_OK)) {
                char why[320];
                std::snprintf(why, sizeof why, "rank %d cannot map rank %d's GPU buffer: %s", rank_, q, ibex_last_error());
                note_fallback(why);
                opened_ = 0;
            }
        }
        lap(3);
        if (whole_) {
            // Only rank 0 maps and writes: it runs the op at once where it could map every
            // buffer, and the last round (every rank's opened_, rank 0's the one that can be
            // 0) ends the op or, where it could not, stages it on every rank, nothing
            // having been written. One round fewer than the shares.
            set_opened_round();
            phase_ = Phase::barrier;
            return rank_ == 0 && opened_ ? launch(op) : IBEX_OK;
        }
        set_opened_round();
        phase_ = Phase::opened;
        return IBEX_OK;
    }
    case Phase::opened:
        lap(4);
        if (!all_opened()) {
            fall_back(fallback);
            return IBEX_OK;
        }
        if (ibex_status_t st = launch(op); st != IBEX_OK) return st;
        sub_ = Op{};
        sub_.kind = OpKind::barrier;
        return IBEX_OK;
    case Phase::barrier:
        lap(7);
        if (whole_ && !all_opened()) {
            fall_back(fallback);
            return IBEX_OK;
        }
        phase_ = Phase::idle;
        ++taken_;
        if (whole_) ++taken_whole_;
        profile_.op_done();
        *done = true;
        return IBEX_OK;
    case Phase::running:
    case Phase::idle: break;
    }
    return fail(IBEX_ERR_INTERNAL, "GPU direct collective advanced out of turn");
}

// The round that tells every rank whether every rank mapped what it needs.
void GpuDirect::set_opened_round() {
    sub_ = Op{};
    sub_.kind = OpKind::allgather;
    sub_.args.sendbuf = &opened_;
    sub_.args.recvbuf = all_opened_.data();
    sub_.args.count = sizeof opened_;
    sub_.args.type = IBEX_U8;
}

// After the opened round: whether every rank mapped its part; if not, and this rank did,
// the reason is another's (rank 0's, run whole).
bool GpuDirect::all_opened() {
    for (uint32_t o : all_opened_) {
        if (o) continue;
        if (opened_) note_fallback(whole_ ? "rank 0 could not map its peers' GPU buffers" : "another rank could not map its peers' GPU buffers");
        return false;
    }
    return true;
}

// The op is staged instead, on every rank alike (counted); this rank is idle again.
void GpuDirect::fall_back(bool *fallback) {
    phase_ = Phase::idle;
    ++fallbacks_;
    *fallback = true;
}

// Queues this rank's part (run whole, rank 0 does every rank's share and the others none)
// and the fence that ready() polls; the next round waits for it (Phase::running). Its
// round is sub_ as the caller leaves it.
ibex_status_t GpuDirect::launch(const Op &op) {
    if (ibex_status_t st = !whole_ || rank_ == 0 ? run_local(op, whole_) : IBEX_OK; st != IBEX_OK) {
        abandon();
        return st;
    }
    if (ibex_status_t st = cuda::fence_copies(&fence_); st != IBEX_OK) {
        abandon();
        return st;
    }
    lap(5);
    phase_ = Phase::running;
    return IBEX_OK;
}

bool GpuDirect::ready() {
    if (phase_ != Phase::running) return true;
    if (!cuda::copies_done(fence_)) return false;
    lap(6);
    phase_ = Phase::barrier;
    return true;
}

void GpuDirect::abandon() {
    if (!fence_.empty()) cuda::drop_fence(fence_);
    if (phase_ == Phase::running || phase_ == Phase::opened) cuda::wait_copies();
    phase_ = Phase::idle;
}

// src into every rank's receive buffer at byte offset `at` (but where it already is).
ibex_status_t GpuDirect::copy_to_all(const uint8_t *src, size_t at, size_t bytes) {
    for (size_t q = 0; q < recv_at_.size() && bytes; ++q) {
        uint8_t *dst = recv_at_[q] + at;
        if (dst != src) IBEX_TRY(cuda::copy_async(dst, src, bytes, device_));
    }
    return IBEX_OK;
}

// This rank's share of the op, or (whole) every rank's: the segment [0, count) and every
// block, so that one kernel covers what the shares would split.
ibex_status_t GpuDirect::run_local(const Op &op, bool whole) {
    const CollArgs &a = op.args;
    const size_t elem = ibex_datatype_size(a.type), n = static_cast<size_t>(nranks_), r = static_cast<size_t>(rank_);
    const size_t count = a.count;
    // Segment r of a buffer of count elements; segments start 256-byte aligned (where the
    // buffers are), so the kernels move 16-byte packets.
    const size_t align = std::max<size_t>(1, 256 / elem);
    const size_t per = ((count + n - 1) / n + align - 1) / align * align;
    const size_t first = whole ? 0 : std::min(count, r * per), seg = whole ? count : std::min(per, count - first);
    const size_t block_from = whole ? 0 : r, block_to = whole ? n : r + 1; // reduce-scatter's and allgather's
    void *outs[kMaxFold];
    const void *ins[kMaxFold];
    // Every rank's receive buffer at byte offset `at` (the copies' and the fold's outputs).
    auto all_outputs = [&](size_t at) {
        for (size_t q = 0; q < n; ++q) outs[q] = recv_at_[q] + at;
    };
    // The rank-order fold of every rank's input at byte offset `at`, into nout outputs.
    auto fold = [&](size_t at, size_t cnt, int nout) {
        for (size_t q = 0; q < n; ++q) ins[q] = send_at_[q] + at;
        return fold_queued(outs, nout, ins, nranks_, cnt, a.type, a.op, nranks_, device_);
    };
    switch (op.kind) {
    case OpKind::allreduce:
        if (!seg) return IBEX_OK;
        all_outputs(first * elem);
        return fold(first * elem, seg, nranks_);
    case OpKind::reduce:
        if (!seg) return IBEX_OK;
        outs[0] = recv_at_[static_cast<size_t>(a.root)] + first * elem;
        return fold(first * elem, seg, 1);
    case OpKind::reduce_scatter:
        for (size_t b = block_from; b < block_to; ++b) {
            outs[0] = recv_at_[b];
            IBEX_TRY(fold(b * count * elem, count, 1));
        }
        return IBEX_OK;
    case OpKind::allgather:
        for (size_t b = block_from; b < block_to; ++b) IBEX_TRY(copy_to_all(send_at_[b], b * count * elem, count * elem));
        return IBEX_OK;
    case OpKind::broadcast:
        if (!seg) return IBEX_OK;
        return copy_to_all(send_at_[static_cast<size_t>(a.root)] + first * elem, first * elem, seg * elem);
    default: break;
    }
    return fail(IBEX_ERR_INTERNAL, "GPU direct collective of an unexpected kind");
}

} // namespace ibex::coll
