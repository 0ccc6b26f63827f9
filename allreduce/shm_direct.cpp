#include "allreduce/shm_direct.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "allreduce/algorithms/algorithms.h"
#include "allreduce/comm.h"
#include "allreduce/cross_memory.h"
#include "allreduce/cpu/copy_bypassing_cache.h"
#include "allreduce/cpu/reduce.h"
#include "runtime/base/config.h"
#include "runtime/base/cuda_memory.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"

namespace ibex::coll {
namespace {

// Right above the fast boxes' default (4 KiB): from there to 64 KiB the scheduled path
// took 8-67 us where this one takes 2.5-31 (2 and 4 ranks; allreduce/README.md).
constexpr size_t kDefaultMin = 4 << 10;
constexpr size_t kDefaultStage = 32 << 20;
constexpr size_t kBlockBytes = 256 << 10; // a peer's block and its reduction stay in cache

struct Hello {
    int32_t pid;
    uint32_t want; // this rank's IBEX_SHM_DIRECT_MIN, 0: off
    uint64_t probe_addr, probe_value;
    uint64_t pinned_addr; // the probe value again, in registered pinned memory (0: no CUDA)
    uint32_t reads_all;   // second round: this rank read every peer's probe
    uint32_t reads_pinned; // ... and every peer's pinned probe
};

} // namespace

ibex_status_t ShmDirect::open(ibex_comm *c) {
    min_bytes_ = 0;
    comm_ = c;
    link_ = -1;
    maps_.clear();
    rank_ = c->rank;
    nranks_ = c->nranks;
    // Decided together: a rank without fast boxes (or with IBEX_SHM_DIRECT_MIN=0) turns
    // the path off for all.
    const uint64_t probe = 0x1bec5eed0000ull ^ static_cast<uint64_t>(getpid());
    Hello mine{};
    mine.pid = static_cast<int32_t>(getpid());
    mine.want = c->fast.max_bytes()
                    ? static_cast<uint32_t>(config::get_int("IBEX_SHM_DIRECT_MIN", kDefaultMin, 0, int64_t(1) << 30))
                    : 0;
    mine.probe_addr = reinterpret_cast<uintptr_t>(&probe);
    mine.probe_value = probe;
    // GPU collectives stage through registered pinned memory (allreduce/gpu_staging.h):
    // whether the peers can read that too is checked on a page of it.
    struct PinnedProbe {
        void *p = cuda::available() ? cuda::alloc_pinned_mapped(4096) : nullptr;
        ~PinnedProbe() { cuda::free_pinned_mapped(p); }
    } pinned;
    if (pinned.p) {
        std::memcpy(pinned.p, &probe, sizeof probe);
        mine.pinned_addr = reinterpret_cast<uintptr_t>(pinned.p);
    }
    const size_t n = static_cast<size_t>(nranks_);
    std::vector<Hello> all(n);
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    bool want = true;
    for (const Hello &h : all) want = want && h.want;
    if (!want) return IBEX_OK; // every rank saw the same
    mine.reads_all = mine.reads_pinned = 1;
    // IBEX_SHM_COPY=ring: the provider's stand-in for "cross-memory attach refused" (ptrace
    // scope, another user or PID namespace), honoured here too.
    const bool cma_allowed = std::strcmp(config::get_string("IBEX_SHM_COPY", ""), "ring") != 0;
    for (size_t q = 0; q < n; ++q) {
        if (static_cast<int>(q) == rank_) continue;
        if (!cma_allowed || !peer_word_is(all[q].pid, all[q].probe_addr, all[q].probe_value)) {
            IBEX_LOG(info, "communicator rank %d: cannot read rank %zu's memory (process_vm_readv: %s): large "
                           "collectives go through the staging or the transport",
                     rank_, q, cma_allowed ? std::strerror(errno) : "IBEX_SHM_COPY=ring");
            mine.reads_all = 0;
        }
        if (all[q].pinned_addr && !peer_word_is(all[q].pid, all[q].pinned_addr, all[q].probe_value)) {
            IBEX_LOG(info, "communicator rank %d: cannot read rank %zu's pinned memory (process_vm_readv: %s): GPU "
                           "allreduces go through the transport",
                     rank_, q, std::strerror(errno));
            mine.reads_pinned = 0;
        }
    }
    std::vector<Hello> second(n);
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, second.data(), c->opt.timeout_ms)); // probes stay alive until here
    size_t min = 0;
    pinned_ok_ = cma_ok_ = true;
    for (const Hello &h : second) {
        cma_ok_ = cma_ok_ && h.reads_all;
        pinned_ok_ = pinned_ok_ && h.reads_pinned && h.reads_all;
        min = std::max<size_t>(min, h.want);
    }
    min_bytes_ = std::max(min, c->fast.max_bytes() + 1);
    all_.resize(n);
    if (rank_ == 0 && cma_ok_)
        IBEX_LOG(info, "communicator: collectives of %zu bytes and more read and write the peers' buffers directly "
                       "(process_vm_readv/writev)",
                 min_bytes_);
    IBEX_TRY(open_staging(c));
    // Without cross-memory attach the path is the staging alone, or nothing.
    if (!cma_ok_ && !stage_bytes_) min_bytes_ = 0;
    return IBEX_OK;
}

void ShmDirect::close_staging() {
    stage_.close();
    stage_bytes_ = 0;
    stage_of_.clear();
}

ibex_status_t ShmDirect::open_staging(ibex_comm *c) {
    const size_t n = static_cast<size_t>(nranks_);
    const size_t want = static_cast<size_t>(config::get_int("IBEX_SHM_STAGE_BYTES", kDefaultStage, 0, int64_t(1) << 32));
    std::string why;
    struct Offer {
        uint64_t addr, bytes;
        uint32_t rkey, mapped;
    };
    Offer mine{};
    int link = -1; // the fast boxes checked that every peer is on one shm link
    for (int q = 0; q < nranks_; ++q)
        if (q != rank_) link = c->exec.link_of(q);
    link_ = link;
    if (want && link >= 0) {
        const size_t bytes = (want + 4095) & ~size_t(4095);
        // Inputs, then results: two areas of `bytes` each (only what a collective uses is
        // ever touched, so only that becomes memory).
        if (stage_.open(c->exec.pd(link), 2 * bytes, IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_READ) != IBEX_OK)
            why = ibex_last_error();
        else
            mine = {reinterpret_cast<uintptr_t>(stage_.data()), bytes, stage_.rkey(), 0};
    }
    std::vector<Offer> all(n);
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, all.data(), c->opt.timeout_ms));
    size_t agreed = mine.bytes;
    for (const Offer &o : all) agreed = std::min<size_t>(agreed, o.bytes);
    // Every rank maps every peer's staging, or nobody stages.
    stage_of_.assign(n, nullptr);
    mine.mapped = agreed != 0;
    for (int q = 0; q < nranks_ && mine.mapped; ++q) {
        const Offer &o = all[static_cast<size_t>(q)];
        void *p = stage_.data();
        if (q != rank_ &&
            ibex_rkey_ptr(c->exec.qp_to(q), o.addr, o.rkey, 2 * agreed, IBEX_ACCESS_REMOTE_READ, &p) != IBEX_OK) {
            why = "rank " + std::to_string(q) + "'s staging is not mapped here: " + ibex_last_error();
            mine.mapped = 0;
        }
        stage_of_[static_cast<size_t>(q)] = static_cast<uint8_t *>(p);
    }
    std::vector<Offer> second(n);
    IBEX_TRY(c->boot->allgather(&mine, sizeof mine, second.data(), c->opt.timeout_ms));
    bool everyone = mine.mapped;
    for (const Offer &o : second) everyone = everyone && o.mapped;
    if (!everyone) {
        if (want && (rank_ == 0 || !why.empty()))
            IBEX_LOG(info, "communicator rank %d: no staging for large collectives (%s)", rank_,
                     why.empty() ? "another rank cannot stage" : why.c_str());
        close_staging();
        return IBEX_OK;
    }
    stage_bytes_ = agreed;
    if (rank_ == 0)
        IBEX_LOG(info, "communicator: collectives of %zu to %zu bytes go through the peers' mapped staging memory",
                 min_bytes_, stage_bytes_);
    return IBEX_OK;
}

ibex_pd_t *ShmDirect::shared_pd() const { return min_bytes_ && link_ >= 0 ? comm_->exec.pd(link_) : nullptr; }

bool ShmDirect::takes(const Op &op) const {
    // alltoallv's blocks differ per pair, and its announce round carries one count; a send
    // or receive involves two ranks, not the host's all.
    if (!min_bytes_ || op.kind == OpKind::alltoallv || op.kind == OpKind::p2p) return false;
    // The larger side is the whole buffer (the input of a reduce-scatter, the output of an
    // allgather), the same on every rank whichever side a rank leaves unused.
    const OpBytes b = op_bytes(op, rank_, nranks_);
    const size_t whole = std::max(b.send, b.recv);
    return whole >= min_bytes_ && (cma_ok_ || stages(op.kind, whole));
}

bool ShmDirect::stages(OpKind kind, size_t whole) const {
    if (!stage_bytes_ || kind == OpKind::barrier || kind == OpKind::probe || whole > stage_bytes_) return false;
    // Two ranks moving data without reducing it: one process_vm_writev (allgather) or
    // process_vm_readv (broadcast) is a single copy, where the staging makes two; measured
    // 0.68-1.03x of it at 256 KiB-16 MiB (bench/collectives/staged.sh). From three ranks
    // the staging wins (0.92-1.77x).
    return !(cma_ok_ && nranks_ == 2 &&
             (kind == OpKind::allgather || kind == OpKind::broadcast || kind == OpKind::alltoall));
}

bool ShmDirect::takes_allreduce(size_t bytes) const {
    return min_bytes_ && bytes >= min_bytes_ && (cma_ok_ || stages(OpKind::allreduce, bytes));
}

void ShmDirect::begin(const Op &op) {
    mine_ = {};
    mine_.send = reinterpret_cast<uintptr_t>(op.args.sendbuf);
    mine_.recv = reinterpret_cast<uintptr_t>(op.args.recvbuf);
    mine_.count = op.args.count;
    mine_.pid = static_cast<int32_t>(getpid());
    mine_.call = call_word(op);
    mine_.root = op.kind == OpKind::broadcast || op.kind == OpKind::reduce ? op.args.root : -1;
    // The buffers the peers touch must be memory they can reach: ordinary host memory, or
    // the GPU staging buffers where every rank could read a page of such memory at
    // creation. Peers read a send buffer (all but a broadcast off its root) and write a
    // receive buffer (allreduce, allgather, a reduce's root).
    auto reachable = [this](const void *p) {
        const cuda::MemoryKind k = cuda::memory_kind(p);
        return k == cuda::MemoryKind::kHost ||
               (k == cuda::MemoryKind::kPinnedHost && pinned_ok_ && cuda::is_pinned_mapped(p));
    };
    const bool read = op.kind != OpKind::allgather && (op.kind != OpKind::broadcast || rank_ == op.args.root);
    const bool written = op.kind == OpKind::allreduce || op.kind == OpKind::allgather ||
                         (op.kind == OpKind::reduce && rank_ == op.args.root);
    mine_.plain = (!read || reachable(op.args.sendbuf)) && (!written || reachable(op.args.recvbuf));
    // Shared buffers (ibex_comm_mem_alloc): where this collective's peers will read or
    // write them (a staged allgather reads the send buffer, a direct one writes the
    // receive buffer), each in place of the staging or process_vm_*.
    const OpBytes ob = op_bytes(op, rank_, nranks_);
    if (op.args.sendbuf && ob.send) comm_->memory.find(op.args.sendbuf, ob.send, &mine_.send_region);
    if (op.args.recvbuf && ob.recv) comm_->memory.find(op.args.recvbuf, ob.recv, &mine_.recv_region);
    // The same answer on every rank: the call and the size agreed at creation.
    staging_now_ = stages(op.kind, std::max(ob.send, ob.recv));
    if (staging_now_ && mine_.plain && !mine_.send_region.id && stage_in(op)) ++staged_in_;
    sub_ = Op{};
    sub_.kind = OpKind::allgather;
    sub_.args.sendbuf = &mine_;
    sub_.args.recvbuf = all_.data();
    sub_.args.count = sizeof(Announce);
    sub_.args.type = IBEX_U8;
    phase_ = Phase::announce;
}

ibex_status_t ShmDirect::cross(int q, void *local, uint64_t remote, size_t bytes, bool write) const {
    return cross_copy(all_[static_cast<size_t>(q)].pid, local, remote, bytes, write, q, "buffer");
}

ibex_status_t ShmDirect::read_from(int q, void *dst, size_t at, size_t bytes) const {
    if (const uint8_t *p = send_at_[static_cast<size_t>(q)]) {
        std::memcpy(dst, p + at, bytes);
        return IBEX_OK;
    }
    return cross(q, dst, all_[static_cast<size_t>(q)].send + at, bytes, false);
}

ibex_status_t ShmDirect::write_to(int q, size_t at, const void *src, size_t bytes) const {
    if (uint8_t *p = recv_at_[static_cast<size_t>(q)]) {
        copy_bypassing_cache(p + at, src, bytes); // the peer reads it next, from another core
        return IBEX_OK;
    }
    // process_vm_writev only reads src
    return cross(q, const_cast<void *>(src), all_[static_cast<size_t>(q)].recv + at, bytes, true);
}

uint8_t *ShmDirect::map_region(int q, const CommMemory::Region &r) {
    const auto key = std::make_pair(q, r.id);
    if (auto it = maps_.find(key); it != maps_.end()) return it->second;
    void *p = nullptr;
    if (ibex_rkey_ptr(comm_->exec.qp_to(q), r.base, r.rkey, r.bytes, IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_WRITE,
                      &p) != IBEX_OK) {
        IBEX_LOG(info, "communicator rank %d: rank %d's shared buffer (%llu bytes) is not mapped here (%s): it is "
                       "reached with process_vm_readv/writev",
                 rank_, q, static_cast<unsigned long long>(r.bytes), ibex_last_error());
        p = nullptr; // remembered too: one try and one line per allocation
    }
    // Ids are never reused, so an entry is never wrong, only unused once its allocation is
    // freed: a bound keeps a long run of allocations from growing the table.
    if (maps_.size() >= 1024) maps_.clear();
    maps_[key] = static_cast<uint8_t *>(p);
    return static_cast<uint8_t *>(p);
}

void ShmDirect::map_peers() {
    const size_t n = static_cast<size_t>(nranks_);
    send_at_.assign(n, nullptr);
    recv_at_.assign(n, nullptr);
    bool any = false;
    for (int q = 0; q < nranks_; ++q) {
        const Announce &t = all_[static_cast<size_t>(q)];
        if (q == rank_) continue;
        if (t.send_region.id)
            if (uint8_t *b = map_region(q, t.send_region)) send_at_[static_cast<size_t>(q)] = b + (t.send - t.send_region.base);
        if (t.recv_region.id)
            if (uint8_t *b = map_region(q, t.recv_region)) recv_at_[static_cast<size_t>(q)] = b + (t.recv - t.recv_region.base);
        any = any || send_at_[static_cast<size_t>(q)] || recv_at_[static_cast<size_t>(q)];
    }
    if (any) ++mapped_;
}

template <typename Load, typename After>
ibex_status_t ShmDirect::reduce_in_blocks(const Op &op, size_t src, uint8_t *out, size_t count, Load load, After after) {
    const CollArgs &a = op.args;
    const size_t elem = ibex_datatype_size(a.type);
    const size_t per = std::max<size_t>(1, kBlockBytes / elem);
    for (auto &b : block_)
        if (b.size() < per * elem) b.resize(per * elem);
    for (size_t done = 0; done < count; done += per) {
        const size_t cnt = std::min(per, count - done), bytes = cnt * elem, at = src + done * elem;
        uint8_t *dst = out ? out + done * elem : block_[3].data();
        const auto *own = static_cast<const uint8_t *>(a.sendbuf) + at;
        // The partial sums build up in a scratch block and only the last reduction writes
        // out, so that in place this rank's block is still there at its turn (reduce_into's
        // out may be one of its operands) without a copy of it first.
        uint8_t *sum = nranks_ > 2 ? block_[2].data() : dst;
        // Rank q's block: this rank's own, else what load gives (q 1 has a scratch block of
        // its own, so that ranks 0 and 1 are both at hand for the first reduction).
        auto block = [&](int q, const uint8_t **p) -> ibex_status_t {
            if (q == rank_) {
                *p = own;
                return IBEX_OK;
            }
            return load(q, at, bytes, block_[q == 1 ? 1 : 0].data(), p);
        };
        const uint8_t *x = nullptr, *y = nullptr;
        IBEX_TRY(block(0, &x));
        IBEX_TRY(block(1, &y));
        reduce_into(sum, x, y, cnt, a.type, a.op); // rank order, as every other path
        for (int q = 2; q < nranks_; ++q) {
            IBEX_TRY(block(q, &x));
            reduce_into(q + 1 == nranks_ ? dst : sum, sum, x, cnt, a.type, a.op);
        }
        if (a.op == IBEX_AVG) finalize_avg(dst, cnt, a.type, nranks_);
        IBEX_TRY(after(dst, at, bytes, done * elem));
    }
    return IBEX_OK;
}

ibex_status_t ShmDirect::reduce_blocks(const Op &op, size_t src, uint8_t *out, size_t count, int push_to) {
    return reduce_in_blocks(
        op, src, out, count,
        [this](int q, size_t at, size_t bytes, uint8_t *scratch, const uint8_t **p) {
            if (const uint8_t *m = send_at_[static_cast<size_t>(q)]) { // read where it lies
                *p = m + at;
                return IBEX_OK;
            }
            *p = scratch;
            return read_from(q, scratch, at, bytes);
        },
        [&](const uint8_t *dst, size_t at, size_t bytes, size_t) -> ibex_status_t {
            // Straight from cache into the peers' receive buffers: nobody else writes there.
            for (int q = 0; q < nranks_; ++q)
                if (gets_results(q, push_to)) IBEX_TRY(write_to(q, at, dst, bytes));
            return IBEX_OK;
        });
}

bool ShmDirect::stage_in(const Op &op) {
    const CollArgs &a = op.args;
    const size_t elem = ibex_datatype_size(a.type), bytes = a.count * elem;
    const auto *send = static_cast<const uint8_t *>(a.sendbuf);
    uint8_t *in = stage_of_[static_cast<size_t>(rank_)];
    switch (op.kind) {
    case OpKind::allreduce: // the segments the peers reduce, where they will read them
    case OpKind::reduce:
        for (int q = 0; q < nranks_; ++q) {
            size_t off = 0, len = 0;
            chunk_range(a.count, nranks_, q, &off, &len);
            if (q != rank_ && len) copy_bypassing_cache(in + off * elem, send + off * elem, len * elem);
        }
        return true;
    case OpKind::reduce_scatter: // the blocks the peers reduce
    case OpKind::alltoall:       // the blocks the peers take
        for (int q = 0; q < nranks_; ++q)
            if (q != rank_) copy_bypassing_cache(in + q * bytes, send + q * bytes, bytes);
        return true;
    case OpKind::allgather: copy_bypassing_cache(in + rank_ * bytes, send, bytes); return true;
    case OpKind::broadcast:
        if (rank_ != a.root) return false;
        copy_bypassing_cache(in, send, bytes);
        return true;
    case OpKind::barrier:
    case OpKind::alltoallv:
    case OpKind::p2p:
    case OpKind::probe: return false;
    }
    return false;
}

ibex_status_t ShmDirect::reduce_from_staging(const Op &op, size_t src, uint8_t *out, size_t count, uint8_t *publish,
                                             int push_to) {
    // Only a shared buffer that could not be mapped here can fail (process_vm_* instead).
    return reduce_in_blocks(
        op, src, out, count,
        [this](int q, size_t at, size_t bytes, uint8_t *scratch, const uint8_t **p) {
            if (!send_shared(q)) {
                *p = stage_of_[static_cast<size_t>(q)] + at;
            } else if (const uint8_t *m = send_at_[static_cast<size_t>(q)]) {
                *p = m + at;
            } else {
                *p = scratch;
                return read_from(q, scratch, at, bytes);
            }
            return IBEX_OK;
        },
        [&](const uint8_t *dst, size_t at, size_t bytes, size_t offset) -> ibex_status_t {
            if (publish) copy_bypassing_cache(publish + offset, dst, bytes);
            for (int q = 0; q < nranks_; ++q)
                if (gets_results(q, push_to) && recv_shared(q))
                    IBEX_TRY(write_to(q, at, dst, bytes));
            return IBEX_OK;
        });
}

ibex_status_t ShmDirect::take_blocks(const Op &op, bool staged) {
    // Alltoall: rank r takes block r of every peer's send buffer (only it reads there, and
    // only it writes its own receive buffer), from the peer's staging, its mapped shared
    // buffer, or with process_vm_readv.
    const CollArgs &a = op.args;
    const size_t bytes = a.count * ibex_datatype_size(a.type), mine = static_cast<size_t>(rank_) * bytes;
    auto *recv = static_cast<uint8_t *>(a.recvbuf);
    for (int q = 0; q < nranks_; ++q) {
        uint8_t *dst = recv + static_cast<size_t>(q) * bytes;
        if (q == rank_)
            std::memcpy(dst, static_cast<const uint8_t *>(a.sendbuf) + mine, bytes); // never in place
        else if (staged && !send_shared(q))
            std::memcpy(dst, stage_of_[static_cast<size_t>(q)] + mine, bytes);
        else
            IBEX_TRY(read_from(q, dst, mine, bytes));
    }
    return IBEX_OK;
}

ibex_status_t ShmDirect::run_staged(const Op &op) {
    const CollArgs &a = op.args;
    const size_t elem = ibex_datatype_size(a.type), bytes = a.count * elem;
    auto *recv = static_cast<uint8_t *>(a.recvbuf);
    switch (op.kind) {
    case OpKind::allreduce:
    case OpKind::reduce: {
        // A reduce's segments meet at the root: it keeps its own, the others hand theirs
        // over (their receive buffers may be NULL). A result goes straight into a shared
        // receive buffer, and is published for the ranks that copy it out.
        size_t off = 0, len = 0;
        chunk_range(a.count, nranks_, rank_, &off, &len);
        const bool keeps = op.kind == OpKind::allreduce || rank_ == a.root;
        const int push_to = op.kind == OpKind::allreduce ? kEveryone : rank_ == a.root ? kNobody : a.root;
        bool publishes = false;
        for (int q = 0; q < nranks_; ++q)
            publishes = publishes || (gets_results(q, push_to) && !recv_shared(q));
        if (len)
            IBEX_TRY(reduce_from_staging(
                op, off * elem, keeps ? recv + off * elem : nullptr, len,
                publishes ? stage_of_[static_cast<size_t>(rank_)] + stage_bytes_ + off * elem : nullptr, push_to));
        return IBEX_OK;
    }
    case OpKind::reduce_scatter:
        return reduce_from_staging(op, static_cast<size_t>(rank_) * bytes, recv, a.count, nullptr, kNobody);
    case OpKind::allgather:
        for (int q = 0; q < nranks_; ++q) {
            uint8_t *dst = recv + static_cast<size_t>(q) * bytes;
            if (q != rank_ && send_shared(q))
                IBEX_TRY(read_from(q, dst, 0, bytes));
            else if (q != rank_)
                std::memcpy(dst, stage_of_[static_cast<size_t>(q)] + q * bytes, bytes);
            else if (dst != a.sendbuf)
                std::memmove(dst, a.sendbuf, bytes);
        }
        return IBEX_OK;
    case OpKind::broadcast:
        if (rank_ != a.root && send_shared(a.root))
            return read_from(a.root, recv, 0, bytes);
        if (rank_ != a.root)
            std::memcpy(recv, stage_of_[static_cast<size_t>(a.root)], bytes);
        else if (recv != a.sendbuf)
            std::memmove(recv, a.sendbuf, bytes);
        return IBEX_OK;
    case OpKind::alltoall: return take_blocks(op, true);
    case OpKind::barrier:
    case OpKind::alltoallv:
    case OpKind::p2p:
    case OpKind::probe: return IBEX_OK;
    }
    return IBEX_OK;
}

void ShmDirect::finish_staged(const Op &op) {
    if (op.kind != OpKind::allreduce && !(op.kind == OpKind::reduce && rank_ == op.args.root)) return;
    if (recv_shared(rank_)) return; // the peers stored their results straight into it
    // Allreduce, and a reduce's root: every peer's segment out of its result area.
    const CollArgs &a = op.args;
    const size_t elem = ibex_datatype_size(a.type);
    auto *recv = static_cast<uint8_t *>(a.recvbuf);
    for (int q = 0; q < nranks_; ++q) {
        size_t off = 0, len = 0;
        chunk_range(a.count, nranks_, q, &off, &len);
        if (q != rank_ && len)
            std::memcpy(recv + off * elem, stage_of_[static_cast<size_t>(q)] + stage_bytes_ + off * elem, len * elem);
    }
}

ibex_status_t ShmDirect::run_local(const Op &op) {
    const CollArgs &a = op.args;
    const size_t elem = ibex_datatype_size(a.type), bytes = a.count * elem;
    auto *recv = static_cast<uint8_t *>(a.recvbuf);
    size_t off = 0, len = 0;
    chunk_range(a.count, nranks_, rank_, &off, &len);
    switch (op.kind) {
    case OpKind::allreduce: return len ? reduce_blocks(op, off * elem, recv + off * elem, len, kEveryone) : IBEX_OK;
    case OpKind::reduce:
        if (!len) return IBEX_OK;
        if (rank_ == a.root) return reduce_blocks(op, off * elem, recv + off * elem, len, kNobody);
        return reduce_blocks(op, off * elem, nullptr, len, a.root);
    case OpKind::reduce_scatter: return reduce_blocks(op, static_cast<size_t>(rank_) * bytes, recv, a.count, kNobody);
    case OpKind::allgather: {
        uint8_t *mine = recv + static_cast<size_t>(rank_) * bytes;
        if (mine != a.sendbuf) std::memmove(mine, a.sendbuf, bytes);
        for (int q = 0; q < nranks_; ++q)
            if (q != rank_) IBEX_TRY(write_to(q, static_cast<size_t>(rank_) * bytes, mine, bytes));
        return IBEX_OK;
    }
    case OpKind::broadcast:
        if (rank_ == a.root) {
            if (recv != a.sendbuf) std::memmove(recv, a.sendbuf, bytes);
            return IBEX_OK;
        }
        return read_from(a.root, recv, 0, bytes);
    case OpKind::alltoall: return take_blocks(op, false);
    case OpKind::barrier:
    case OpKind::alltoallv:
    case OpKind::p2p:
    case OpKind::probe: break;
    }
    return IBEX_OK;
}

ibex_status_t ShmDirect::advance(const Op &op, bool *done, bool *fallback) {
    *done = *fallback = false;
    switch (phase_) {
    case Phase::announce: {
        IBEX_TRY(check_same_call(all_, mine_));
        bool plain = true;
        for (const Announce &t : all_) plain = plain && t.plain;
        if (!plain) { // every rank saw the same announcements
            phase_ = Phase::idle;
            staging_now_ = false;
            *fallback = true;
            return IBEX_OK;
        }
        map_peers();
        IBEX_TRY(staging_now_ ? run_staged(op) : run_local(op));
        sub_ = Op{};
        sub_.kind = OpKind::barrier;
        phase_ = Phase::reduced;
        return IBEX_OK;
    }
    case Phase::reduced:
        if (staging_now_) {
            finish_staged(op);
            staging_now_ = false;
            ++staged_;
        }
        phase_ = Phase::idle;
        ++taken_;
        *done = true;
        return IBEX_OK;
    case Phase::idle: break;
    }
    return fail(IBEX_ERR_INTERNAL, "direct collective advanced while idle");
}

} // namespace ibex::coll
