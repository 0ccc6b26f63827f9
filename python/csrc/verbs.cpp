// ibex._core, second half: a device context with its protection domain, memory regions,
// completion queues and RC queue pairs, enough to script two endpoints in a test. Each
// object keeps what it was made from alive (QP -> CQ -> context), so Python's collection
// order cannot free a context under a live QP.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/csrc/common.h"

namespace ibex_py {
namespace {

class Context {
public:
    Context(const std::string &device, bool progress_thread) {
        ibex_context_attr_t attr = IBEX_CONTEXT_ATTR_INIT;
        attr.progress_thread = progress_thread ? 1 : 0;
        check(ibex_open_device(device.c_str(), &attr, &ctx_));
        const ibex_status_t status = ibex_alloc_pd(ctx_, &pd_);
        if (status != IBEX_OK) {
            const std::string detail = ibex_last_error(); // before close overwrites it
            (void)ibex_close_device(ctx_);
            ctx_ = nullptr;
            raise_status(status, detail);
        }
    }
    ~Context() {
        if (pd_ != nullptr)
            (void)ibex_dealloc_pd(pd_);
        if (ctx_ != nullptr)
            (void)ibex_close_device(ctx_);
    }
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    ibex_context_t *ctx() const { return ctx_; }
    ibex_pd_t *pd() const { return pd_; }

    py::dict counters() const {
        ibex_counters_t c{};
        c.size = sizeof(c);
        check(ibex_query_counters(ctx_, &c));
        py::dict d;
        d["tx_packets"] = c.tx_packets;
        d["tx_bytes"] = c.tx_bytes;
        d["rx_packets"] = c.rx_packets;
        d["rx_bytes"] = c.rx_bytes;
        d["retransmitted_packets"] = c.retransmitted_packets;
        d["rx_icrc_errors"] = c.rx_icrc_errors;
        return d;
    }

    // ibex_query_device, the MTU in bytes.
    py::dict query_device() const {
        ibex_device_attr_t a{};
        a.size = sizeof(a);
        check(ibex_query_device(ctx_, &a));
        py::dict d;
        d["max_msg_size"] = a.max_msg_size;
        d["max_mtu"] = ibex_mtu_to_bytes(static_cast<ibex_mtu_t>(a.max_mtu));
        d["efficient_msg_bytes"] = a.efficient_msg_bytes;
        return d;
    }

private:
    ibex_context_t *ctx_ = nullptr;
    ibex_pd_t *pd_ = nullptr;
};
using ContextRef = std::shared_ptr<Context>;

class MemoryRegion {
public:
    MemoryRegion(ContextRef ctx, py::handle buffer, unsigned access)
        : ctx_(std::move(ctx)), buffer_(std::make_shared<BorrowedBuffer>(buffer, true)) {
        check(ibex_reg_mr(ctx_->pd(), buffer_->data(), buffer_->bytes(), access, &mr_));
    }
    ~MemoryRegion() {
        if (mr_ != nullptr)
            (void)ibex_dereg_mr(mr_);
    }
    MemoryRegion(const MemoryRegion &) = delete;
    MemoryRegion &operator=(const MemoryRegion &) = delete;

    uint64_t addr() const { return reinterpret_cast<uintptr_t>(buffer_->data()); }
    size_t length() const { return buffer_->bytes(); }
    uint32_t lkey() const { return ibex_mr_lkey(mr_); }
    uint32_t rkey() const { return ibex_mr_rkey(mr_); }

    // The scatter/gather entry for [offset, offset + length) of this region.
    ibex_sge_t sge(size_t offset, std::optional<size_t> length) const {
        const size_t len = length.value_or(this->length() - std::min(offset, this->length()));
        if (offset > this->length() || len > this->length() - offset)
            throw py::value_error("ibex: [offset, offset + length) lies outside the region");
        return ibex_sge_t{addr() + offset, static_cast<uint32_t>(len), lkey()};
    }

private:
    ContextRef ctx_;
    BufferRef buffer_;
    ibex_mr_t *mr_ = nullptr;
};

class CompletionQueue {
public:
    CompletionQueue(ContextRef ctx, int entries) : ctx_(std::move(ctx)) {
        check(ibex_create_cq(ctx_->ctx(), entries, &cq_));
    }
    ~CompletionQueue() {
        if (cq_ != nullptr)
            (void)ibex_destroy_cq(cq_);
    }
    CompletionQueue(const CompletionQueue &) = delete;
    CompletionQueue &operator=(const CompletionQueue &) = delete;

    ibex_cq_t *cq() const { return cq_; }

    // [dict(wr_id, status, opcode, byte_len, imm_data)], at most `max`.
    py::list poll(int max) {
        if (max <= 0)
            throw py::value_error("ibex: poll(max) needs max > 0");
        std::vector<ibex_wc_t> wc(static_cast<size_t>(max));
        int n = 0;
        check(ibex_poll_cq(cq_, max, wc.data(), &n));
        py::list out;
        for (int i = 0; i < n; ++i) {
            py::dict d;
            d["wr_id"] = wc[i].wr_id;
            d["status"] = std::string(ibex_wc_status_str(wc[i].status));
            d["opcode"] = static_cast<int>(wc[i].opcode);
            d["byte_len"] = wc[i].byte_len;
            d["imm_data"] = wc[i].imm_data;
            out.append(d);
        }
        return out;
    }

    // True when a completion is waiting, False after timeout_ms without one.
    bool wait(int timeout_ms) {
        ibex_status_t status;
        {
            py::gil_scoped_release unlocked;
            status = ibex_cq_wait(cq_, timeout_ms);
        }
        if (status == IBEX_ERR_TIMEOUT)
            return false;
        check(status);
        return true;
    }

private:
    ContextRef ctx_;
    ibex_cq_t *cq_ = nullptr;
};
using CqRef = std::shared_ptr<CompletionQueue>;

class QueuePair {
public:
    QueuePair(ContextRef ctx, CqRef send_cq, CqRef recv_cq, uint32_t max_send_wr,
              uint32_t max_recv_wr)
        : ctx_(std::move(ctx)), send_cq_(std::move(send_cq)),
          recv_cq_(recv_cq ? std::move(recv_cq) : send_cq_) {
        ibex_qp_init_attr_t attr = IBEX_QP_INIT_ATTR_INIT;
        attr.send_cq = send_cq_->cq();
        attr.recv_cq = recv_cq_->cq();
        attr.max_send_wr = max_send_wr;
        attr.max_recv_wr = max_recv_wr;
        check(ibex_create_qp(ctx_->pd(), &attr, &qp_));
    }
    ~QueuePair() {
        if (qp_ != nullptr)
            (void)ibex_destroy_qp(qp_);
    }
    QueuePair(const QueuePair &) = delete;
    QueuePair &operator=(const QueuePair &) = delete;

    uint32_t num() const { return ibex_qp_num(qp_); }

    std::string local_addr() const {
        ibex_ep_addr_t addr{};
        check(ibex_qp_local_addr(qp_, &addr));
        char text[IBEX_EP_ADDR_STR_LEN];
        check(ibex_ep_addr_to_string(&addr, text, sizeof(text)));
        return text;
    }

    // ibex_qp_connect_attr: the attributes given (not None) replace ibex's defaults.
    void connect(const std::string &remote, std::optional<int> timeout, std::optional<int> retry_cnt,
                 std::optional<int> rnr_retry, std::optional<int> min_rnr_timer, std::optional<int> max_rd_atomic,
                 std::optional<int> traffic_class, std::optional<int> sl) {
        ibex_ep_addr_t addr{};
        check(ibex_ep_addr_from_string(remote.c_str(), &addr));
        ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
        unsigned mask = 0;
        const auto take = [&](const std::optional<int> &v, const char *name) {
            if (v)
                choose_qp_attr(name, *v, &attr, &mask);
        };
        take(timeout, "timeout");
        take(retry_cnt, "retry_cnt");
        take(rnr_retry, "rnr_retry");
        take(min_rnr_timer, "min_rnr_timer");
        take(max_rd_atomic, "max_rd_atomic");
        take(traffic_class, "traffic_class");
        take(sl, "sl");
        check(ibex_qp_connect_attr(qp_, &addr, &attr, mask));
    }

    py::dict attributes() const {
        ibex_qp_attr_t a = IBEX_QP_ATTR_INIT;
        check(ibex_query_qp(qp_, &a));
        py::dict d;
        d["state"] = static_cast<int>(a.qp_state);
        d["path_mtu"] = ibex_mtu_to_bytes(a.path_mtu);
        d["timeout"] = a.timeout;
        d["retry_cnt"] = a.retry_cnt;
        d["rnr_retry"] = a.rnr_retry;
        d["min_rnr_timer"] = a.min_rnr_timer;
        d["max_rd_atomic"] = a.max_rd_atomic;
        d["traffic_class"] = a.traffic_class;
        d["sl"] = a.sl;
        return d;
    }

    int state() const {
        ibex_qp_attr_t attr = IBEX_QP_ATTR_INIT;
        check(ibex_query_qp(qp_, &attr));
        return static_cast<int>(attr.qp_state);
    }

    void post_send(const MemoryRegion &mr, size_t offset, std::optional<size_t> length,
                   int opcode, uint64_t remote_addr, uint32_t rkey, uint32_t imm,
                   uint64_t wr_id, bool signaled) {
        ibex_sge_t sge = mr.sge(offset, length);
        ibex_send_wr_t wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = static_cast<ibex_wr_opcode_t>(opcode);
        wr.send_flags = signaled ? IBEX_SEND_SIGNALED : 0;
        wr.imm_data = imm;
        wr.wr.rdma.remote_addr = remote_addr;
        wr.wr.rdma.rkey = rkey;
        check(ibex_post_send(qp_, &wr, nullptr));
    }

    void post_recv(const MemoryRegion &mr, size_t offset, std::optional<size_t> length,
                   uint64_t wr_id) {
        ibex_sge_t sge = mr.sge(offset, length);
        ibex_recv_wr_t wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        check(ibex_post_recv(qp_, &wr, nullptr));
    }

private:
    ContextRef ctx_;
    CqRef send_cq_;
    CqRef recv_cq_;
    ibex_qp_t *qp_ = nullptr;
};

} // namespace

void bind_verbs(py::module_ &m) {
    using namespace pybind11::literals;
    m.attr("ACCESS_LOCAL_WRITE") = static_cast<int>(IBEX_ACCESS_LOCAL_WRITE);
    m.attr("ACCESS_REMOTE_WRITE") = static_cast<int>(IBEX_ACCESS_REMOTE_WRITE);
    m.attr("ACCESS_REMOTE_READ") = static_cast<int>(IBEX_ACCESS_REMOTE_READ);
    m.attr("ACCESS_REMOTE_ATOMIC") = static_cast<int>(IBEX_ACCESS_REMOTE_ATOMIC);
    m.attr("WR_RDMA_WRITE") = static_cast<int>(IBEX_WR_RDMA_WRITE);
    m.attr("WR_RDMA_WRITE_WITH_IMM") = static_cast<int>(IBEX_WR_RDMA_WRITE_WITH_IMM);
    m.attr("WR_SEND") = static_cast<int>(IBEX_WR_SEND);
    m.attr("WR_SEND_WITH_IMM") = static_cast<int>(IBEX_WR_SEND_WITH_IMM);
    m.attr("WR_RDMA_READ") = static_cast<int>(IBEX_WR_RDMA_READ);
    m.attr("QPS_RTS") = static_cast<int>(IBEX_QPS_RTS);
    m.attr("QPS_ERR") = static_cast<int>(IBEX_QPS_ERR);

    const unsigned all_access = IBEX_ACCESS_LOCAL_WRITE | IBEX_ACCESS_REMOTE_WRITE |
                                IBEX_ACCESS_REMOTE_READ;

    py::class_<Context, ContextRef>(m, "Context")
        .def(py::init<const std::string &, bool>(), "device"_a = "udp:lo",
             "progress_thread"_a = true)
        .def_property_readonly("device_name",
                               [](const Context &c) {
                                   return std::string(ibex_context_device_name(c.ctx()));
                               })
        .def("counters", &Context::counters)
        .def("query_device", &Context::query_device)
        .def("progress", [](const Context &c) { check(ibex_progress(c.ctx())); })
        .def(
            "reg_mr",
            [](ContextRef self, py::handle buffer, unsigned access) {
                return std::make_shared<MemoryRegion>(std::move(self), buffer, access);
            },
            "buffer"_a, "access"_a = all_access)
        .def(
            "create_cq",
            [](ContextRef self, int entries) {
                return std::make_shared<CompletionQueue>(std::move(self), entries);
            },
            "entries"_a = 256)
        .def(
            "create_qp",
            [](ContextRef self, CqRef cq, CqRef recv_cq, uint32_t max_send_wr,
               uint32_t max_recv_wr) {
                return std::make_shared<QueuePair>(std::move(self), std::move(cq),
                                                   std::move(recv_cq), max_send_wr, max_recv_wr);
            },
            "cq"_a, "recv_cq"_a = nullptr, "max_send_wr"_a = 0, "max_recv_wr"_a = 0);

    py::class_<MemoryRegion, std::shared_ptr<MemoryRegion>>(m, "MemoryRegion")
        .def_property_readonly("addr", &MemoryRegion::addr)
        .def_property_readonly("length", &MemoryRegion::length)
        .def_property_readonly("lkey", &MemoryRegion::lkey)
        .def_property_readonly("rkey", &MemoryRegion::rkey);

    py::class_<CompletionQueue, CqRef>(m, "CompletionQueue")
        .def("poll", &CompletionQueue::poll, "max"_a = 16)
        .def("wait", &CompletionQueue::wait, "timeout_ms"_a = -1);

    py::class_<QueuePair, std::shared_ptr<QueuePair>>(m, "QueuePair")
        .def_property_readonly("num", &QueuePair::num)
        .def_property_readonly("state", &QueuePair::state)
        .def("local_addr", &QueuePair::local_addr)
        .def("connect", &QueuePair::connect, "remote"_a, py::kw_only(), "timeout"_a = py::none(),
             "retry_cnt"_a = py::none(), "rnr_retry"_a = py::none(), "min_rnr_timer"_a = py::none(),
             "max_rd_atomic"_a = py::none(), "traffic_class"_a = py::none(), "sl"_a = py::none())
        .def("attributes", &QueuePair::attributes)
        .def("post_send", &QueuePair::post_send, "mr"_a, "offset"_a = 0,
             "length"_a = py::none(), "opcode"_a = static_cast<int>(IBEX_WR_SEND),
             "remote_addr"_a = 0, "rkey"_a = 0, "imm"_a = 0, "wr_id"_a = 0,
             "signaled"_a = true)
        .def("post_recv", &QueuePair::post_recv, "mr"_a, "offset"_a = 0,
             "length"_a = py::none(), "wr_id"_a = 0);
}

} // namespace ibex_py
