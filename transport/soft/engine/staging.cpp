#include "transport/soft/engine/staging.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/base/cuda_memory.h"
#include "runtime/base/log.h"
#include "runtime/base/status.h"
#include "transport/soft/engine/context.h"
#include "transport/soft/engine/objects.h"

namespace ibex::soft::staging {
namespace {

// A local buffer (receive buffer, READ/atomic destination) in a shadow: copied to the GPU
// once the WQE at `pos` of its queue has retired.
struct Pending {
    bool recv = false;
    uint64_t pos = 0;
    SoftMr *mr = nullptr;
    uint64_t off = 0;
    uint64_t len = 0;
};

// An outgoing WQE whose GPU -> shadow copies are still running.
struct Gate {
    uint64_t pos;
    cuda::CopyFence fence;
};

struct ContextState {
    std::vector<SoftMr *> mrs;
    std::unordered_map<SoftQp *, std::deque<Pending>> pending;
    std::unordered_map<const SoftQp *, std::deque<Gate>> gates; // by SQ position
};

std::atomic<int> g_regions{0};
std::mutex g_mutex; // g_state; taken inside context locks, never around them
std::unordered_map<const SoftContext *, ContextState> g_state;

uint8_t *device_addr(const SoftMr &mr, uint64_t off) { return static_cast<uint8_t *>(mr.addr) + off; }

void add_dirty(SoftMr &mr, uint64_t off, uint64_t len) { add_range(mr.dirty, off, len); }

ibex_status_t to_gpu(SoftMr &mr, uint64_t off, uint64_t len) {
    return cuda::copy_async(device_addr(mr, off), mr.host + off, len, mr.device);
}

SoftMr *staged_mr(SoftContext &ctx, uint32_t lkey) {
    auto *mr = static_cast<SoftMr *>(ctx.mrs().find(lkey));
    return mr && mr->host ? mr : nullptr;
}

} // namespace

bool active() { return g_regions.load(std::memory_order_relaxed) > 0; }

void add_range(std::vector<std::pair<uint64_t, uint64_t>> &d, uint64_t off, uint64_t len) {
    if (!len) return;
    uint64_t lo = off, hi = off + len;
    for (size_t i = 0; i < d.size();) {
        if (d[i].first <= hi && lo <= d[i].first + d[i].second) {
            lo = std::min(lo, d[i].first);
            hi = std::max(hi, d[i].first + d[i].second);
            d[i] = d.back();
            d.pop_back();
        } else {
            ++i;
        }
    }
    d.emplace_back(lo, hi - lo);
}

ibex_status_t attach(SoftContext &ctx, SoftMr &mr) {
    if (cuda::memory_kind(mr.addr) != cuda::MemoryKind::kDevice) {
        // The type is decided where the region starts: a region that ends in GPU memory
        // would get no shadow and the engine would read the GPU addresses itself.
        const void *last = static_cast<const uint8_t *>(mr.addr) + (mr.length ? mr.length - 1 : 0);
        if (cuda::is_device_pointer(last))
            return fail(IBEX_ERR_INVALID_ARGUMENT,
                        "memory region %p (+%zu) starts in host memory and ends in GPU memory: register the GPU buffer "
                        "on its own",
                        mr.addr, mr.length);
        return IBEX_OK;
    }
    mr.device = cuda::pointer_device(mr.addr);
    mr.host = static_cast<uint8_t *>(cuda::alloc_pinned(mr.length));
    if (!mr.host) {
        const std::string why = ibex_last_error(); // fail() rewrites that buffer
        return fail(IBEX_ERR_NO_MEMORY, "GPU region %p (+%zu): no pinned staging memory: %s", mr.addr, mr.length,
                    why.c_str());
    }
    std::lock_guard<std::mutex> l(g_mutex);
    g_state[&ctx].mrs.push_back(&mr);
    g_regions.fetch_add(1, std::memory_order_relaxed);
    return IBEX_OK;
}

void detach(SoftContext &ctx, SoftMr &mr) {
    if (!mr.host) return;
    for (auto [off, len] : mr.dirty) to_gpu(mr, off, len);
    mr.dirty.clear();
    if (cuda::wait_copies() != IBEX_OK) IBEX_LOG(error, "GPU region %p: final copy failed: %s", mr.addr, ibex_last_error());
    {
        std::lock_guard<std::mutex> l(g_mutex);
        auto it = g_state.find(&ctx);
        if (it != g_state.end()) {
            ContextState &st = it->second;
            st.mrs.erase(std::remove(st.mrs.begin(), st.mrs.end(), &mr), st.mrs.end());
            for (auto &[qp, dq] : st.pending)
                dq.erase(std::remove_if(dq.begin(), dq.end(), [&](const Pending &p) { return p.mr == &mr; }), dq.end());
            if (st.mrs.empty()) g_state.erase(it);
        }
        g_regions.fetch_sub(1, std::memory_order_relaxed);
    }
    cuda::free_pinned(mr.host);
    mr.host = nullptr;
}

uint8_t *resolve(SoftMr &mr, uint64_t addr, uint64_t len, unsigned access) {
    const uint64_t off = addr - reinterpret_cast<uintptr_t>(mr.addr);
    uint8_t *p = mr.host + off;
    if (len && (access & (IBEX_ACCESS_REMOTE_READ | IBEX_ACCESS_REMOTE_ATOMIC))) {
        if (cuda::copy_async(p, device_addr(mr, off), len, mr.device) != IBEX_OK || cuda::wait_copies() != IBEX_OK) {
            IBEX_LOG(error, "GPU region %p: staging a remote read failed: %s", mr.addr, ibex_last_error());
            return nullptr;
        }
    }
    if (access & (IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_ATOMIC)) add_dirty(mr, off, len);
    return p;
}

ibex_status_t check_inline(const ibex_send_wr_t &wr) {
    for (int i = 0; i < wr.num_sge; ++i)
        if (wr.sg_list[i].length && cuda::is_device_pointer(reinterpret_cast<const void *>(wr.sg_list[i].addr)))
            return fail(IBEX_ERR_INVALID_ARGUMENT, "sge %d: inline data must be host memory (0x%llx is on the GPU)", i,
                        static_cast<unsigned long long>(wr.sg_list[i].addr));
    return IBEX_OK;
}

ibex_status_t stage_send(SoftContext &ctx, SoftQp &qp, const ibex_send_wr_t &wr, uint64_t sq_pos) {
    const bool inbound = wr.opcode == IBEX_WR_RDMA_READ || wr.opcode == IBEX_WR_ATOMIC_CMP_AND_SWP ||
                         wr.opcode == IBEX_WR_ATOMIC_FETCH_AND_ADD;
    if ((wr.send_flags & IBEX_SEND_INLINE) && !inbound) return IBEX_OK; // copied from host memory already
    bool copied = false;
    for (int i = 0; i < wr.num_sge; ++i) {
        const ibex_sge_t &s = wr.sg_list[i];
        SoftMr *mr = s.length ? staged_mr(ctx, s.lkey) : nullptr;
        if (!mr) continue;
        const uint64_t off = s.addr - reinterpret_cast<uintptr_t>(mr->addr);
        if (!inbound) {
            if (ibex_status_t st = cuda::copy_async(mr->host + off, device_addr(*mr, off), s.length, mr->device); st != IBEX_OK)
                return st;
            copied = true;
            continue;
        }
        std::lock_guard<std::mutex> l(g_mutex);
        g_state[&ctx].pending[&qp].push_back({false, sq_pos, mr, off, s.length});
    }
    if (!copied) return IBEX_OK;
    cuda::CopyFence f;
    IBEX_TRY(cuda::fence_copies(&f));
    if (f.empty()) return IBEX_OK; // the copies are done already
    std::lock_guard<std::mutex> l(g_mutex);
    g_state[&ctx].gates[&qp].push_back({sq_pos, f});
    return IBEX_OK;
}

bool send_ready(SoftContext &ctx, SoftQp &qp, uint64_t sq_pos) {
    std::lock_guard<std::mutex> l(g_mutex);
    auto it = g_state.find(&ctx);
    if (it == g_state.end()) return true;
    auto g = it->second.gates.find(&qp);
    if (g == it->second.gates.end()) return true;
    std::deque<Gate> &dq = g->second;
    // In SQ order: every gate up to sq_pos must be open.
    while (!dq.empty() && dq.front().pos <= sq_pos) {
        if (!cuda::copies_done(dq.front().fence)) return false;
        dq.pop_front();
    }
    if (dq.empty()) it->second.gates.erase(g);
    return true;
}

bool send_gated(const SoftContext &ctx, const SoftQp &qp) {
    std::lock_guard<std::mutex> l(g_mutex);
    auto it = g_state.find(&ctx);
    return it != g_state.end() && it->second.gates.count(&qp);
}

void stage_recv(SoftContext &ctx, SoftQp &qp, const ibex_recv_wr_t &wr, uint64_t rq_pos) {
    for (int i = 0; i < wr.num_sge; ++i) {
        const ibex_sge_t &s = wr.sg_list[i];
        SoftMr *mr = s.length ? staged_mr(ctx, s.lkey) : nullptr;
        if (!mr) continue;
        std::lock_guard<std::mutex> l(g_mutex);
        g_state[&ctx].pending[&qp].push_back({true, rq_pos, mr, s.addr - reinterpret_cast<uintptr_t>(mr->addr), s.length});
    }
}

ibex_status_t flush(SoftContext &ctx) {
    ibex_status_t st = IBEX_OK;
    auto keep = [&st](ibex_status_t s) {
        if (st == IBEX_OK) st = s;
    };
    {
        std::lock_guard<std::mutex> l(g_mutex);
        auto it = g_state.find(&ctx);
        if (it == g_state.end()) return IBEX_OK;
        ContextState &cs = it->second;
        for (SoftMr *mr : cs.mrs) {
            for (auto [off, len] : mr->dirty) keep(to_gpu(*mr, off, len));
            mr->dirty.clear();
        }
        // A WRITE still arriving keeps landing in its range after this flush: the range
        // stays dirty until the message is complete.
        for (SoftQp *qp : ctx.qps()) {
            if (!qp || qp->in_msg != SoftQp::InMsg::kWrite || !qp->in_write) continue;
            for (SoftMr *mr : cs.mrs)
                if (qp->in_write >= mr->host && qp->in_write < mr->host + mr->length) {
                    add_dirty(*mr, uint64_t(qp->in_write - mr->host), qp->in_write_len);
                    break;
                }
        }
        for (auto &[qp, dq] : cs.pending) {
            while (!dq.empty()) {
                const Pending &p = dq.front();
                if (p.pos >= (p.recv ? qp->rq.head() : qp->sq.head())) break; // not retired yet
                keep(to_gpu(*p.mr, p.off, p.len));
                dq.pop_front();
            }
        }
    }
    keep(cuda::wait_copies());
    return st;
}

void forget_qp(SoftContext &ctx, SoftQp &qp) {
    if (!active()) return;
    std::lock_guard<std::mutex> l(g_mutex);
    auto it = g_state.find(&ctx);
    if (it == g_state.end()) return;
    it->second.pending.erase(&qp);
    if (auto g = it->second.gates.find(&qp); g != it->second.gates.end()) {
        for (Gate &gate : g->second) cuda::drop_fence(gate.fence);
        it->second.gates.erase(g);
    }
}

} // namespace ibex::soft::staging
