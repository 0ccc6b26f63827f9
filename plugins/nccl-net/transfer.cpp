// Registration and the data path: isend / irecv / test / iflush and the closes. The
// protocol (CTS from the receiver, RDMA WRITE + FIN from the sender) is described in
// state.h. Progress happens inside these calls, by polling the comm's CQ.
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "plugins/nccl-net/state.h"

namespace ibex_nccl {
namespace {

// wr_id of control work: a low byte no handle kind uses, the slot above it.
constexpr uint64_t kCtsReceive = 0x81;
constexpr uint64_t kFinReceive = 0x82;
constexpr uint64_t kCtsSend = 0x83;
constexpr uint64_t control_id(uint64_t kind, uint64_t slot) { return (slot << 8) | kind; }

uint64_t addr_of(const void *p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

ncclResult_t post_receive(Comm &c, void *buf, uint32_t len, uint64_t wr_id) {
    ibex_sge_t sge{addr_of(buf), len, ibex_mr_lkey(c.control_mr)};
    ibex_recv_wr_t wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibex_post_recv(c.qp, &wr, nullptr) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : post_recv: %s", ibex_last_error());
        return ncclSystemError;
    }
    return ncclSuccess;
}

void fail_comm(Comm &c, const std::string &why) {
    if (!c.failed)
        IBEX_NCCL_WARN("NET/IBEX : %s comm failed: %s", c.is_send ? "send" : "receive", why.c_str());
    c.failed = true;
    c.failure = why;
}

// Memory `handle` must cover [data, data + size).
Memory *covering(void *handle, const void *data, size_t size) {
    Memory *m = plugin().memory.get(handle);
    if (m == nullptr || addr_of(data) < m->addr || addr_of(data) + size > m->addr + m->size)
        return nullptr;
    return m;
}

void on_completion(Comm &c, const ibex_wc_t &wc) {
    Plugin &p = plugin();
    if (wc.status != IBEX_WC_SUCCESS) {
        fail_comm(c, std::string("completion error ") + ibex_wc_status_str(wc.status));
        return;
    }
    const uint64_t kind = wc.wr_id & 0xff;
    const uint64_t slot = wc.wr_id >> 8;
    if (kind == kCtsReceive) { // sender: a receive was posted on the other side
        const CtsMessage &m = c.control->cts[slot];
        const uint32_t at = static_cast<uint32_t>(m.seq % kCtsSlots);
        if (m.n < 1 || m.n > kMaxRecvs || m.seq < c.send_head || c.cts_ready[at]) {
            fail_comm(c, "malformed CTS from the receiver");
            return;
        }
        if (at != slot) // keep the CTS where its seq says (slots are reused in seq order)
            std::memcpy(&c.control->cts[at], &m, sizeof(m));
        c.cts_ready[at] = true;
        return;
    }
    if (kind == kFinReceive) { // receiver: one isend landed
        const FinMessage m = c.control->fin[slot];
        (void)post_receive(c, &c.control->fin[slot], sizeof(FinMessage), wc.wr_id);
        void *rh = c.recv_requests[m.seq % kCtsSlots];
        Request *r = rh != nullptr ? p.requests.get(rh) : nullptr;
        if (r == nullptr || m.index >= static_cast<uint32_t>(r->n)) {
            fail_comm(c, "FIN for no receive in flight");
            return;
        }
        r->sizes[m.index] = m.size;
        if (++r->received == r->n) {
            r->done = true;
            c.recv_requests[m.seq % kCtsSlots] = nullptr;
        }
        return;
    }
    if (kind == kCtsSend)
        return;
    // An isend's FIN went out (after its data): the send is complete.
    if (Request *r = p.requests.get(reinterpret_cast<void *>(static_cast<uintptr_t>(wc.wr_id))))
        r->done = true;
    --c.sends_in_flight;
}

void progress(Comm &c) {
    ibex_wc_t wc[32];
    for (int round = 0; round < 8 && !c.failed; ++round) {
        int n = 0;
        if (ibex_poll_cq(c.cq, 32, wc, &n) != IBEX_OK) {
            fail_comm(c, std::string("poll_cq: ") + ibex_last_error());
            return;
        }
        for (int i = 0; i < n; ++i)
            on_completion(c, wc[i]);
        if (n < 32)
            return;
    }
}

// The sender's CTS slots were filled where they arrived; repost the ones consumed.
ncclResult_t repost_cts_slot(Comm &c, uint32_t slot) {
    return post_receive(c, &c.control->cts[slot], sizeof(CtsMessage), control_id(kCtsReceive, slot));
}

} // namespace

ncclResult_t create_comm_resources(Comm &c) {
    ibex_context_t *ctx = nullptr;
    ibex_pd_t *pd = device_pd(c.dev, &ctx);
    if (pd == nullptr)
        return ncclInvalidArgument;
    c.control = static_cast<ControlBlock *>(std::aligned_alloc(4096, (sizeof(ControlBlock) + 4095) / 4096 * 4096));
    if (c.control == nullptr)
        return ncclSystemError;
    std::memset(c.control, 0, sizeof(ControlBlock));
    ibex_qp_init_attr_t qa = IBEX_QP_INIT_ATTR_INIT;
    if (ibex_reg_mr(pd, c.control, sizeof(ControlBlock), IBEX_ACCESS_LOCAL_WRITE, &c.control_mr) != IBEX_OK ||
        ibex_create_cq(ctx, 4096, &c.cq) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : comm resources: %s", ibex_last_error());
        return ncclSystemError;
    }
    qa.send_cq = qa.recv_cq = c.cq;
    qa.max_send_wr = 2 * kMaxSends + kCtsSlots;
    qa.max_recv_wr = kFinSlots;
    if (ibex_create_qp(pd, &qa, &c.qp) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : create_qp: %s", ibex_last_error());
        return ncclSystemError;
    }
    return ncclSuccess;
}

ncclResult_t post_control_receives(Comm &c) {
    if (c.is_send) {
        for (uint32_t s = 0; s < kCtsSlots; ++s)
            if (repost_cts_slot(c, s) != ncclSuccess)
                return ncclSystemError;
        return ncclSuccess;
    }
    for (uint32_t s = 0; s < kFinSlots; ++s)
        if (post_receive(c, &c.control->fin[s], sizeof(FinMessage), control_id(kFinReceive, s)) != ncclSuccess)
            return ncclSystemError;
    return ncclSuccess;
}

void release_comm(Comm &c, void *handle) {
    Plugin &p = plugin();
    if (c.fd >= 0)
        close(c.fd);
    if (c.qp != nullptr)
        (void)ibex_destroy_qp(c.qp);
    if (c.cq != nullptr)
        (void)ibex_destroy_cq(c.cq);
    if (c.control_mr != nullptr)
        (void)ibex_dereg_mr(c.control_mr);
    std::free(c.control);
    c = Comm{};
    // Requests of a closed comm: their handles go stale (test() then returns an error).
    p.requests.for_each([&](void *rh, Request &r) {
        if (r.comm == handle)
            p.requests.remove(rh);
    });
}

ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
    if (mhandle == nullptr || (data == nullptr && size > 0))
        return ncclInvalidArgument;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    Comm *c = p.sends.get(comm);
    if (c == nullptr)
        c = p.recvs.get(comm);
    if (c == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : regMr: stale or invalid comm %p", comm);
        return ncclInvalidArgument;
    }
    if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
        IBEX_NCCL_WARN("NET/IBEX : regMr: pointer type %d is neither host nor CUDA", type);
        return ncclInvalidArgument;
    }
    ibex_pd_t *pd = device_pd(c->dev, nullptr);
    auto [h, m] = p.memory.add();
    if (h == nullptr || pd == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : regMr: too many registrations");
        return ncclSystemError;
    }
    const unsigned access = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE | IBEX_ACCESS_REMOTE_READ;
    if (ibex_reg_mr(pd, data, size, access, &m->mr) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : regMr of %zu bytes at %p: %s", size, data, ibex_last_error());
        p.memory.remove(h);
        return ncclSystemError;
    }
    m->addr = addr_of(data);
    m->size = size;
    m->lkey = ibex_mr_lkey(m->mr);
    m->rkey = ibex_mr_rkey(m->mr);
    *mhandle = h;
    return ncclSuccess;
}

ncclResult_t dereg_mr(void * /*comm*/, void *mhandle) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    Memory *m = plugin().memory.get(mhandle);
    if (m == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : deregMr: stale or invalid memory handle %p", mhandle);
        return ncclInvalidArgument;
    }
    (void)ibex_dereg_mr(m->mr);
    plugin().memory.remove(mhandle);
    return ncclSuccess;
}

ncclResult_t isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request) {
    if (request == nullptr)
        return ncclInvalidArgument;
    *request = nullptr;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    Comm *c = p.sends.get(send_comm);
    if (c == nullptr || c->step != SetupStep::Done) {
        IBEX_NCCL_WARN("NET/IBEX : isend: stale or invalid send comm %p", send_comm);
        return ncclInvalidArgument;
    }
    Memory *m = size > 0 ? covering(mhandle, data, size) : nullptr;
    if (size > 0 && m == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : isend: memory handle %p does not cover %zu bytes at %p", mhandle, size, data);
        return ncclInvalidArgument;
    }
    progress(*c);
    if (c->failed)
        return ncclRemoteError;
    const uint32_t at = static_cast<uint32_t>(c->send_head % kCtsSlots);
    if (!c->cts_ready[at] || c->sends_in_flight >= kMaxSends)
        return ncclSuccess; // no matching receive posted yet: NCCL calls again
    const CtsMessage &cts = c->control->cts[at];
    int index = -1;
    for (int i = 0; i < cts.n && index < 0; ++i)
        if (cts.entries[i].tag == tag && (c->entries_used[at] & (1u << i)) == 0)
            index = i;
    if (index < 0)
        return ncclSuccess;
    const CtsMessage::Entry &e = cts.entries[index];
    if (size > e.size) {
        IBEX_NCCL_WARN("NET/IBEX : isend of %zu bytes (tag %d) into a receive of %llu bytes", size, tag,
                       static_cast<unsigned long long>(e.size));
        return ncclInvalidUsage;
    }
    auto [rh, r] = p.requests.add();
    if (rh == nullptr)
        return ncclSuccess; // every request slot busy: try again after some complete
    r->kind = RequestKind::Send;
    r->comm = send_comm;
    r->n = 1;
    r->sizes[0] = size;

    FinMessage &fin = c->control->fin_send[c->fin_counter++ % kMaxSends];
    fin = FinMessage{cts.seq, static_cast<uint32_t>(index), 0, size};
    ibex_sge_t data_sge{addr_of(data), static_cast<uint32_t>(size), m != nullptr ? m->lkey : 0};
    ibex_sge_t fin_sge{addr_of(&fin), sizeof(FinMessage), ibex_mr_lkey(c->control_mr)};
    ibex_send_wr_t wr[2]{};
    wr[0].wr_id = 0;
    wr[0].sg_list = &data_sge;
    wr[0].num_sge = 1;
    wr[0].opcode = IBEX_WR_RDMA_WRITE;
    wr[0].wr.rdma.remote_addr = e.addr;
    wr[0].wr.rdma.rkey = e.rkey;
    wr[0].next = &wr[1];
    wr[1].wr_id = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rh));
    wr[1].sg_list = &fin_sge;
    wr[1].num_sge = 1;
    wr[1].opcode = IBEX_WR_SEND;
    wr[1].send_flags = IBEX_SEND_SIGNALED;
    if (ibex_post_send(c->qp, size > 0 ? &wr[0] : &wr[1], nullptr) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : isend: post_send: %s", ibex_last_error());
        p.requests.remove(rh);
        return ncclSystemError;
    }
    ++c->sends_in_flight;
    c->entries_used[at] |= static_cast<uint8_t>(1u << index);
    if (c->entries_used[at] == (1u << cts.n) - 1) { // every receive of the group sent
        c->cts_ready[at] = false;
        c->entries_used[at] = 0;
        ++c->send_head;
        if (repost_cts_slot(*c, at) != ncclSuccess)
            fail_comm(*c, "reposting a CTS slot");
    }
    *request = rh;
    return ncclSuccess;
}

ncclResult_t irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
                   void **mhandles, void **request) {
    if (request == nullptr || data == nullptr || sizes == nullptr || tags == nullptr)
        return ncclInvalidArgument;
    *request = nullptr;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    Comm *c = p.recvs.get(recv_comm);
    if (c == nullptr || c->step != SetupStep::Done) {
        IBEX_NCCL_WARN("NET/IBEX : irecv: stale or invalid receive comm %p", recv_comm);
        return ncclInvalidArgument;
    }
    if (n < 1 || n > kMaxRecvs) {
        IBEX_NCCL_WARN("NET/IBEX : irecv: %d receives grouped, at most %d", n, kMaxRecvs);
        return ncclInvalidArgument;
    }
    progress(*c);
    if (c->failed)
        return ncclRemoteError;
    const uint32_t at = static_cast<uint32_t>(c->recv_seq % kCtsSlots);
    if (c->recv_requests[at] != nullptr)
        return ncclSuccess; // kCtsSlots receives in flight: NCCL calls again
    CtsMessage &cts = c->control->cts[at];
    cts = CtsMessage{};
    cts.seq = c->recv_seq;
    cts.n = n;
    for (int i = 0; i < n; ++i) {
        Memory *m = sizes[i] > 0 ? covering(mhandles != nullptr ? mhandles[i] : nullptr, data[i], sizes[i]) : nullptr;
        if (sizes[i] > 0 && m == nullptr) {
            IBEX_NCCL_WARN("NET/IBEX : irecv: memory handle of receive %d does not cover %zu bytes at %p", i,
                           sizes[i], data[i]);
            return ncclInvalidArgument;
        }
        cts.entries[i] = {addr_of(data[i]), sizes[i], m != nullptr ? m->rkey : 0, tags[i]};
    }
    auto [rh, r] = p.requests.add();
    if (rh == nullptr)
        return ncclSuccess;
    r->kind = RequestKind::Recv;
    r->comm = recv_comm;
    r->n = n;
    ibex_sge_t sge{addr_of(&cts), sizeof(CtsMessage), ibex_mr_lkey(c->control_mr)};
    ibex_send_wr_t wr{};
    wr.wr_id = control_id(kCtsSend, at);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBEX_WR_SEND;
    wr.send_flags = IBEX_SEND_SIGNALED;
    if (ibex_post_send(c->qp, &wr, nullptr) != IBEX_OK) {
        IBEX_NCCL_WARN("NET/IBEX : irecv: post_send: %s", ibex_last_error());
        p.requests.remove(rh);
        return ncclSystemError;
    }
    c->recv_requests[at] = rh;
    ++c->recv_seq;
    *request = rh;
    return ncclSuccess;
}

ncclResult_t iflush(void *recv_comm, int /*n*/, void **request) {
    if (request == nullptr)
        return ncclInvalidArgument;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    if (p.recvs.get(recv_comm) == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : iflush: stale or invalid receive comm %p", recv_comm);
        return ncclInvalidArgument;
    }
    // Received data is in place when its FIN arrives: host memory directly, CUDA memory
    // through ibex's staging copy, which has finished by then. Nothing is left to flush.
    auto [rh, r] = p.requests.add();
    if (rh == nullptr)
        return ncclSystemError;
    r->kind = RequestKind::Flush;
    r->comm = recv_comm;
    r->done = true;
    *request = rh;
    return ncclSuccess;
}

ncclResult_t test(void *request, int *done, int *sizes) {
    if (done == nullptr)
        return ncclInvalidArgument;
    *done = 0;
    std::lock_guard<std::mutex> lock(plugin().mu);
    Plugin &p = plugin();
    Request *r = p.requests.get(request);
    if (r == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : test: stale or invalid request %p", request);
        return ncclInvalidArgument;
    }
    Comm *c = r->kind == RequestKind::Send ? p.sends.get(r->comm) : p.recvs.get(r->comm);
    if (c != nullptr && !r->done)
        progress(*c);
    if (c != nullptr && c->failed && !r->done) {
        p.requests.remove(request);
        return ncclRemoteError;
    }
    if (!r->done)
        return ncclSuccess;
    *done = 1;
    if (sizes != nullptr && r->kind != RequestKind::Flush)
        for (int i = 0; i < r->n; ++i)
            sizes[i] = static_cast<int>(r->sizes[i]);
    p.requests.remove(request);
    return ncclSuccess;
}

namespace {

ncclResult_t close_comm(HandleTable<Comm> &table, void *comm, const char *call) {
    std::lock_guard<std::mutex> lock(plugin().mu);
    Comm *c = table.get(comm);
    if (c == nullptr) {
        IBEX_NCCL_WARN("NET/IBEX : %s: stale or invalid comm %p", call, comm);
        return ncclInvalidArgument;
    }
    release_comm(*c, comm);
    table.remove(comm);
    return ncclSuccess;
}

} // namespace

ncclResult_t close_send(void *send_comm) { return close_comm(plugin().sends, send_comm, "closeSend"); }

ncclResult_t close_recv(void *recv_comm) { return close_comm(plugin().recvs, recv_comm, "closeRecv"); }

} // namespace ibex_nccl
