// The collectives run as batches of sends and receives (batches.h).
#include "batches.h"

#include <string>

#include "tensors.h"

namespace ibex_torch {
namespace {

ibex_p2p_op_t op_for(ibex_p2p_kind_t kind, int peer, const at::Tensor &t) {
    return {kind, peer, t.data_ptr(), static_cast<size_t>(t.numel()), datatype_of(t)};
}

// A tensor of a batch: what check_tensor asks, of `like`'s dtype and device (CUDA tensors
// are staged through pinned host memory by the sends and receives).
void check_member(const at::Tensor &t, const at::Tensor &like, const char *op) { check_same_kind(like, t, op); }

// A list of one tensor per rank, each of `like`'s dtype (and numel, when same_size).
void check_per_rank(const std::vector<at::Tensor> &list, const at::Tensor &like, int size, bool same_size,
                    const char *op, const char *what) {
    if (static_cast<int>(list.size()) != size)
        refuse(std::string(op) + ": the " + what + " list holds " + std::to_string(list.size()) +
               " tensors, the world size is " + std::to_string(size));
    for (const at::Tensor &t : list) {
        check_member(t, like, op);
        if (same_size && t.numel() != like.numel())
            refuse(std::string(op) + ": " + what + " tensors of " + std::to_string(t.numel()) + " elements, expected " +
                   std::to_string(like.numel()));
    }
}

} // namespace

std::vector<ibex_p2p_op_t> gather_ops(const std::vector<at::Tensor> &outputs, const at::Tensor &input, int rank,
                                      int size, int root) {
    check_member(input, input, "gather");
    if (rank != root) {
        if (!outputs.empty()) refuse("gather: only the root (rank " + std::to_string(root) + ") passes a gather list");
        return {op_for(IBEX_P2P_SEND, root, input)};
    }
    check_per_rank(outputs, input, size, true, "gather", "gather");
    std::vector<ibex_p2p_op_t> ops{op_for(IBEX_P2P_SEND, root, input)};
    for (int q = 0; q < size; ++q) ops.push_back(op_for(IBEX_P2P_RECV, q, outputs[static_cast<size_t>(q)]));
    return ops;
}

std::vector<ibex_p2p_op_t> scatter_ops(const at::Tensor &output, const std::vector<at::Tensor> &inputs, int rank,
                                       int size, int root) {
    check_member(output, output, "scatter");
    if (rank != root) {
        if (!inputs.empty()) refuse("scatter: only the root (rank " + std::to_string(root) + ") passes a scatter list");
        return {op_for(IBEX_P2P_RECV, root, output)};
    }
    check_per_rank(inputs, output, size, true, "scatter", "scatter");
    std::vector<ibex_p2p_op_t> ops;
    for (int q = 0; q < size; ++q) ops.push_back(op_for(IBEX_P2P_SEND, q, inputs[static_cast<size_t>(q)]));
    ops.push_back(op_for(IBEX_P2P_RECV, root, output));
    return ops;
}

std::vector<ibex_p2p_op_t> alltoall_ops(const std::vector<at::Tensor> &outputs, const std::vector<at::Tensor> &inputs,
                                        int size) {
    if (inputs.empty()) refuse("alltoall: no input tensors");
    const at::Tensor &like = inputs[0];
    check_per_rank(inputs, like, size, false, "alltoall", "input");
    check_per_rank(outputs, like, size, false, "alltoall", "output");
    std::vector<ibex_p2p_op_t> ops;
    for (int q = 0; q < size; ++q) {
        ops.push_back(op_for(IBEX_P2P_SEND, q, inputs[static_cast<size_t>(q)]));
        ops.push_back(op_for(IBEX_P2P_RECV, q, outputs[static_cast<size_t>(q)]));
    }
    return ops;
}

} // namespace ibex_torch
