#include "allreduce/gpu_staging.h"

#include <algorithm>
#include <cstdio>

#include "allreduce/comm.h"
#include "runtime/base/status.h"

namespace ibex::coll {

bool GpuStaging::needs(const Op &op, int rank, int nranks) {
    if (op.kind == OpKind::p2p)
        return std::any_of(op.pieces.begin(), op.pieces.end(),
                           [](const P2pPiece &p) { return cuda::is_device_pointer(p.buf); });
    const OpBytes e = op_bytes(op, rank, nranks);
    return (e.send && cuda::is_device_pointer(op.args.sendbuf)) || (e.recv && cuda::is_device_pointer(op.args.recvbuf));
}

ibex_status_t GpuStaging::grow(ibex_comm *c, Pinned &b, size_t bytes) {
    if (bytes <= b.bytes) return IBEX_OK;
    if (b.p) {
        c->caches.remove(b.p);
        cuda::free_pinned_mapped(b.p);
        b = {};
    }
    const size_t want = std::max<size_t>((bytes + 4095) & ~size_t(4095), 1 << 20);
    // Pinned by registration, so that the direct path (allreduce/shm_direct.h) can read
    // and write it across processes.
    b.p = cuda::alloc_pinned_mapped(want);
    if (!b.p) return fail(IBEX_ERR_NO_MEMORY, "GPU collective: %zu bytes of pinned staging memory: %s", want, ibex_last_error());
    b.bytes = want;
    return c->caches.add(b.p, want);
}

void GpuStaging::point_at(Op &op, const Slot &s, const Chunk &k) const {
    // A side this rank does not use (a broadcast's send buffer off the root, a reduce's
    // receive buffer) must not carry the caller's pointer, which may be GPU memory: the
    // fast boxes would then turn the chunk down on this rank alone and the ranks would
    // disagree on the path. The unused send side reads as in place, the receive side as
    // none.
    if (s.stage_recv)
        op.args.recvbuf = static_cast<uint8_t *>(s.recv.p) + k.recv_off;
    else if (s.has_recv)
        op.args.recvbuf = static_cast<uint8_t *>(s.orig.recvbuf) + k.recv_off;
    else
        op.args.recvbuf = nullptr;
    if (s.stage_send)
        op.args.sendbuf = static_cast<const uint8_t *>(s.send.p) + k.send_off;
    else if (s.has_send)
        op.args.sendbuf = static_cast<const uint8_t *>(s.orig.sendbuf) + k.send_off;
    else
        op.args.sendbuf = op.args.recvbuf;
    op.args.count = k.count;
}

bool GpuStaging::results_done(Slot &s) {
    for (Chunk &k : s.chunks)
        if (!cuda::copies_done(k.out)) return false;
    return true;
}

void GpuStaging::drop_copies(Slot &s) {
    for (Chunk &k : s.chunks) {
        cuda::drop_fence(k.in);
        cuda::drop_fence(k.out);
    }
    s.chunks.clear();
    s.pieces.clear();
    s.state = SlotState::free;
    s.req = nullptr;
}

ibex_status_t GpuStaging::begin_batch(ibex_comm *c, Slot &s, Op &op) {
    s.pieces.clear();
    size_t send_bytes = 0, recv_bytes = 0;
    // One memory-type query per message (a driver call on a GPU host).
    for (size_t i = 0; i < op.pieces.size(); ++i) {
        const P2pPiece &p = op.pieces[i];
        if (!cuda::is_device_pointer(p.buf)) continue;
        size_t &end = p.send ? send_bytes : recv_bytes;
        s.pieces.push_back({p.send, static_cast<uint8_t *>(p.buf), end, p.bytes, i});
        end += (p.bytes + 63) & ~size_t(63);
    }
    if (send_bytes) IBEX_TRY(grow(c, s.send, send_bytes));
    if (recv_bytes) IBEX_TRY(grow(c, s.recv, recv_bytes));
    s.chunks.assign(1, Chunk{});
    for (const StagedPiece &m : s.pieces) {
        auto *pinned = static_cast<uint8_t *>(m.send ? s.send.p : s.recv.p) + m.at;
        op.pieces[m.index].buf = pinned;
        if (!m.send) continue;
        if (ibex_status_t st = cuda::copy_async(pinned, m.gpu, m.bytes, cuda::pointer_device(m.gpu)); st != IBEX_OK) {
            drop_copies(s);
            return st;
        }
    }
    if (send_bytes)
        if (ibex_status_t st = cuda::fence_copies(&s.chunks[0].in); st != IBEX_OK) {
            drop_copies(s);
            return st;
        }
    return IBEX_OK;
}

ibex_status_t GpuStaging::stage(ibex_comm *c, Slot &s, const Op &op) {
    const OpBytes e = op_bytes(op, c->rank, c->nranks);
    s.orig = op.args;
    s.has_send = e.send && op.args.sendbuf;
    s.has_recv = e.recv && op.args.recvbuf;
    s.stage_send = s.has_send && cuda::is_device_pointer(op.args.sendbuf);
    s.stage_recv = s.has_recv && cuda::is_device_pointer(op.args.recvbuf);
    if (s.stage_send) IBEX_TRY(grow(c, s.send, e.send));
    if (s.stage_recv) IBEX_TRY(grow(c, s.recv, e.recv));
    s.recv_device = s.stage_recv ? cuda::pointer_device(s.orig.recvbuf) : -1;
    s.chunks.clear();
    s.pieces.clear();
    const size_t elem = ibex_datatype_size(op.args.type);
    if (e.elementwise && op.args.count) {
        // At least IBEX_GPU_CHUNK bytes, and at most kMaxChunks chunks: each chunk is a
        // collective of its own, whose start and pipeline fill cost more than the copy
        // time a finer cut would hide.
        constexpr size_t kMaxChunks = 16;
        const size_t per = std::max({size_t(1), c->opt.gpu_chunk_bytes / elem, (op.args.count + kMaxChunks - 1) / kMaxChunks});
        for (size_t first = 0; first < op.args.count; first += per) {
            const size_t cnt = std::min(per, op.args.count - first);
            Chunk k;
            k.send_off = k.recv_off = first * elem;
            k.send_len = e.send ? cnt * elem : 0;
            k.recv_len = e.recv ? cnt * elem : 0;
            k.count = cnt;
            s.chunks.push_back(k);
        }
    } else {
        Chunk k;
        k.send_len = e.send;
        k.recv_len = e.recv;
        k.count = op.args.count;
        s.chunks.push_back(k);
    }
    if (s.stage_send) {
        const int dev = cuda::pointer_device(s.orig.sendbuf);
        for (Chunk &k : s.chunks) {
            if (!k.send_len) continue;
            ibex_status_t st = cuda::copy_async(static_cast<uint8_t *>(s.send.p) + k.send_off,
                                                static_cast<const uint8_t *>(s.orig.sendbuf) + k.send_off, k.send_len, dev);
            if (st == IBEX_OK) st = cuda::fence_copies(&k.in);
            if (st != IBEX_OK) {
                drop_copies(s);
                return st;
            }
        }
    }
    return IBEX_OK;
}

namespace {

size_t staged_bytes(const Op &op, int rank, int nranks) {
    if (op.kind == OpKind::p2p) return op.args.count; // the batch's bytes
    const OpBytes e = op_bytes(op, rank, nranks);
    return std::max(e.send, e.recv);
}

bool same_call(const CollArgs &a, const CollArgs &b) {
    return a.sendbuf == b.sendbuf && a.recvbuf == b.recvbuf && a.count == b.count && a.type == b.type;
}

} // namespace

int GpuStaging::slot_for(size_t bytes) const {
    // A slot holding another op's prefetch is usable: that op was failed with the queue.
    auto usable = [&](int i) { return slots_[i].state == SlotState::free || slots_[i].state == SlotState::prefetched; };
    if (bytes > kPrefetchMaxBytes) return usable(0) ? 0 : -1;
    if (usable(1 - last_)) return 1 - last_;
    return usable(last_) ? last_ : -1;
}

int GpuStaging::prefetched_for(const Op &op) const {
    for (int i = 0; i < 2; ++i)
        if (slots_[i].state == SlotState::prefetched && slots_[i].req == op.req && same_call(slots_[i].orig, op.args))
            return i;
    return -1;
}

GpuStaging::Slot *GpuStaging::oldest_retired() {
    Slot *oldest = nullptr;
    for (Slot &s : slots_)
        if (s.state == SlotState::retired && (!oldest || s.retired_seq < oldest->retired_seq)) oldest = &s;
    return oldest;
}

bool GpuStaging::can_begin(const ibex_comm *c, const Op &op) const {
    return prefetched_for(op) >= 0 || slot_for(staged_bytes(op, c->rank, c->nranks)) >= 0;
}

ibex_status_t GpuStaging::begin(ibex_comm *c, Op &op) {
    if (!profile_started_) {
        profile_.start("IBEX_GPU_STAGING_PROFILE", {"queue", "input", "collectives", "output"});
        profile_started_ = true;
    }
    profile_.lap(-1);
    input_lapped_ = false;
    looked_ahead_ = false;
    int at = prefetched_for(op);
    const bool adopted = at >= 0;
    if (!adopted) at = slot_for(staged_bytes(op, c->rank, c->nranks));
    if (at < 0) return fail(IBEX_ERR_INVALID_STATE, "GPU collective: no staging slot free (a retired op still copying)");
    Slot &s = slots_[at];
    if (!adopted && s.state == SlotState::prefetched) drop_copies(s);
    last_ = at;
    if (adopted) {
        ++prefetched_ops_;
    } else if (op.kind == OpKind::p2p) {
        IBEX_TRY(begin_batch(c, s, op));
    } else {
        IBEX_TRY(stage(c, s, op));
    }
    s.state = SlotState::running;
    s.req = nullptr;
    s.next = 0;
    running_ = at;
    if (op.kind != OpKind::p2p) point_at(op, s, s.chunks[0]);
    op.on_gpu = false; // the chunks (every message of a batch) are host memory
    profile_.lap(0);
    return IBEX_OK;
}

bool GpuStaging::may_prefetch() const {
    return running_ >= 0 && !looked_ahead_ && slots_[running_].pieces.empty() &&
           slots_[1 - running_].state == SlotState::free;
}

void GpuStaging::prefetch(ibex_comm *c, const Op &next) {
    looked_ahead_ = true;
    switch (next.kind) {
    case OpKind::allreduce:
    case OpKind::reduce_scatter:
    case OpKind::allgather:
    case OpKind::broadcast:
    case OpKind::reduce: break;
    default: return;
    }
    if (!next.on_gpu || !next.req || running_ < 0) return;
    const OpBytes e = op_bytes(next, c->rank, c->nranks);
    if (std::max(e.send, e.recv) > kPrefetchMaxBytes) return;
    const Slot &run = slots_[running_];
    if (run.stage_recv && e.send && next.args.sendbuf) {
        // Copied now, the input would be read before the running op's results are written
        // over it.
        const auto *in = static_cast<const uint8_t *>(next.args.sendbuf);
        const auto *out = static_cast<const uint8_t *>(run.orig.recvbuf);
        const size_t out_len = run.chunks.empty() ? 0 : run.chunks.back().recv_off + run.chunks.back().recv_len;
        if (in < out + out_len && out < in + e.send) return;
    }
    Slot &s = slots_[1 - running_];
    if (stage(c, s, next) != IBEX_OK) return; // begin() stages it again and reports why
    if (s.chunks.empty()) return;
    s.state = SlotState::prefetched;
    s.req = next.req;
}

bool GpuStaging::ready() {
    Slot &s = slots_[running_];
    if (s.next < s.chunks.size() && !cuda::copies_done(s.chunks[s.next].in)) return false;
    if (!input_lapped_) {
        profile_.lap(1);
        input_lapped_ = true;
    }
    return true;
}

ibex_status_t GpuStaging::chunk_done(Op &op, bool *more) {
    Slot &s = slots_[running_];
    Chunk &k = s.chunks[s.next];
    profile_.lap(2);
    input_lapped_ = false;
    if (profile_.on()) ++profiled_chunks_;
    if (!s.pieces.empty()) {
        *more = false;
        ++s.next;
        for (const StagedPiece &m : s.pieces)
            if (!m.send) IBEX_TRY(cuda::copy_async(m.gpu, static_cast<uint8_t *>(s.recv.p) + m.at, m.bytes,
                                                   cuda::pointer_device(m.gpu)));
        return cuda::fence_copies(&k.out);
    }
    if (s.stage_recv && k.recv_len) {
        ibex_status_t st = cuda::copy_async(static_cast<uint8_t *>(s.orig.recvbuf) + k.recv_off,
                                            static_cast<uint8_t *>(s.recv.p) + k.recv_off, k.recv_len, s.recv_device);
        if (st == IBEX_OK) st = cuda::fence_copies(&k.out);
        if (st != IBEX_OK) return st;
    }
    *more = ++s.next < s.chunks.size();
    if (*more) point_at(op, s, s.chunks[s.next]);
    return IBEX_OK;
}

bool GpuStaging::retirable(const Op &op) const {
    if (running_ < 0 || !op.req) return false;
    const Slot &s = slots_[running_];
    return s.pieces.empty() && s.next == s.chunks.size();
}

void GpuStaging::retire(ibex_request *req) {
    Slot &s = slots_[running_];
    profile_.lap(3);
    profile_.op_done();
    s.state = SlotState::retired;
    s.req = req;
    s.retired_seq = ++retired_seq_;
    ++retired_;
    running_ = -1;
}

ibex_request *GpuStaging::next_completed() {
    Slot *oldest = oldest_retired();
    if (!oldest || !results_done(*oldest)) return nullptr;
    ibex_request *r = oldest->req;
    drop_copies(*oldest); // every fence is done: nothing waits
    --retired_;
    return r;
}

bool GpuStaging::drained() {
    Slot &s = slots_[running_];
    if (!results_done(s)) return false;
    profile_.lap(3);
    profile_.op_done();
    drop_copies(s);
    running_ = -1;
    return true;
}

void GpuStaging::abandon() {
    if (running_ >= 0) drop_copies(slots_[running_]);
    running_ = -1;
}

void GpuStaging::settle(std::vector<ibex_request *> *completed) {
    for (Slot &s : slots_)
        if (s.state == SlotState::prefetched) drop_copies(s);
    while (Slot *oldest = oldest_retired()) {
        completed->push_back(oldest->req);
        drop_copies(*oldest); // waits for the results to reach the GPU
        --retired_;
    }
    retired_ = 0;
}

void GpuStaging::release(ibex_comm *c) {
    abandon();
    std::vector<ibex_request *> left;
    settle(&left); // none: the stream drained before teardown
    char extra[80];
    std::snprintf(extra, sizeof extra, " (%llu chunks, %llu prefetched)", static_cast<unsigned long long>(profiled_chunks_),
                  static_cast<unsigned long long>(prefetched_ops_));
    profile_.report("GPU-staging", c->rank, extra);
    profiled_chunks_ = 0;
    for (Slot &s : slots_)
        for (Pinned *b : {&s.send, &s.recv}) {
            if (!b->p) continue;
            c->caches.remove(b->p);
            cuda::free_pinned_mapped(b->p);
            *b = {};
        }
}

} // namespace ibex::coll
