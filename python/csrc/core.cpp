// ibex._core: the C API's communicators and collectives for Python, and the module itself.
// Errors and borrowed buffers are in common.cpp; device, memory and QP objects in verbs.cpp.
#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/csrc/common.h"

namespace ibex_py {

namespace {

class Comm;

// An operation in flight: keeps its buffers and communicator alive until it finished.
class Request {
public:
    Request(ibex_request_t *req, std::vector<BufferRef> buffers, std::shared_ptr<Comm> comm)
        : req_(req), buffers_(std::move(buffers)), comm_(std::move(comm)) {}
    ~Request() {
        if (req_ != nullptr) {
            py::gil_scoped_release unlocked;
            (void)ibex_wait(req_); // the buffers must outlive the transfer
        }
    }
    Request(const Request &) = delete;
    Request &operator=(const Request &) = delete;

    bool test() {
        if (req_ == nullptr)
            return report_settled();
        int done = 0;
        const ibex_status_t status = ibex_test(req_, &done);
        if (done != 0 || status != IBEX_OK)
            finish();
        check(status);
        return done != 0;
    }

    void wait() {
        if (req_ == nullptr) {
            report_settled();
            return;
        }
        ibex_status_t status;
        {
            py::gil_scoped_release unlocked;
            status = ibex_wait(req_);
        }
        finish();
        check(status);
    }

    // The communicator is going away: the C request will not outlive it. destroy waits
    // for it (keeping its status for a later wait), abort abandons it.
    void settle(bool wait_for_it) {
        if (req_ == nullptr)
            return;
        if (wait_for_it) {
            py::gil_scoped_release unlocked;
            settled_ = ibex_wait(req_);
            settled_detail_ = ibex_last_error();
        } else {
            settled_ = IBEX_ERR_INVALID_STATE;
            settled_detail_ = "the communicator was aborted before this request finished";
        }
        finish();
    }

private:
    void finish() {
        req_ = nullptr;
        buffers_.clear();
    }

    bool report_settled() {
        if (settled_ != IBEX_OK)
            raise_status(std::exchange(settled_, IBEX_OK), settled_detail_);
        return true;
    }

    ibex_status_t settled_ = IBEX_OK;
    std::string settled_detail_;
    ibex_request_t *req_;
    std::vector<BufferRef> buffers_;
    std::shared_ptr<Comm> comm_;
};

// What Comm(...) and Comm.from_env(...) pass to ibex: the strings and the QP choice stay
// with this object, which outlives the init call.
struct CommConfig {
    CommConfig(std::optional<std::string> device_, int timeout_ms, std::optional<std::string> algo_,
               const std::optional<py::dict> &qp)
        : device(std::move(device_)), algo(std::move(algo_)) {
        config.device = device ? device->c_str() : nullptr;
        config.timeout_ms = timeout_ms;
        config.algo = algo ? algo->c_str() : nullptr;
        if (qp) {
            for (const auto &[key, value] : *qp) {
                const std::string name = py::str(key);
                if (!py::isinstance<py::int_>(value) || py::isinstance<py::bool_>(value))
                    raise(PyExc_TypeError, "ibex: qp[\"" + name + "\"] must be an int");
                choose_qp_attr(name, value.cast<long long>(), &qp_attr, &config.qp_attr_mask);
            }
            config.qp_attr = &qp_attr;
        }
    }
    CommConfig(const CommConfig &) = delete;
    CommConfig &operator=(const CommConfig &) = delete;

    std::optional<std::string> device, algo;
    ibex_qp_attr_t qp_attr = IBEX_QP_ATTR_INIT;
    ibex_comm_config_t config = IBEX_COMM_CONFIG_INIT;
};

// The C communicator, destroyed with the last of its owners: its Comm, and every buffer
// from its mem_alloc (ibex_comm_destroy frees that memory, so it waits for them).
struct CommHandle {
    explicit CommHandle(ibex_comm_t *c) : comm(c) {}
    ~CommHandle() {
        if (comm != nullptr) {
            py::gil_scoped_release unlocked;
            (void)ibex_comm_destroy(comm);
        }
    }
    CommHandle(const CommHandle &) = delete;
    CommHandle &operator=(const CommHandle &) = delete;
    ibex_comm_t *comm; // nullptr once destroyed or aborted
};

// Memory from ibex_comm_mem_alloc, writable bytes through the buffer protocol: NumPy
// (np.frombuffer) and torch (torch.frombuffer) arrays over it pass it to the collectives
// in place, so ranks of one host read and write each other's buffers with no staging copy.
// Freed when the last Python object over it goes (an array keeps its buffer alive).
class CommBuffer {
public:
    CommBuffer(std::shared_ptr<CommHandle> owner, size_t bytes) : owner_(std::move(owner)), bytes_(bytes) {
        if (bytes == 0)
            raise(PyExc_ValueError, "ibex: mem_alloc of 0 bytes");
        check(ibex_comm_mem_alloc(owner_->comm, bytes, &ptr_));
    }
    ~CommBuffer() {
        if (ptr_ != nullptr && owner_->comm != nullptr)
            (void)ibex_comm_mem_free(owner_->comm, ptr_);
    }
    CommBuffer(const CommBuffer &) = delete;
    CommBuffer &operator=(const CommBuffer &) = delete;

    // Empty once the communicator was aborted (its memory went with it): pybind11 cannot
    // raise from here, and an empty buffer cannot reach freed memory.
    py::buffer_info info() const {
        static uint8_t nothing;
        const bool gone = owner_->comm == nullptr;
        return py::buffer_info(gone ? &nothing : ptr_, 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(nbytes())}, {1}, false);
    }
    size_t nbytes() const { return owner_->comm == nullptr ? 0 : bytes_; }
    uintptr_t address() const {
        if (owner_->comm == nullptr)
            raise(PyExc_ValueError, "ibex: the communicator was aborted, and its memory with it");
        return reinterpret_cast<uintptr_t>(ptr_);
    }

private:

    std::shared_ptr<CommHandle> owner_;
    size_t bytes_;
    void *ptr_ = nullptr;
};

class Comm : public std::enable_shared_from_this<Comm> {
public:
    explicit Comm(ibex_comm_t *comm) : comm_(comm), owner_(std::make_shared<CommHandle>(comm)) {}
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    static std::shared_ptr<Comm> create(int nranks, const std::string &id, int rank,
                                        std::optional<std::string> device, int timeout_ms,
                                        std::optional<std::string> algo, std::optional<py::dict> qp) {
        ibex_unique_id_t uid{};
        if (id.size() >= sizeof(uid.text))
            raise(PyExc_ValueError, "ibex: unique id longer than " +
                                        std::to_string(sizeof(uid.text) - 1) + " characters");
        std::memcpy(uid.text, id.data(), id.size());
        const CommConfig config(std::move(device), timeout_ms, std::move(algo), qp);
        ibex_comm_t *comm = nullptr;
        ibex_status_t status;
        {
            py::gil_scoped_release unlocked;
            status = ibex_comm_init_rank(&comm, nranks, &uid, rank, &config.config);
        }
        check(status);
        return std::make_shared<Comm>(comm);
    }

    static std::shared_ptr<Comm> from_env(std::optional<std::string> device, int timeout_ms,
                                          std::optional<std::string> algo, std::optional<py::dict> qp) {
        const CommConfig config(std::move(device), timeout_ms, std::move(algo), qp);
        ibex_comm_t *comm = nullptr;
        ibex_status_t status;
        {
            py::gil_scoped_release unlocked;
            status = ibex_comm_init_from_env(&comm, &config.config);
        }
        check(status);
        return std::make_shared<Comm>(comm);
    }

    int rank() const {
        int r = 0;
        check(ibex_comm_rank(handle(), &r));
        return r;
    }
    int size() const {
        int n = 0;
        check(ibex_comm_size(handle(), &n));
        return n;
    }
    std::string async_error() {
        ibex_status_t error = IBEX_OK;
        check(ibex_comm_get_async_error(handle(), &error));
        return status_name(error);
    }
    std::string allreduce_algo(size_t bytes) const {
        return ibex_comm_allreduce_algo(handle(), bytes);
    }

    py::object allreduce(py::handle send, py::handle recv, ibex_redop_t op, bool async_op) {
        return collective(send, recv, Shape::Same, async_op, [&](auto &s, auto &r, size_t n, auto t, auto q) {
            return ibex_allreduce(s.data(), r.data(), n, t, op, comm_, q);
        });
    }

    py::object reduce_scatter(py::handle send, py::handle recv, ibex_redop_t op, bool async_op) {
        return collective(send, recv, Shape::Scatter, async_op, [&](auto &s, auto &r, size_t n, auto t, auto q) {
            return ibex_reduce_scatter(s.data(), r.data(), n, t, op, comm_, q);
        });
    }

    py::object allgather(py::handle send, py::handle recv, bool async_op) {
        return collective(send, recv, Shape::Gather, async_op, [&](auto &s, auto &r, size_t n, auto t, auto q) {
            return ibex_allgather(s.data(), r.data(), n, t, comm_, q);
        });
    }

    // The first alltoall connects every pair of ranks (collective, it blocks until all
    // ranks reach it), so it starts with the GIL released even when async. With counts
    // (elements to each rank, from each rank; the blocks packed in rank order) it is
    // ibex_alltoallv.
    py::object alltoall(py::handle send, py::handle recv, std::optional<std::vector<size_t>> send_counts,
                        std::optional<std::vector<size_t>> recv_counts, bool async_op) {
        if (!send_counts && !recv_counts)
            return collective(send, recv, Shape::Exchange, async_op, [&](auto &s, auto &r, size_t n, auto t, auto q) {
                return without_gil([&] { return ibex_alltoall(s.data(), r.data(), n, t, comm_, q); });
            });
        if (!send_counts || !recv_counts)
            raise(PyExc_ValueError, "ibex: alltoall takes send_counts and recv_counts together");
        auto [s, r] = pair(send, recv);
        const ibex_datatype_t type = common_type(*s, *r);
        const auto ranks = static_cast<size_t>(size());
        // Displacements: the blocks packed in rank order.
        const auto packed = [&](const std::vector<size_t> &counts, const BorrowedBuffer &b, const char *what) {
            if (counts.size() != ranks)
                raise(PyExc_ValueError, std::string("ibex: ") + what + "_counts holds " +
                                            std::to_string(counts.size()) + " counts, the world has " +
                                            std::to_string(ranks) + " ranks");
            std::vector<size_t> displs;
            size_t at = 0;
            for (size_t c : counts) {
                displs.push_back(at);
                at += c;
            }
            require(b, type, at, what);
            return displs;
        };
        const std::vector<size_t> sdispls = packed(*send_counts, *s, "send"), rdispls = packed(*recv_counts, *r, "recv");
        return run(
            [&](ibex_request_t **req) {
                return without_gil([&] {
                    return ibex_alltoallv(s->data(), send_counts->data(), sdispls.data(), r->data(),
                                          recv_counts->data(), rdispls.data(), type, comm_, req);
                });
            },
            {s, r}, async_op);
    }

    // Sends and receives that run together (ibex_p2p_batch): ("send" | "recv", buffer,
    // peer) each. The first between two ranks no collective connected waits for the
    // peer's, so it starts with the GIL released even when async.
    py::object p2p(const py::sequence &ops, bool async_op) {
        std::vector<ibex_p2p_op_t> batch;
        std::vector<BufferRef> buffers;
        for (py::handle item : ops) {
            if (!py::isinstance<py::tuple>(item) || py::len(item) != 3)
                raise(PyExc_TypeError, "ibex: a p2p op is a tuple (\"send\" or \"recv\", buffer, peer)");
            const auto op = py::reinterpret_borrow<py::tuple>(item);
            const auto kind = py::cast<std::string>(op[0]);
            if (kind != "send" && kind != "recv")
                raise(PyExc_ValueError, "ibex: a p2p op is \"send\" or \"recv\", not \"" + kind + "\"");
            const bool recv = kind == "recv";
            auto b = std::make_shared<BorrowedBuffer>(op[1], recv);
            batch.push_back({recv ? IBEX_P2P_RECV : IBEX_P2P_SEND, py::cast<int>(op[2]), b->data(), b->count(),
                             b->type()});
            buffers.push_back(std::move(b));
        }
        return run(
            [&](ibex_request_t **req) {
                return without_gil([&] { return ibex_p2p_batch(batch.data(), batch.size(), comm_, req); });
            },
            std::move(buffers), async_op);
    }

    py::object broadcast(py::handle send, py::handle recv, int root, bool async_op) {
        return collective(send, recv, Shape::Same, async_op, [&](auto &s, auto &r, size_t n, auto t, auto q) {
            return ibex_broadcast(s.data(), r.data(), n, t, root, comm_, q);
        });
    }

    py::object reduce(py::handle send, py::handle recv, ibex_redop_t op, int root, bool async_op) {
        return collective(send, recv, Shape::Same, async_op, [&](auto &s, auto &r, size_t n, auto t, auto q) {
            return ibex_reduce(s.data(), r.data(), n, t, op, root, comm_, q);
        });
    }

    py::object barrier(bool async_op) {
        return run([&](ibex_request_t **req) { return ibex_barrier(comm_, req); }, {}, async_op);
    }

    py::object split(int color, int key) {
        ibex_comm_t *child = nullptr;
        ibex_status_t status;
        ibex_comm_t *parent = handle();
        {
            py::gil_scoped_release unlocked;
            status = ibex_comm_split(parent, color, key, &child);
        }
        check(status);
        if (child == nullptr)
            return py::none();
        return py::cast(std::make_shared<Comm>(child));
    }

    std::shared_ptr<CommBuffer> mem_alloc(size_t nbytes) {
        (void)handle();
        return std::make_shared<CommBuffer>(owner_, nbytes);
    }

    // The communicator takes no more collectives; the C communicator goes now, or with the
    // last buffer from mem_alloc that something still holds (its memory stays valid).
    void destroy() {
        if (comm_ == nullptr)
            return;
        settle_requests(true);
        comm_ = nullptr;
        std::shared_ptr<CommHandle> owner = std::move(owner_);
        if (owner.use_count() > 1)
            return;
        ibex_comm_t *comm = std::exchange(owner->comm, nullptr);
        ibex_status_t status;
        {
            py::gil_scoped_release unlocked;
            status = ibex_comm_destroy(comm);
        }
        check(status);
    }

    // At once, buffers from mem_alloc or not: their memory goes with the communicator, and
    // those buffers are empty afterwards (arrays made over them before must not be used).
    void abort() {
        settle_requests(false);
        comm_ = nullptr;
        std::shared_ptr<CommHandle> owner = std::move(owner_);
        ibex_comm_t *comm = owner ? std::exchange(owner->comm, nullptr) : nullptr;
        if (comm != nullptr)
            check(ibex_comm_abort(comm));
    }

private:
    ibex_comm_t *handle() const {
        if (comm_ == nullptr)
            raise(PyExc_ValueError, "ibex: the communicator was destroyed");
        return comm_;
    }

    // Calls that may wait for other ranks before they queue anything (alltoall's and a
    // send's first connect) run with the GIL released, also when async.
    template <typename Call>
    static ibex_status_t without_gil(Call call) {
        if (!PyGILState_Check()) // run() released it already (not async)
            return call();
        py::gil_scoped_release released;
        return call();
    }

    // recv None means in place: the same memory is both.
    static std::pair<BufferRef, BufferRef> pair(py::handle send, py::handle recv) {
        if (recv.is_none()) {
            auto both = std::make_shared<BorrowedBuffer>(send, true);
            return {both, both};
        }
        return {std::make_shared<BorrowedBuffer>(send, false),
                std::make_shared<BorrowedBuffer>(recv, true)};
    }

    // The datatype of a pair: the typed one's (raw bytes take the other's type); two typed
    // buffers must agree.
    static ibex_datatype_t common_type(const BorrowedBuffer &s, const BorrowedBuffer &r) {
        if (s.typed() && r.typed() && s.type() != r.type())
            raise(PyExc_ValueError, std::string("ibex: send is ") + ibex_datatype_name(s.type()) +
                                        " but recv is " + ibex_datatype_name(r.type()));
        return s.typed() ? s.type() : r.type();
    }

    static size_t elements(const BorrowedBuffer &b, ibex_datatype_t type) {
        return b.bytes() / ibex_datatype_size(type);
    }

    static void require(const BorrowedBuffer &b, ibex_datatype_t type, size_t want,
                        const char *what) {
        if (b.bytes() != want * ibex_datatype_size(type))
            raise(PyExc_ValueError, std::string("ibex: ") + what + " holds " +
                                        std::to_string(elements(b, type)) + " " +
                                        ibex_datatype_name(type) +
                                        " elements, the collective needs " +
                                        std::to_string(want));
    }

    // How the two buffers' sizes relate: equal; recv holds every rank's send (gather);
    // send holds every rank's recv (scatter); equal, a block per rank (exchange).
    enum class Shape { Same, Gather, Scatter, Exchange };

    // Checks the pair against `shape` and runs call(send, recv, count, type, req), where
    // count is the per-rank element count the C API takes.
    template <typename Call>
    py::object collective(py::handle send, py::handle recv, Shape shape, bool async_op,
                          Call &&call) {
        auto [s, r] = pair(send, recv);
        const ibex_datatype_t type = common_type(*s, *r);
        const auto ranks = static_cast<size_t>(size());
        size_t count = elements(shape == Shape::Scatter ? *r : *s, type);
        if (shape == Shape::Exchange) {
            if (count % ranks != 0)
                raise(PyExc_ValueError, "ibex: send holds " + std::to_string(count) + " " +
                                            ibex_datatype_name(type) + " elements, not a block for each of " +
                                            std::to_string(ranks) + " ranks");
            require(*r, type, count, "recv");
            count /= ranks;
        } else if (shape == Shape::Scatter)
            require(*s, type, count * ranks, "send");
        else
            require(*r, type, shape == Shape::Gather ? count * ranks : count, "recv");
        return run([&](ibex_request_t **req) { return call(*s, *r, count, type, req); }, {s, r},
                   async_op);
    }

    template <typename Start>
    py::object run(Start &&start, std::vector<BufferRef> buffers, bool async_op) {
        (void)handle();
        if (!async_op) {
            ibex_status_t status;
            {
                py::gil_scoped_release unlocked;
                status = start(nullptr);
            }
            check(status);
            return py::none();
        }
        ibex_request_t *req = nullptr;
        check(start(&req));
        auto request = std::make_shared<Request>(req, std::move(buffers), shared_from_this());
        std::erase_if(requests_, [](const std::weak_ptr<Request> &w) { return w.expired(); });
        requests_.push_back(request);
        return py::cast(request);
    }

    void settle_requests(bool wait_for_them) {
        for (const std::weak_ptr<Request> &w : requests_)
            if (auto r = w.lock())
                r->settle(wait_for_them);
        requests_.clear();
    }

    ibex_comm_t *comm_; // nullptr once destroyed or aborted
    std::shared_ptr<CommHandle> owner_;
    std::vector<std::weak_ptr<Request>> requests_; // async requests not yet collected
};

std::vector<std::pair<std::string, std::string>> devices() {
    ibex_device_list_t *list = nullptr;
    int count = 0;
    check(ibex_get_device_list(&list, &count));
    std::vector<std::pair<std::string, std::string>> out;
    for (int i = 0; i < count; ++i)
        out.emplace_back(ibex_device_name(list, i), ibex_device_provider(list, i));
    ibex_free_device_list(list);
    return out;
}

std::string get_unique_id() {
    ibex_unique_id_t id{};
    check(ibex_get_unique_id(&id));
    return id.text;
}

} // namespace
} // namespace ibex_py

PYBIND11_MODULE(_core, m) {
    using namespace ibex_py;
    m.doc() = "ibex: communicators, collectives, devices and queue pairs (the C API)";

    add_error_type(m);

    m.def("version", [] { return std::string(ibex_version_string()); });
    m.def("devices", &devices, "[(name, provider)] of every device a built provider can open");
    m.def("get_unique_id", &get_unique_id,
          "Opens rank 0's rendezvous listener and returns its id (\"host:port/token\")");
    m.def("memory_type", [](uintptr_t ptr) {
        return static_cast<int>(ibex_memory_type(reinterpret_cast<const void *>(ptr)));
    });
    m.def("cuda_available", [] { return ibex_cuda_available() != 0; });

    py::enum_<ibex_redop_t>(m, "Op")
        .value("SUM", IBEX_SUM)
        .value("PROD", IBEX_PROD)
        .value("MIN", IBEX_MIN)
        .value("MAX", IBEX_MAX)
        .value("AVG", IBEX_AVG)
        .export_values();

    py::class_<Request, std::shared_ptr<Request>>(m, "Request")
        .def("test", &Request::test, "True once finished (raises IbexError if it failed)")
        .def("wait", &Request::wait, "Blocks until finished; raises IbexError if it failed");

    using namespace pybind11::literals;
    py::class_<CommBuffer, std::shared_ptr<CommBuffer>>(m, "CommBuffer", py::buffer_protocol(),
                                                        "Memory from Comm.mem_alloc: writable bytes (buffer protocol)")
        .def_buffer(&CommBuffer::info)
        .def_property_readonly("nbytes", &CommBuffer::nbytes)
        .def_property_readonly("address", &CommBuffer::address)
        .def("__len__", &CommBuffer::nbytes);

    py::class_<Comm, std::shared_ptr<Comm>>(m, "Comm")
        .def(py::init(&Comm::create), "nranks"_a, "unique_id"_a, "rank"_a,
             "device"_a = py::none(), "timeout_ms"_a = 0, "algo"_a = py::none(), py::kw_only(),
             "qp"_a = py::none())
        .def_static("from_env", &Comm::from_env, "device"_a = py::none(), "timeout_ms"_a = 0,
                    "algo"_a = py::none(), py::kw_only(), "qp"_a = py::none())
        .def_property_readonly("rank", &Comm::rank)
        .def_property_readonly("size", &Comm::size)
        .def("async_error", &Comm::async_error)
        .def("allreduce_algo", &Comm::allreduce_algo, "bytes"_a)
        .def("allreduce", &Comm::allreduce, "send"_a, "recv"_a = py::none(), "op"_a = IBEX_SUM,
             "async_op"_a = false)
        .def("reduce_scatter", &Comm::reduce_scatter, "send"_a, "recv"_a, "op"_a = IBEX_SUM,
             "async_op"_a = false)
        .def("allgather", &Comm::allgather, "send"_a, "recv"_a, "async_op"_a = false)
        .def("alltoall", &Comm::alltoall, "send"_a, "recv"_a, "send_counts"_a = py::none(),
             "recv_counts"_a = py::none(), "async_op"_a = false)
        .def("p2p", &Comm::p2p, "ops"_a, "async_op"_a = false,
             "Sends and receives that run together: (\"send\" | \"recv\", buffer, peer) each")
        .def(
            "send",
            [](Comm &c, py::handle buf, int peer, bool async_op) {
                return c.p2p(py::make_tuple(py::make_tuple("send", buf, peer)), async_op);
            },
            "buf"_a, "peer"_a, "async_op"_a = false)
        .def(
            "recv",
            [](Comm &c, py::handle buf, int peer, bool async_op) {
                return c.p2p(py::make_tuple(py::make_tuple("recv", buf, peer)), async_op);
            },
            "buf"_a, "peer"_a, "async_op"_a = false)
        .def("broadcast", &Comm::broadcast, "send"_a, "recv"_a = py::none(), "root"_a = 0,
             "async_op"_a = false)
        .def("reduce", &Comm::reduce, "send"_a, "recv"_a = py::none(), "op"_a = IBEX_SUM,
             "root"_a = 0, "async_op"_a = false)
        .def("barrier", &Comm::barrier, "async_op"_a = false)
        .def("split", &Comm::split, "color"_a, "key"_a = 0)
        .def("mem_alloc", &Comm::mem_alloc, "nbytes"_a,
             "Memory for collective buffers (ibex_comm_mem_alloc): view it with np.frombuffer or "
             "torch.frombuffer; same-host ranks then use it in place")
        .def("destroy", &Comm::destroy)
        .def("abort", &Comm::abort)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](Comm &self, py::args) { self.destroy(); });

    bind_verbs(m);
}
