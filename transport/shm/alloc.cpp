// The `map` mechanism. ibex_mem_alloc memory is a memfd mapped MAP_SHARED; the first
// request that uses an allocation sends its fd to the peer context over a UNIX datagram
// socket (SCM_RIGHTS; the receiver checks the sender's pid by SCM_CREDENTIALS), and the
// peer maps it. From then on the target serves WRITE, READ and SEND that use it as one
// memcpy between the two mappings: no system call, and the rkey checks, ordering and
// completions stay exactly where the other mechanisms keep them.
#include <cerrno>
#include <cstring>
#include <mutex>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/base/log.h"
#include "runtime/base/c_enum.h"
#include "runtime/base/status.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm_ops.h"

namespace ibex::shm {

namespace {

// How long ibex_rkey_ptr waits for a peer's fd that has not come yet.
constexpr int kOfferWaitUs = 1'000'000;

struct FdMessage {
    uint64_t sender; // pid << 32 | context id
    uint64_t id;
    uint64_t size;
};

uint64_t ctx_key(uint32_t pid, uint32_t ctx_id) { return uint64_t(pid) << 32 | ctx_id; }

socklen_t socket_address(uint32_t pid, uint32_t ctx_id, sockaddr_un *a) {
    std::memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    // Abstract namespace: the name goes with the socket, nothing to clean up.
    const int n = std::snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "%s%u.%u", kSegmentPrefix, pid, ctx_id);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

// Maps every fd waiting on the socket.
void drain(ShmContext &ctx) {
    for (;;) {
        FdMessage m{};
        iovec iov{&m, sizeof m};
        alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(ucred))];
        msghdr h{};
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = ctl;
        h.msg_controllen = sizeof ctl;
        if (recvmsg(ctx.sock, &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != sizeof m) return;
        int fd = -1;
        pid_t sender = 0;
        for (cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                ucred u;
                std::memcpy(&u, CMSG_DATA(c), sizeof u);
                sender = u.pid;
            }
        }
        if (fd < 0) continue;
        const auto key = std::make_pair(m.sender, m.id);
        if (uint64_t(sender) == m.sender >> 32 && !ctx.peer_maps.count(key)) {
            void *p = mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) ctx.peer_maps[key] = {static_cast<uint8_t *>(p), m.size};
        } else if (uint64_t(sender) != m.sender >> 32) {
            IBEX_LOG(warn, "shm: dropped an fd from pid %d claiming to be pid %llu", static_cast<int>(sender),
                     static_cast<unsigned long long>(m.sender >> 32));
        }
        ::close(fd);
    }
}

// The allocation holding [addr, addr + len), or nullptr; *base gets its start.
const Alloc *alloc_holding(const ShmContext &ctx, uintptr_t addr, size_t len, uintptr_t *base) {
    auto it = ctx.allocs.upper_bound(addr);
    if (it == ctx.allocs.begin()) return nullptr;
    --it;
    if (addr - it->first > it->second.size || len > it->second.size - (addr - it->first)) return nullptr;
    *base = it->first;
    return &it->second;
}

bool send_fd(ShmQp &qp, const Alloc &a) {
    ShmContext &ctx = *qp.ctx;
    sockaddr_un to;
    const socklen_t tolen = socket_address(qp.peer_pid, qp.peer_ctx_id, &to);
    FdMessage m{ctx_key(ctx.shared->pid, ctx.id), a.id, a.size};
    iovec iov{&m, sizeof m};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
    msghdr h{};
    h.msg_name = &to;
    h.msg_namelen = tolen;
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctl;
    h.msg_controllen = sizeof ctl;
    cmsghdr *c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &a.fd, sizeof a.fd);
    return sendmsg(ctx.sock, &h, MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof m;
}

} // namespace

void open_fd_socket(ShmContext &ctx) {
    ctx.sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ctx.sock < 0) return;
    const int one = 1;
    sockaddr_un a;
    const socklen_t len = socket_address(ctx.shared->pid, ctx.id, &a);
    if (setsockopt(ctx.sock, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) != 0 ||
        bind(ctx.sock, reinterpret_cast<sockaddr *>(&a), len) != 0) {
        IBEX_LOG(info, "shm: no fd-passing socket (%s): ibex_mem_alloc memory moves by cma", std::strerror(errno));
        ::close(ctx.sock);
        ctx.sock = -1;
    }
}

void close_fd_socket(ShmContext &ctx) {
    if (ctx.sock >= 0) ::close(ctx.sock);
    ctx.sock = -1;
    for (auto &[key, m] : ctx.peer_maps) munmap(m.base, m.size);
    ctx.peer_maps.clear();
    ctx.last_map_key = {0, 0};
    ctx.last_map = {};
}

bool shared_alloc_of(ShmQp &qp, const void *p, size_t len, uint64_t *id, uint64_t *off) {
    ShmContext &ctx = *qp.ctx;
    if (ctx.device_mrs && gpu_export_of(ctx, p, len, id, off)) return true;
    uintptr_t base = 0;
    const Alloc *a = ctx.allocs.empty() || ctx.sock < 0 ? nullptr : alloc_holding(ctx, reinterpret_cast<uintptr_t>(p), len, &base);
    if (!a) return false;
    if (!qp.shared_allocs.count(a->id)) {
        if (!send_fd(qp, *a)) return false;
        qp.shared_allocs.insert(a->id);
    }
    *id = a->id;
    *off = reinterpret_cast<uintptr_t>(p) - base;
    return true;
}

uint8_t *peer_mapping(ShmQp &qp, uint64_t id, uint64_t off, uint64_t len) {
    if (id & kGpuAlloc) return gpu_peer_mapping(qp, id, off, len);
    ShmContext &ctx = *qp.ctx;
    const auto key = std::make_pair(ctx_key(qp.peer_pid, qp.peer_ctx_id), id);
    if (ctx.last_map.base && key == ctx.last_map_key)
        return off > ctx.last_map.size || len > ctx.last_map.size - off ? nullptr : ctx.last_map.base + off;
    auto it = ctx.peer_maps.find(key);
    if (it == ctx.peer_maps.end() && ctx.sock >= 0) {
        drain(ctx);
        it = ctx.peer_maps.find(key);
    }
    if (it == ctx.peer_maps.end()) return nullptr;
    ctx.last_map_key = key;
    ctx.last_map = it->second;
    if (off > it->second.size || len > it->second.size - off) return nullptr;
    return it->second.base + off;
}

bool mapped_peer_allocs(ibex_context *c, size_t *out) {
    if (!c || c->ops != &kShmProviderOps) return false;
    ShmContext &ctx = *to_shm(c);
    Lock l(ctx.mu);
    if (ctx.sock >= 0) drain(ctx);
    *out = ctx.peer_maps.size();
    return true;
}

namespace {

// A peer's socket queues a few datagrams only (net.unix.max_dgram_qlen, 10 by default)
// until that peer drains it, which it does when it misses a mapping; an offer it could not
// take is made again from the progress pass (retry_offers) until it goes through.
void offer(ShmQp &qp, const Alloc &a) {
    if (!qp.peer || qp.ctx->sock < 0 || qp.shared_allocs.count(a.id)) return;
    if (send_fd(qp, a))
        qp.shared_allocs.insert(a.id);
    else
        qp.ctx->offers_pending = true;
}

} // namespace

void offer_allocs(ShmQp &qp) {
    for (auto &[base, a] : qp.ctx->allocs) offer(qp, a);
}

void retry_offers(ShmContext &ctx) {
    if (!ctx.offers_pending) return;
    ctx.offers_pending = false;
    for (ShmQp *qp : ctx.qps)
        if (qp->self && qp->self->ready.load(std::memory_order_relaxed)) offer_allocs(*qp);
}

void publish_mr(ShmContext &ctx, const ibex_mr &mr) {
    const uint32_t index = mr.rkey >> 8;
    uintptr_t base = 0;
    const Alloc *a = alloc_holding(ctx, reinterpret_cast<uintptr_t>(mr.addr), mr.length, &base);
    uint64_t gpu_alloc = 0, gpu_off = 0;
    if (is_gpu(ctx, mr.addr)) {
        export_gpu(ctx, mr, &gpu_alloc, &gpu_off);
        a = nullptr;
    }
    if (index >= kPublishedMrs) return;
    if (ctx.sock < 0) a = nullptr;
    if (a)
        for (ShmQp *qp : ctx.qps) offer(*qp, *a); // the fd before the entry that names it
    PublishedMr &p = ctx.shared->mrs[index];
    p.seq.fetch_add(1, std::memory_order_acq_rel);
    p.rkey.store(mr.rkey, std::memory_order_relaxed);
    p.access.store(mr.access, std::memory_order_relaxed);
    p.addr.store(reinterpret_cast<uintptr_t>(mr.addr), std::memory_order_relaxed);
    p.len.store(mr.length, std::memory_order_relaxed);
    // 0: not in an allocation (cma only)
    p.alloc.store(gpu_alloc ? gpu_alloc : a ? a->id : 0, std::memory_order_relaxed);
    p.alloc_off.store(gpu_alloc ? gpu_off : a ? reinterpret_cast<uintptr_t>(mr.addr) - base : 0, std::memory_order_relaxed);
    p.seq.fetch_add(1, std::memory_order_release);
}

void withdraw_mr(ShmContext &ctx, const ibex_mr &mr) {
    const uint32_t index = mr.rkey >> 8;
    if (index >= kPublishedMrs || ctx.shared->mrs[index].rkey.load(std::memory_order_relaxed) != mr.rkey) return;
    PublishedMr &p = ctx.shared->mrs[index];
    p.seq.fetch_add(1, std::memory_order_acq_rel);
    p.rkey.store(0, std::memory_order_relaxed);
    p.seq.fetch_add(1, std::memory_order_release);
}

namespace {

// [remote_addr, +len) under `rkey`, checked against the peer's published MR as the target
// would check it (key, access, bounds; the peer QP in RTR or RTS with `need` allowed).
// On success *alloc is the peer allocation holding it (0: none, CMA only) and *off the
// offset of remote_addr in it; `lane`, when given, gets the peer MR's range and the
// seqlock value it was read under.
bool peer_allows(const ShmQp &qp, uint32_t rkey, uint64_t remote_addr, uint64_t len, unsigned need, uint64_t *alloc,
                 uint64_t *off, LaneTarget *lane = nullptr) {
    const uint32_t state = qp.peer->state.load(std::memory_order_acquire);
    if ((state != IBEX_QPS_RTR && state != IBEX_QPS_RTS) || !(qp.peer->access.load(std::memory_order_relaxed) & need))
        return false;
    const uint32_t index = rkey >> 8;
    if (index >= kPublishedMrs) return false;
    const PublishedMr &p = qp.peer_ctx->mrs[index];
    const uint32_t seq = p.seq.load(std::memory_order_acquire);
    if (seq & 1) return false;
    const uint64_t addr = p.addr.load(std::memory_order_relaxed), mr_len = p.len.load(std::memory_order_relaxed);
    *alloc = p.alloc.load(std::memory_order_relaxed);
    *off = p.alloc_off.load(std::memory_order_relaxed) + (remote_addr - addr);
    const bool ok = p.rkey.load(std::memory_order_relaxed) == rkey &&
                    (p.access.load(std::memory_order_relaxed) & need) == need && remote_addr >= addr && len <= mr_len &&
                    remote_addr - addr <= mr_len - len;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!ok || p.seq.load(std::memory_order_relaxed) != seq) return false;
    if (lane) {
        lane->remote_addr = addr;
        lane->remote_len = mr_len;
        lane->peer_mr_seq = &p.seq;
        lane->peer_mr_seq_seen = seq;
    }
    return true;
}

void count_map(ShmQp &qp, uint64_t bytes) {
    ++qp.ctx->copies.map_ops;
    qp.ctx->copies.map_bytes += bytes;
    note_copy_choice(Copy::kMap, "ibex_mem_alloc memory, mapped from the peer's memfd");
}

} // namespace

bool direct_copy(ShmQp &qp, const SendWqe &w, bool place_only, cuda::CopyFence *fence) {
    const bool write = w.opcode == (place_only ? IBEX_WR_RDMA_WRITE_WITH_IMM : IBEX_WR_RDMA_WRITE);
    if ((!write && (place_only || w.opcode != IBEX_WR_RDMA_READ)) || !w.local.total || qp.send_mode == Copy::kRing ||
        qp.forced == static_cast<uint32_t>(Copy::kRing) || (place_only && qp.forced == static_cast<uint32_t>(Copy::kCma)))
        return false;
    uint64_t alloc = 0, off = 0;
    if (!peer_allows(qp, w.rkey, w.remote_addr, w.local.total, write ? IBEX_ACCESS_REMOTE_WRITE : IBEX_ACCESS_REMOTE_READ,
                     &alloc, &off))
        return false;
    iovec iov[kMaxSge];
    const int n = w.local.gather(0, w.local.total, iov);
    bool gpu = alloc & kGpuAlloc;
    for (int i = 0; !gpu && qp.ctx->device_mrs && i < n; ++i) gpu = is_gpu(*qp.ctx, iov[i].iov_base);
    uint8_t *remote =
        alloc && (gpu || qp.forced != static_cast<uint32_t>(Copy::kCma)) ? peer_mapping(qp, alloc, off, w.local.total) : nullptr;
    if (remote && gpu && (alloc & kGpuAlloc) && !peer_lives(qp)) return false; // the request path fails it
    if (remote && gpu) {
        // One cudaMemcpyAsync per SGE on the GPU's stream; fenced once, after the last.
        for (int i = 0; i < n; ++i) {
            void *dst = write ? static_cast<void *>(remote) : iov[i].iov_base;
            const void *src = write ? static_cast<const void *>(iov[i].iov_base) : remote;
            const bool last = i + 1 == n;
            if (copy_gpu(dst, src, iov[i].iov_len, last && fence && !place_only ? fence : nullptr) != IBEX_OK) {
                IBEX_LOG(warn, "shm: GPU copy of a %s failed: %s", write ? "WRITE" : "READ", ibex_last_error());
                return false;
            }
            remote += iov[i].iov_len;
        }
        count_map(qp, w.local.total);
        return true;
    }
    if (!remote) {
        // Other memory: one process_vm_* call of ours, when this process may reach the peer
        // (never GPU memory: the target copies that through a bounce buffer).
        if (place_only || gpu || qp.serve_mode != Copy::kCma) return false;
        iovec rem{reinterpret_cast<void *>(static_cast<uintptr_t>(w.remote_addr)), w.local.total};
        if (!cma_all(write, qp.peer_pid, iov, static_cast<unsigned long>(n), &rem, 1, w.local.total)) return false;
        ++qp.ctx->copies.cma_ops;
        qp.ctx->copies.cma_bytes += w.local.total;
        return true;
    }
    if (write) {
        for (int i = 0; i < n; ++i) {
            std::memcpy(remote, iov[i].iov_base, iov[i].iov_len);
            remote += iov[i].iov_len;
        }
    } else {
        w.local.scatter(0, remote, w.local.total);
    }
    count_map(qp, w.local.total);
    return true;
}

bool write_in_place(ShmQp &qp, const ibex_send_wr_t &wr) {
    // The opcode as an int: it is not checked yet (c_enum.h).
    if (c_enum_value(wr.opcode) != IBEX_WR_RDMA_WRITE || wr.num_sge != 1 || !wr.sg_list ||
        (wr.send_flags & IBEX_SEND_INLINE) ||
        qp.state != IBEX_QPS_RTS || !qp.sq.empty() || !qp.gpu_pending.empty() || qp.rnr_until || !qp.peer ||
        (qp.forced && qp.forced != static_cast<uint32_t>(Copy::kMap)))
        return false;
    if (!qp.peer->ready.load(std::memory_order_acquire) || qp.peer->closed.load(std::memory_order_relaxed) ||
        qp.peer->mode.load(std::memory_order_relaxed) == static_cast<uint32_t>(Copy::kRing))
        return false;
    const ibex_sge_t &sge = wr.sg_list[0];
    const uint8_t *src = sge.length ? qp.ctx->mrs.resolve(sge.lkey, sge.addr, sge.length, 0) : nullptr;
    uint64_t alloc = 0, off = 0;
    LaneTarget lane;
    if (!src || !peer_allows(qp, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr, sge.length, IBEX_ACCESS_REMOTE_WRITE, &alloc, &off,
                             &lane) ||
        !alloc || (alloc & kGpuAlloc) || is_gpu(*qp.ctx, src))
        return false;
    uint8_t *dst = peer_mapping(qp, alloc, off, sge.length);
    if (!dst) return false;
    std::memcpy(dst, src, sge.length);
    count_map(qp, sge.length);
    if ((wr.send_flags & IBEX_SEND_SIGNALED) || qp.sig_all)
        complete(qp, qp.scq, wr.wr_id, IBEX_WC_SUCCESS, IBEX_WC_RDMA_WRITE, sge.length);
    // The next WRITE between these two regions may skip the lock (in_place_lane.h): open
    // the lane over both MRs whole, when the peer's MR lies whole in the mapping.
    const ibex_mr *mr = qp.ctx->mrs.find(sge.lkey);
    const uint64_t mr_off = off - (wr.wr.rdma.remote_addr - lane.remote_addr);
    if (uint8_t *base = peer_mapping(qp, alloc, mr_off, lane.remote_len); mr && base) {
        lane.lkey = sge.lkey;
        lane.rkey = wr.wr.rdma.rkey;
        lane.local_addr = reinterpret_cast<uintptr_t>(mr->addr);
        lane.local_len = mr->length;
        lane.remote_base = base;
        lane.peer = qp.peer;
        qp.lane.open(lane);
    }
    return true;
}

ibex_status_t mem_alloc(ibex_pd *pd, size_t size, void **out) {
    ShmContext *ctx = ctx_of(pd);
    const int fd = memfd_create("ibex-shm", MFD_CLOEXEC);
    if (fd < 0) return fail_errno(IBEX_ERR_SYSTEM, errno, "memfd_create");
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
        const int e = errno;
        ::close(fd);
        return fail_errno(IBEX_ERR_NO_MEMORY, e, "ftruncate of a memfd to %zu bytes", size);
    }
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        ::close(fd);
        return fail_errno(IBEX_ERR_NO_MEMORY, e, "mmap of a %zu-byte memfd", size);
    }
    Lock l(ctx->mu);
    ctx->allocs[reinterpret_cast<uintptr_t>(p)] = {ctx->next_alloc++, fd, size};
    *out = p;
    return IBEX_OK;
}

ibex_status_t mem_free(ibex_pd *pd, void *ptr) {
    ShmContext *ctx = ctx_of(pd);
    Alloc a;
    {
        Lock l(ctx->mu);
        auto it = ctx->allocs.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == ctx->allocs.end()) return fail(IBEX_ERR_INVALID_ARGUMENT, "%p is not an shm allocation of this context", ptr);
        a = it->second;
        ctx->allocs.erase(it);
    }
    // Peers keep their mapping (and so the pages) until their context closes; ids are
    // never reused, so a stale mapping is never taken for a new allocation.
    munmap(ptr, a.size);
    ::close(a.fd);
    return IBEX_OK;
}

ibex_status_t rkey_ptr(ibex_qp *q, uint64_t remote_addr, uint32_t rkey, size_t length, unsigned access, void **out) {
    ShmQp *qp = qp_of(q);
    std::unique_lock l(qp->ctx->mu);
    if ((qp->state != IBEX_QPS_RTR && qp->state != IBEX_QPS_RTS) || !qp->peer)
        return fail(IBEX_ERR_INVALID_STATE, "ibex_rkey_ptr: QP %u is not connected (RTR or RTS)", qp->qp_num);
    uint64_t alloc = 0, off = 0;
    if (!peer_allows(*qp, rkey, remote_addr, length, access, &alloc, &off))
        return fail(IBEX_ERR_INVALID_ARGUMENT,
                    "ibex_rkey_ptr: rkey 0x%x does not grant access 0x%x to [0x%llx, +%zu) (key, range or rights), or "
                    "the peer QP is not connected",
                    rkey, access, static_cast<unsigned long long>(remote_addr), length);
    if (!alloc)
        return fail(IBEX_ERR_NOT_SUPPORTED,
                    "ibex_rkey_ptr: the peer's region under rkey 0x%x is not ibex_mem_alloc memory, so it is not mapped "
                    "here (WRITE and READ still reach it)",
                    rkey);
    uint8_t *p = peer_mapping(*qp, alloc, off, length);
    // The fd may still be on its way: the peer offers it again from its progress pass when
    // this context's queue was full, which the miss above has just emptied.
    for (int waited_us = 0; !p && qp->ctx->sock >= 0 && waited_us < kOfferWaitUs; waited_us += 100) {
        l.unlock();
        usleep(100);
        l.lock();
        if (!qp->peer) break;
        p = peer_mapping(*qp, alloc, off, length);
    }
    if (!p)
        return fail(IBEX_ERR_NOT_SUPPORTED,
                    "ibex_rkey_ptr: the peer has not shared the allocation under rkey 0x%x (waited %d ms for its fd)",
                    rkey, kOfferWaitUs / 1000);
    *out = p;
    return IBEX_OK;
}

} // namespace ibex::shm
