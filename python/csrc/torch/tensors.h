// What the ibex backend takes from torch and gives back: a tensor checked for what ibex
// can take by pointer, its dtype and reduction as ibex's, and ibex's errors as torch's
// (a c10::Error with the status name and ibex's detail).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>
#include <vector>

#include <ibex/coll.h>

namespace ibex_torch {

// Raises a c10::Error "ibex: <what>".
[[noreturn]] void refuse(const std::string &what);
// "IBEX_ERR_...: <ibex_last_error()>".
std::string describe(ibex_status_t status);
// Raises "<what> failed: <describe(status)>" unless status is IBEX_OK.
void check(ibex_status_t status, const char *what);

ibex_datatype_t datatype_of(const at::Tensor &t);
ibex_redop_t redop_of(const c10d::ReduceOp &op);
// A tensor ibex can take by pointer: dense, contiguous, CPU or CUDA, a known dtype.
void check_tensor(const at::Tensor &t, const char *op);
// The one tensor of a list (torch's per-process lists), checked.
const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op);
// b checked, and of a's dtype and device.
void check_same_kind(const at::Tensor &a, const at::Tensor &b, const char *op);
// CUDA work queued on the tensor's current stream must land before ibex reads it.
void wait_for_producers(const at::Tensor &t);
// The coalesced collectives: the tensors side by side in one flat tensor (each checked, all
// of the first one's dtype and device), and back: consecutive parts of flat from element
// `from` copied into the tensors, in order (returns where the last part ended).
at::Tensor side_by_side(const std::vector<at::Tensor> &tensors, const char *op);
int64_t copy_back(const at::Tensor &flat, int64_t from, std::vector<at::Tensor> &tensors);
// allgather_coalesced's output lists checked (one per rank, each shaped as the inputs, of
// their dtype and device), all their tensors in one list.
std::vector<at::Tensor> coalesced_outputs(const std::vector<std::vector<at::Tensor>> &outputs,
                                          const std::vector<at::Tensor> &inputs, int size, const char *op);
// all_to_all_single's splits of one side (rows per rank along dim 0, or none: equal
// blocks) as ibex_alltoallv's counts and displacements in elements (row: elements per row).
void split_layout(const std::vector<int64_t> &splits, int64_t rows, int64_t row, int64_t n, const char *side,
                  std::vector<size_t> *counts, std::vector<size_t> *displs);

} // namespace ibex_torch
