// torch's collectives that ibex runs as one batch of sends and receives (ibex_p2p_batch):
// gather, scatter, and all_to_all with a tensor per rank. Each function checks the tensors
// (CPU, dense, contiguous, the input's dtype; the sizes the collective needs) and returns
// this rank's ops: the root's receives or sends, and a copy to itself as a send and a
// receive of its own.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include <ibex/coll.h>

namespace ibex_torch {

// outputs: the root's list (one tensor per rank), empty elsewhere.
std::vector<ibex_p2p_op_t> gather_ops(const std::vector<at::Tensor> &outputs, const at::Tensor &input, int rank,
                                      int size, int root);
// inputs: the root's list (one tensor per rank), empty elsewhere.
std::vector<ibex_p2p_op_t> scatter_ops(const at::Tensor &output, const std::vector<at::Tensor> &inputs, int rank,
                                       int size, int root);
// inputs[q] goes to rank q, outputs[q] comes from it (their sizes may differ by rank, as
// torch allows; rank q's inputs[rank] must be this rank's outputs[q]).
std::vector<ibex_p2p_op_t> alltoall_ops(const std::vector<at::Tensor> &outputs, const std::vector<at::Tensor> &inputs,
                                        int size);

} // namespace ibex_torch
