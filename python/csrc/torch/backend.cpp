// The `ibex` backend of torch.distributed: a c10d process group over one ibex
// communicator. One source for both torch generations: torch 1.x registers a
// c10d::ProcessGroup subclass, torch >= 2.0 a c10d::Backend (which torch wraps in its
// own ProcessGroup, per device type). Everything the two share (Work, options, Store) has
// the same shape in both.
//
// Collectives are queued on the communicator in issue order (ibex_* with a request) and a
// completion thread waits for them in that order, finishing each Work and its Future, so
// DDP's future callbacks run without anyone calling wait().
//
// Sends and receives are held back and issued together, as one ibex_p2p_batch, when
// anything waits on one of them or a collective is issued: torch 1.x hands a third-party
// backend batch_isend_irecv's ops one by one, and two ranks that each isend to the other
// before they irecv would otherwise each wait for the other's receive (ibex runs separate
// calls one after the other, as NCCL does outside a group).
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <ATen/ATen.h>
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ibex/coll.h>

#include "batches.h"
#include "rendezvous.h"
#include "tensors.h"

namespace ibex_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// One collective in flight. `after` runs on the completion thread once ibex is done
// (copy-outs for the list forms); the future's value is `outputs`, as DDP expects.
class IbexWork : public c10d::Work {
public:
    IbexWork(int rank, c10d::OpType type, const char *name, std::vector<at::Tensor> outputs)
        : c10d::Work(rank, type), name_(name), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get()), devices_of(outputs_))) {}

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
    std::vector<at::Tensor> result() override { return outputs_; }

    const char *name() const { return name_; }
    ibex_request_t *request = nullptr;
    std::function<void()> after;
    std::vector<at::Tensor> keep_alive; // inputs and staging buffers ibex still reads

    // Works that finish with this one (the other sends and receives of its batch).
    std::vector<c10::intrusive_ptr<IbexWork>> followers;

    void complete(std::exception_ptr error) {
        for (auto &f : followers)
            f->complete(error);
        followers.clear();
        if (!error && after) {
            try {
                after();
            } catch (...) {
                error = std::current_exception();
            }
        }
        keep_alive.clear();
        if (error)
            future_->setError(error);
        else
            future_->markCompleted(c10::IValue(outputs_));
        finish(error);
    }

private:
    static std::vector<c10::Device> devices_of(const std::vector<at::Tensor> &tensors) {
        std::vector<c10::Device> devices;
        for (const at::Tensor &t : tensors)
            if (t.device().is_cuda() &&
                std::find(devices.begin(), devices.end(), t.device()) == devices.end())
                devices.push_back(t.device());
        return devices;
    }

    const char *name_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupIbex;

// A send or receive: held back until something waits on it (see the top of this file).
class P2pWork : public IbexWork {
public:
    P2pWork(ProcessGroupIbex *group, int rank, c10d::OpType type, const char *name, at::Tensor tensor)
        : IbexWork(rank, type, name, {tensor}), group_(group) {}
    bool isCompleted() override;
    bool wait(std::chrono::milliseconds timeout) override;
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

    std::atomic<bool> issued{false}; // its batch went to ibex (or failed): group_ is no longer needed

private:
    void issue_batch();
    ProcessGroupIbex *group_;
};

class ProcessGroupIbex : public BackendBase {
public:
    ProcessGroupIbex(ibex_comm_t *comm, int rank, int size)
        : BackendBase(rank, size), comm_(comm), completer_([this] { complete_in_order(); }) {}

    ~ProcessGroupIbex() override {
        // Python drops the group with the GIL held, and the completer may be freeing a
        // tensor that has a Python object (which takes the GIL): let go of it to join.
        std::optional<pybind11::gil_scoped_release> unlocked;
        if (Py_IsInitialized() != 0 && PyGILState_Check() != 0)
            unlocked.emplace();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            issue_p2p_locked();
            stopping_ = true;
        }
        cv_.notify_all();
        completer_.join();
        ibex_status_t error = IBEX_OK;
        (void)ibex_comm_get_async_error(comm_, &error);
        // A failed communicator has nobody to say goodbye to: abort frees it at once.
        if (error != IBEX_OK)
            (void)ibex_comm_abort(comm_);
        else
            (void)ibex_comm_destroy(comm_);
    }

    const std::string getBackendName() const override { return "ibex"; }

    void setSequenceNumberForGroup() override {}
    uint64_t getSequenceNumberForGroup() override { return issued_; }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override {
        const at::Tensor &t = single(tensors, "allreduce");
        const ibex_redop_t op = redop_of(opts.reduceOp);
        return issue(c10d::OpType::ALLREDUCE, "allreduce", {t}, {t}, [&](ibex_request_t **req) {
            return ibex_allreduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                                  datatype_of(t), op, comm_, req);
        });
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override {
        const at::Tensor &t = single(tensors, "broadcast");
        check_root(opts.rootRank, opts.rootTensor, "broadcast");
        return issue(c10d::OpType::BROADCAST, "broadcast", {t}, {t}, [&](ibex_request_t **req) {
            return ibex_broadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                                  datatype_of(t), static_cast<int>(opts.rootRank), comm_, req);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override {
        const at::Tensor &t = single(tensors, "reduce");
        check_root(opts.rootRank, opts.rootTensor, "reduce");
        const ibex_redop_t op = redop_of(opts.reduceOp);
        const int root = static_cast<int>(opts.rootRank);
        void *recv = root == getRank() ? t.data_ptr() : nullptr;
        return issue(c10d::OpType::REDUCE, "reduce", {t}, {t}, [&](ibex_request_t **req) {
            return ibex_reduce(t.data_ptr(), recv, static_cast<size_t>(t.numel()),
                               datatype_of(t), op, root, comm_, req);
        });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions & /*opts*/) override {
        const at::Tensor &in = single(inputs, "allgather");
        if (outputs.size() != 1)
            refuse("allgather takes one output list per process, got " +
                   std::to_string(outputs.size()));
        std::vector<at::Tensor> &list = outputs[0];
        check_list(list, in, "allgather");
        at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
        auto work = issue(c10d::OpType::ALLGATHER, "allgather", list, {in, flat},
                          [&](ibex_request_t **req) {
                              return ibex_allgather(in.data_ptr(), flat.data_ptr(),
                                                    static_cast<size_t>(in.numel()),
                                                    datatype_of(in), comm_, req);
                          },
                          [flat, list, n = in.numel()]() mutable {
                              for (size_t i = 0; i < list.size(); ++i)
                                  list[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n)
                                                    .view(list[i].sizes()));
                          });
        return work;
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions & /*opts*/) override {
        check_tensor(input, "_allgather_base");
        check_same_kind(input, output, "_allgather_base");
        if (output.numel() != input.numel() * getSize())
            refuse("_allgather_base: the output holds " + std::to_string(output.numel()) +
                   " elements, world size x input is " +
                   std::to_string(input.numel() * getSize()));
        return issue(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, {input},
                     [&](ibex_request_t **req) {
                         return ibex_allgather(input.data_ptr(), output.data_ptr(),
                                               static_cast<size_t>(input.numel()),
                                               datatype_of(input), comm_, req);
                     });
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override {
        const at::Tensor &out = single(outputs, "reduce_scatter");
        if (inputs.size() != 1)
            refuse("reduce_scatter takes one input list per process, got " +
                   std::to_string(inputs.size()));
        check_list(inputs[0], out, "reduce_scatter");
        const ibex_redop_t op = redop_of(opts.reduceOp);
        std::vector<at::Tensor> flat_parts;
        for (const at::Tensor &t : inputs[0])
            flat_parts.push_back(t.reshape({-1}));
        at::Tensor flat = at::cat(flat_parts);
        return issue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out}, {flat},
                     [&](ibex_request_t **req) {
                         return ibex_reduce_scatter(flat.data_ptr(), out.data_ptr(),
                                                    static_cast<size_t>(out.numel()),
                                                    datatype_of(out), op, comm_, req);
                     });
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                        const c10d::ReduceScatterOptions &opts) override {
        check_tensor(output, "_reduce_scatter_base");
        check_same_kind(output, input, "_reduce_scatter_base");
        if (input.numel() != output.numel() * getSize())
            refuse("_reduce_scatter_base: the input holds " + std::to_string(input.numel()) +
                   " elements, world size x output is " +
                   std::to_string(output.numel() * getSize()));
        const ibex_redop_t op = redop_of(opts.reduceOp);
        return issue(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
                     {input}, [&](ibex_request_t **req) {
                         return ibex_reduce_scatter(input.data_ptr(), output.data_ptr(),
                                                    static_cast<size_t>(output.numel()),
                                                    datatype_of(output), op, comm_, req);
                     });
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions & /*opts*/) override {
        return issue(c10d::OpType::BARRIER, "barrier", {}, {},
                     [&](ibex_request_t **req) { return ibex_barrier(comm_, req); });
    }

    // The tensors side by side in one buffer, one allreduce, copied back.
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                                       const c10d::AllreduceCoalescedOptions &opts) override {
        at::Tensor flat = side_by_side(tensors, "allreduce_coalesced");
        const ibex_redop_t op = redop_of(opts.reduceOp);
        return issue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, {flat},
                     [&](ibex_request_t **req) {
                         return ibex_allreduce(flat.data_ptr(), flat.data_ptr(), static_cast<size_t>(flat.numel()),
                                               datatype_of(flat), op, comm_, req);
                     },
                     [flat, tensors]() mutable { copy_back(flat, 0, tensors); });
    }
    // Every rank's inputs side by side, one allgather, each rank's part copied out into its
    // output list (outputs[r][i]: rank r's input i).
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                       std::vector<at::Tensor> &inputs,
                                                       const c10d::AllgatherOptions &) override {
        const char *name = "allgather_coalesced";
        at::Tensor flat = side_by_side(inputs, name);
        std::vector<at::Tensor> all = coalesced_outputs(outputs, inputs, getSize(), name);
        at::Tensor gathered = at::empty({flat.numel() * getSize()}, flat.options());
        return issue(c10d::OpType::ALLGATHER_COALESCED, name, all, {flat, gathered},
                     [&](ibex_request_t **req) {
                         return ibex_allgather(flat.data_ptr(), gathered.data_ptr(), static_cast<size_t>(flat.numel()),
                                               datatype_of(flat), comm_, req);
                     },
                     [gathered, outputs]() mutable {
                         int64_t at = 0;
                         for (std::vector<at::Tensor> &list : outputs) at = copy_back(gathered, at, list);
                     });
    }
    // gather, scatter and the list form of all_to_all: one batch of sends and receives
    // each (batches.h), queued in issue order like the other collectives.
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override {
        check_root(opts.rootRank, 0, "gather");
        const int root = static_cast<int>(opts.rootRank);
        if (outputs.size() > 1)
            refuse("gather takes one output list per process, got " + std::to_string(outputs.size()));
        const std::vector<at::Tensor> list = outputs.empty() ? std::vector<at::Tensor>{} : outputs[0];
        const auto ops = gather_ops(list, single(inputs, "gather"), getRank(), getSize(), root);
        return issue_batch(c10d::OpType::GATHER, "gather", list, inputs, ops);
    }
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override {
        check_root(opts.rootRank, 0, "scatter");
        const int root = static_cast<int>(opts.rootRank);
        if (inputs.size() > 1)
            refuse("scatter takes one input list per process, got " + std::to_string(inputs.size()));
        const std::vector<at::Tensor> list = inputs.empty() ? std::vector<at::Tensor>{} : inputs[0];
        const auto ops = scatter_ops(single(outputs, "scatter"), list, getRank(), getSize(), root);
        return issue_batch(c10d::OpType::SCATTER, "scatter", outputs, list, ops);
    }
    // all_to_all_single: equal blocks (ibex_alltoall), or the split sizes given, along dim
    // 0 (ibex_alltoallv); a side without splits is cut into equal blocks.
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_split_sizes,
                                                 std::vector<int64_t> &input_split_sizes,
                                                 const c10d::AllToAllOptions & /*opts*/) override {
        check_tensor(input, "alltoall_base");
        check_tensor(output, "alltoall_base");
        check_same_kind(input, output, "alltoall_base");
        const int64_t n = getSize();
        const int64_t in_rows = input.dim() > 0 ? input.size(0) : 1;
        const int64_t out_rows = output.dim() > 0 ? output.size(0) : 1;
        const int64_t row = in_rows ? input.numel() / in_rows : 0;
        if (out_rows && output.numel() / out_rows != row)
            refuse("alltoall_base: input rows of " + std::to_string(row) + " elements, output rows of " +
                   std::to_string(output.numel() / out_rows));
        if (input_split_sizes.empty() && output_split_sizes.empty()) {
            if (input.numel() != output.numel())
                refuse("alltoall_base: the output holds " + std::to_string(output.numel()) +
                       " elements, the input " + std::to_string(input.numel()));
            if (in_rows % n != 0)
                refuse("alltoall_base: " + std::to_string(in_rows) + " rows are not a block for each of " +
                       std::to_string(n) + " ranks");
            return issue(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {input},
                         [&](ibex_request_t **req) {
                             return ibex_alltoall(input.data_ptr(), output.data_ptr(),
                                                  static_cast<size_t>(input.numel() / n),
                                                  datatype_of(input), comm_, req);
                         });
        }
        std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;
        split_layout(input_split_sizes, in_rows, row, n, "input", &sendcounts, &sdispls);
        split_layout(output_split_sizes, out_rows, row, n, "output", &recvcounts, &rdispls);
        return issue(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {input},
                     [&](ibex_request_t **req) {
                         return ibex_alltoallv(input.data_ptr(), sendcounts.data(), sdispls.data(),
                                               output.data_ptr(), recvcounts.data(), rdispls.data(),
                                               datatype_of(input), comm_, req);
                     });
    }
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions & /*opts*/) override {
        const auto ops = alltoall_ops(outputs, inputs, getSize());
        return issue_batch(c10d::OpType::ALLTOALL, "alltoall", outputs, inputs, ops);
    }
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst, int tag) override {
        return hold_p2p(tensors, dst, tag, true);
    }
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src, int tag) override {
        return hold_p2p(tensors, src, tag, false);
    }

#if TORCH_VERSION_MAJOR < 2
    // batch_isend_irecv brackets its ops with these: the batch goes out as soon as it is
    // whole, so the transfers overlap whatever the caller does before it waits.
    void startCoalescing() override {}
    void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>> & /*reqs*/) override { issue_p2p(); }
#endif

    // Issues the sends and receives held back, as one batch; a failure finishes each of
    // their Works with the error.
    void issue_p2p() {
        std::lock_guard<std::mutex> lock(mutex_);
        issue_p2p_locked();
    }
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &, int) override {
        unsupported("recvAnysource");
    }

private:
    [[noreturn]] static void unsupported(const char *op) {
        refuse(std::string(op) + " is not supported by ibex");
    }

    void check_root(int64_t root, int64_t root_tensor, const char *op) const {
        if (root < 0 || root >= getSize())
            refuse(std::string(op) + ": root " + std::to_string(root) +
                   " is outside the world of " + std::to_string(getSize()));
        if (root_tensor != 0)
            refuse(std::string(op) + ": one tensor per process, so rootTensor must be 0");
    }

    void check_list(const std::vector<at::Tensor> &list, const at::Tensor &like,
                    const char *op) const {
        if (static_cast<int>(list.size()) != getSize())
            refuse(std::string(op) + ": the list holds " + std::to_string(list.size()) +
                   " tensors, the world size is " + std::to_string(getSize()));
        for (const at::Tensor &t : list) {
            check_same_kind(like, t, op);
            if (t.numel() != like.numel())
                refuse(std::string(op) + ": list tensors of " + std::to_string(t.numel()) +
                       " elements, expected " + std::to_string(like.numel()));
        }
    }

    c10::intrusive_ptr<c10d::Work> hold_p2p(std::vector<at::Tensor> &tensors, int peer, int tag, bool send) {
        const char *name = send ? "send" : "recv";
        const at::Tensor &t = single(tensors, name);
        if (peer < 0 || peer >= getSize() || peer == getRank())
            refuse(std::string(name) + ": peer " + std::to_string(peer) + " is not another rank of the world of " +
                   std::to_string(getSize()));
        if (tag != 0)
            refuse(std::string(name) + ": tag " + std::to_string(tag) +
                   ": ibex matches sends and receives in issue order and takes no tags (use 0)");
        // Issued later (at a wait, a collective, the batch's end): what produces a CUDA
        // tensor on the caller's stream now must be done by then, as for a collective.
        wait_for_producers(t);
        auto work = c10::make_intrusive<P2pWork>(this, getRank(), send ? c10d::OpType::SEND : c10d::OpType::RECV,
                                                 name, t);
        std::lock_guard<std::mutex> lock(mutex_);
        held_.push_back({work, ibex_p2p_op_t{send ? IBEX_P2P_SEND : IBEX_P2P_RECV, peer, t.data_ptr(),
                                             static_cast<size_t>(t.numel()), datatype_of(t)}});
        return work;
    }

    void issue_p2p_locked() {
        if (held_.empty())
            return;
        std::vector<ibex_p2p_op_t> ops;
        for (const Held &h : held_)
            ops.push_back(h.op);
        auto first = held_.front().work;
        for (size_t i = 1; i < held_.size(); ++i)
            first->followers.push_back(held_[i].work);
        for (const Held &h : held_)
            h.work->issued = true;
        held_.clear();
        const ibex_status_t status = ibex_p2p_batch(ops.data(), ops.size(), comm_, &first->request);
        if (status != IBEX_OK) {
            first->complete(std::make_exception_ptr(std::runtime_error(
                std::string("ibex: send/recv failed on rank ") + std::to_string(getRank()) + ": " + describe(status))));
            return;
        }
        ++issued_;
        pending_.push_back(first);
        cv_.notify_one();
    }

    c10::intrusive_ptr<c10d::Work> issue_batch(c10d::OpType type, const char *name, std::vector<at::Tensor> outputs,
                                               std::vector<at::Tensor> inputs, const std::vector<ibex_p2p_op_t> &ops) {
        return issue(type, name, std::move(outputs), std::move(inputs), [&](ibex_request_t **req) {
            return ibex_p2p_batch(ops.data(), ops.size(), comm_, req);
        });
    }

    template <typename Start>
    c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, const char *name,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> inputs, Start &&start,
                                         std::function<void()> after = {}) {
        for (const at::Tensor &t : inputs)
            wait_for_producers(t);
        auto work = c10::make_intrusive<IbexWork>(getRank(), type, name, std::move(outputs));
        work->after = std::move(after);
        work->keep_alive = std::move(inputs);
        std::lock_guard<std::mutex> lock(mutex_); // one issue order for ibex and the queue
        issue_p2p_locked(); // sends and receives issued before this collective go first
        check(start(&work->request), name);
        ++issued_;
        pending_.push_back(work);
        cv_.notify_one();
        return work;
    }

    // Requests finish in issue order (one stream), so waiting on the oldest is enough.
    void complete_in_order() {
        for (;;) {
            c10::intrusive_ptr<IbexWork> work;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
                if (pending_.empty())
                    return;
                work = pending_.front();
                pending_.pop_front();
            }
            const ibex_status_t status = ibex_wait(work->request);
            std::exception_ptr error;
            if (status != IBEX_OK)
                error = std::make_exception_ptr(std::runtime_error(
                    std::string("ibex: ") + work->name() + " failed on rank " +
                    std::to_string(getRank()) + ": " + describe(status)));
            work->complete(error);
        }
    }

    ibex_comm_t *comm_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<c10::intrusive_ptr<IbexWork>> pending_;
    struct Held {
        c10::intrusive_ptr<P2pWork> work;
        ibex_p2p_op_t op;
    };
    std::vector<Held> held_; // sends and receives not yet issued
    bool stopping_ = false;
    uint64_t issued_ = 0;
    std::thread completer_;
};

void P2pWork::issue_batch() {
    if (!issued.load())
        group_->issue_p2p();
}
bool P2pWork::isCompleted() {
    issue_batch();
    return IbexWork::isCompleted();
}
bool P2pWork::wait(std::chrono::milliseconds timeout) {
    issue_batch();
    return IbexWork::wait(timeout);
}
c10::intrusive_ptr<c10::ivalue::Future> P2pWork::getFuture() {
    issue_batch();
    return IbexWork::getFuture();
}

namespace {

c10::intrusive_ptr<BackendBase> create(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                       int size, const std::chrono::duration<float> &timeout) {
    if (size < 1)
        refuse("world size must be at least 1, got " + std::to_string(size));
    if (rank < 0 || rank >= size)
        refuse("rank " + std::to_string(rank) + " is outside the world of size " +
               std::to_string(size) + " (ranks are 0.." + std::to_string(size - 1) + ")");
    const auto timeout_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    const Rendezvous rv = exchange_unique_id(*store, rank, size, timeout_ms);
    ibex_comm_config_t config = IBEX_COMM_CONFIG_INIT;
    config.device = rv.device.empty() ? nullptr : rv.device.c_str();
    config.timeout_ms = static_cast<int32_t>(std::min<int64_t>(
        timeout_ms.count(), std::numeric_limits<int32_t>::max()));
    ibex_comm_t *comm = nullptr;
    ibex_status_t status;
    {
        pybind11::gil_scoped_release unlocked;
        status = ibex_comm_init_rank(&comm, size, &rv.id, rank, &config);
    }
    check(status, "ibex_comm_init_rank");
    return c10::make_intrusive<ProcessGroupIbex>(comm, rank, size);
}

} // namespace
} // namespace ibex_torch

PYBIND11_MODULE(_torch_backend, m) {
    m.doc() = "The ibex backend of torch.distributed (import ibex.torch to register it)";
    m.def("create_backend", &ibex_torch::create, pybind11::arg("store"), pybind11::arg("rank"),
          pybind11::arg("world_size"), pybind11::arg("timeout"));
    m.attr("TORCH_VERSION_BUILT") = TORCH_VERSION;
#if TORCH_VERSION_MAJOR >= 2
    m.attr("BASE_CLASS") = "c10d::Backend";
#else
    m.attr("BASE_CLASS") = "c10d::ProcessGroup";
#endif
}
