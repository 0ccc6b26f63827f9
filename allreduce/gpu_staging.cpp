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

void GpuStaging::point_at(Op &op, const Chunk &k) const {
    // A side this rank does not use (a broadcast's send buffer off the root, a reduce's
    // receive buffer) must not carry the caller's pointer, which may be GPU memory: the
    // fast boxes would then turn the chunk down on this rank alone and the ranks would
    // disagree on the path. The unused send side reads as in place, the receive side as
    // none.
    if (stage_recv_)
        op.args.recvbuf = static_cast<uint8_t *>(recv_.p) + k.recv_off;
    else if (has_recv_)
        op.args.recvbuf = static_cast<uint8_t *>(orig_.recvbuf) + k.recv_off;
    else
        op.args.recvbuf = nullptr;
    if (stage_send_)
        op.args.sendbuf = static_cast<const uint8_t *>(send_.p) + k.send_off;
    else if (has_send_)
        op.args.sendbuf = static_cast<const uint8_t *>(orig_.sendbuf) + k.send_off;
    else
        op.args.sendbuf = op.args.recvbuf;
    op.args.count = k.count;
}

ibex_status_t GpuStaging::begin_batch(ibex_comm *c, Op &op) {
    pieces_.clear();
    size_t send_bytes = 0, recv_bytes = 0;
    // One memory-type query per message (a driver call on a GPU host).
    for (size_t i = 0; i < op.pieces.size(); ++i) {
        const P2pPiece &p = op.pieces[i];
        if (!cuda::is_device_pointer(p.buf)) continue;
        size_t &end = p.send ? send_bytes : recv_bytes;
        pieces_.push_back({p.send, static_cast<uint8_t *>(p.buf), end, p.bytes, i});
        end += (p.bytes + 63) & ~size_t(63);
    }
    if (send_bytes) IBEX_TRY(grow(c, send_, send_bytes));
    if (recv_bytes) IBEX_TRY(grow(c, recv_, recv_bytes));
    chunks_.assign(1, Chunk{});
    active_ = true;
    next_ = 0;
    for (const StagedPiece &s : pieces_) {
        auto *pinned = static_cast<uint8_t *>(s.send ? send_.p : recv_.p) + s.at;
        op.pieces[s.index].buf = pinned;
        if (!s.send) continue;
        if (ibex_status_t st = cuda::copy_async(pinned, s.gpu, s.bytes, cuda::pointer_device(s.gpu)); st != IBEX_OK) {
            abandon();
            return st;
        }
    }
    if (send_bytes)
        if (ibex_status_t st = cuda::fence_copies(&chunks_[0].in); st != IBEX_OK) {
            abandon();
            return st;
        }
    op.on_gpu = false; // every message is host memory now
    return IBEX_OK;
}

ibex_status_t GpuStaging::begin(ibex_comm *c, Op &op) {
    if (!profile_started_) {
        profile_.start("IBEX_GPU_STAGING_PROFILE", {"queue", "input", "collectives", "output"});
        profile_started_ = true;
    }
    profile_.lap(-1);
    input_lapped_ = false;
    if (op.kind == OpKind::p2p) {
        IBEX_TRY(begin_batch(c, op));
        profile_.lap(0);
        return IBEX_OK;
    }
    const OpBytes e = op_bytes(op, c->rank, c->nranks);
    orig_ = op.args;
    has_send_ = e.send && op.args.sendbuf;
    has_recv_ = e.recv && op.args.recvbuf;
    stage_send_ = has_send_ && cuda::is_device_pointer(op.args.sendbuf);
    stage_recv_ = has_recv_ && cuda::is_device_pointer(op.args.recvbuf);
    if (stage_send_) IBEX_TRY(grow(c, send_, e.send));
    if (stage_recv_) IBEX_TRY(grow(c, recv_, e.recv));
    chunks_.clear();
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
            chunks_.push_back(k);
        }
    } else {
        Chunk k;
        k.send_len = e.send;
        k.recv_len = e.recv;
        k.count = op.args.count;
        chunks_.push_back(k);
    }
    active_ = true;
    next_ = 0;
    if (stage_send_) {
        const int dev = cuda::pointer_device(orig_.sendbuf);
        for (Chunk &k : chunks_) {
            if (!k.send_len) continue;
            ibex_status_t st = cuda::copy_async(static_cast<uint8_t *>(send_.p) + k.send_off,
                                                static_cast<const uint8_t *>(orig_.sendbuf) + k.send_off, k.send_len, dev);
            if (st == IBEX_OK) st = cuda::fence_copies(&k.in);
            if (st != IBEX_OK) {
                abandon();
                return st;
            }
        }
    }
    point_at(op, chunks_[0]);
    op.on_gpu = false; // the chunks are host memory
    profile_.lap(0);
    return IBEX_OK;
}

bool GpuStaging::ready() {
    if (next_ < chunks_.size() && !cuda::copies_done(chunks_[next_].in)) return false;
    if (!input_lapped_) {
        profile_.lap(1);
        input_lapped_ = true;
    }
    return true;
}

ibex_status_t GpuStaging::chunk_done(Op &op, bool *more) {
    Chunk &k = chunks_[next_];
    profile_.lap(2);
    input_lapped_ = false;
    if (profile_.on()) ++profiled_chunks_;
    if (!pieces_.empty()) {
        *more = false;
        ++next_;
        for (const StagedPiece &s : pieces_)
            if (!s.send) IBEX_TRY(cuda::copy_async(s.gpu, static_cast<uint8_t *>(recv_.p) + s.at, s.bytes,
                                                   cuda::pointer_device(s.gpu)));
        return cuda::fence_copies(&k.out);
    }
    if (stage_recv_ && k.recv_len) {
        ibex_status_t st = cuda::copy_async(static_cast<uint8_t *>(orig_.recvbuf) + k.recv_off,
                                            static_cast<uint8_t *>(recv_.p) + k.recv_off, k.recv_len,
                                            cuda::pointer_device(orig_.recvbuf));
        if (st == IBEX_OK) st = cuda::fence_copies(&k.out);
        if (st != IBEX_OK) return st;
    }
    *more = ++next_ < chunks_.size();
    if (*more) point_at(op, chunks_[next_]);
    return IBEX_OK;
}

bool GpuStaging::drained() {
    for (Chunk &k : chunks_)
        if (!cuda::copies_done(k.out)) return false;
    profile_.lap(3);
    profile_.op_done();
    active_ = false;
    chunks_.clear();
    pieces_.clear();
    return true;
}

void GpuStaging::abandon() {
    for (Chunk &k : chunks_) {
        cuda::drop_fence(k.in);
        cuda::drop_fence(k.out);
    }
    chunks_.clear();
    pieces_.clear();
    active_ = false;
}

void GpuStaging::release(ibex_comm *c) {
    abandon();
    char extra[48];
    std::snprintf(extra, sizeof extra, " (%llu chunks)", static_cast<unsigned long long>(profiled_chunks_));
    profile_.report("GPU-staging", c->rank, extra);
    profiled_chunks_ = 0;
    for (Pinned *b : {&send_, &recv_}) {
        if (!b->p) continue;
        c->caches.remove(b->p);
        cuda::free_pinned_mapped(b->p);
        *b = {};
    }
}

} // namespace ibex::coll
