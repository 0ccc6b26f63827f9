// The backend's tensor checks and conversions (tensors.h).
#include "tensors.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <iterator>

namespace ibex_torch {

[[noreturn]] void refuse(const std::string &what) { TORCH_CHECK(false, "ibex: ", what); }

std::string describe(ibex_status_t status) {
    static const char *const names[] = {
        "IBEX_OK", "IBEX_ERR_INVALID_ARGUMENT", "IBEX_ERR_NOT_SUPPORTED", "IBEX_ERR_NO_DEVICE",
        "IBEX_ERR_NO_MEMORY", "IBEX_ERR_INVALID_STATE", "IBEX_ERR_QUEUE_FULL",
        "IBEX_ERR_SYSTEM", "IBEX_ERR_TIMEOUT", "IBEX_ERR_REMOTE", "IBEX_ERR_ADDRESS_IN_USE",
        "IBEX_ERR_INTERNAL"};
    const auto index = static_cast<size_t>(status);
    const std::string name = index < std::size(names) ? names[index] : "IBEX_STATUS_UNKNOWN";
    return name + ": " + ibex_last_error();
}

void check(ibex_status_t status, const char *what) {
    if (status != IBEX_OK)
        refuse(std::string(what) + " failed: " + describe(status));
}

ibex_datatype_t datatype_of(const at::Tensor &t) {
    switch (t.scalar_type()) {
    case at::kFloat: return IBEX_F32;
    case at::kDouble: return IBEX_F64;
    case at::kHalf: return IBEX_F16;
    case at::kBFloat16: return IBEX_BF16;
    case at::kInt: return IBEX_I32;
    case at::kLong: return IBEX_I64;
    case at::kByte: return IBEX_U8;
    default: break;
    }
    refuse(std::string("tensors of dtype ") + c10::toString(t.scalar_type()) +
           " are not supported (float32/64, float16, bfloat16, int32/64, uint8)");
}

ibex_redop_t redop_of(const c10d::ReduceOp &op) {
    switch (op.op_) {
    case c10d::ReduceOp::SUM: return IBEX_SUM;
    case c10d::ReduceOp::PRODUCT: return IBEX_PROD;
    case c10d::ReduceOp::MIN: return IBEX_MIN;
    case c10d::ReduceOp::MAX: return IBEX_MAX;
    case c10d::ReduceOp::AVG: return IBEX_AVG;
    default: break;
    }
    static const char *const names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX",
                                        "BAND", "BOR", "BXOR", "PREMUL_SUM"};
    const auto index = static_cast<size_t>(op.op_);
    refuse(std::string("ReduceOp.") +
           (index < std::size(names) ? names[index] : std::to_string(index).c_str()) +
           " is not supported by ibex (SUM, PRODUCT, MIN, MAX, AVG)");
}

void check_tensor(const at::Tensor &t, const char *op) {
    if (t.is_sparse() || t.layout() != c10::kStrided)
        refuse(std::string(op) + ": sparse tensors are not supported (use .to_dense())");
    if (!t.is_contiguous())
        refuse(std::string(op) + ": the tensor is not contiguous (pass tensor.contiguous())");
    if (!t.device().is_cpu() && !t.device().is_cuda())
        refuse(std::string(op) + ": tensors on " + t.device().str() +
               " are not supported (cpu, cuda)");
    (void)datatype_of(t);
}

const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op) {
    if (tensors.size() != 1)
        refuse(std::string(op) + " takes one tensor per process, got " +
               std::to_string(tensors.size()));
    check_tensor(tensors[0], op);
    return tensors[0];
}

void check_same_kind(const at::Tensor &a, const at::Tensor &b, const char *op) {
    check_tensor(b, op);
    if (a.scalar_type() != b.scalar_type())
        refuse(std::string(op) + ": dtype mismatch, " + c10::toString(a.scalar_type()) +
               " and " + c10::toString(b.scalar_type()));
    if (a.device() != b.device())
        refuse(std::string(op) + ": device mismatch, " + a.device().str() + " and " +
               b.device().str());
}

void wait_for_producers(const at::Tensor &t) {
    if (!t.device().is_cuda())
        return;
    c10::impl::VirtualGuardImpl guard(t.device().type());
    guard.getStream(t.device()).synchronize();
}


at::Tensor side_by_side(const std::vector<at::Tensor> &tensors, const char *op) {
    if (tensors.empty())
        refuse(std::string(op) + ": no tensors");
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor &t : tensors) {
        check_same_kind(tensors[0], t, op);
        flat_parts.push_back(t.reshape({-1}));
    }
    return at::cat(flat_parts);
}

int64_t copy_back(const at::Tensor &flat, int64_t from, std::vector<at::Tensor> &tensors) {
    for (at::Tensor &t : tensors) {
        t.copy_(flat.narrow(0, from, t.numel()).view(t.sizes()));
        from += t.numel();
    }
    return from;
}

std::vector<at::Tensor> coalesced_outputs(const std::vector<std::vector<at::Tensor>> &outputs,
                                          const std::vector<at::Tensor> &inputs, int size, const char *op) {
    if (static_cast<int>(outputs.size()) != size)
        refuse(std::string(op) + ": " + std::to_string(outputs.size()) + " output lists for a world of " +
               std::to_string(size));
    std::vector<at::Tensor> all;
    for (const std::vector<at::Tensor> &list : outputs) {
        if (list.size() != inputs.size())
            refuse(std::string(op) + ": an output list of " + std::to_string(list.size()) + " tensors for " +
                   std::to_string(inputs.size()) + " inputs");
        for (size_t i = 0; i < list.size(); ++i) {
            check_same_kind(inputs[0], list[i], op);
            if (list[i].numel() != inputs[i].numel())
                refuse(std::string(op) + ": output " + std::to_string(i) + " holds " + std::to_string(list[i].numel()) +
                       " elements, its input " + std::to_string(inputs[i].numel()));
            all.push_back(list[i]);
        }
    }
    return all;
}

void split_layout(const std::vector<int64_t> &splits, int64_t rows, int64_t row, int64_t n, const char *side,
                  std::vector<size_t> *counts, std::vector<size_t> *displs) {
    if (!splits.empty() && static_cast<int64_t>(splits.size()) != n)
        refuse(std::string("alltoall_base: ") + side + " splits name " + std::to_string(splits.size()) +
               " ranks, the world has " + std::to_string(n));
    if (splits.empty() && rows % n != 0)
        refuse(std::string("alltoall_base: ") + std::to_string(rows) + " " + side +
               " rows are not a block for each of " + std::to_string(n) + " ranks");
    int64_t at = 0;
    for (int64_t p = 0; p < n; ++p) {
        const int64_t rows_p = splits.empty() ? rows / n : splits[static_cast<size_t>(p)];
        if (rows_p < 0)
            refuse(std::string("alltoall_base: a negative ") + side + " split");
        counts->push_back(static_cast<size_t>(rows_p * row));
        displs->push_back(static_cast<size_t>(at * row));
        at += rows_p;
    }
    if (at != rows)
        refuse(std::string("alltoall_base: the ") + side + " splits add up to " + std::to_string(at) +
               " rows, the tensor has " + std::to_string(rows));
}

} // namespace ibex_torch
