// What the parts of the ibex._core module share (common.cpp): turning an ibex_status_t into
// a Python exception, and borrowing the memory of a Python object without copying it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ibex/coll.h>

namespace ibex_py {

namespace py = pybind11;

// Raises `type` (PyExc_ValueError, ...) with the message.
[[noreturn]] void raise(PyObject *type, const std::string &message);
// Creates ibex.IbexError (a RuntimeError) as m.IbexError; once, at module import.
void add_error_type(py::module_ &m);

// "IBEX_ERR_INVALID_ARGUMENT" for IBEX_ERR_INVALID_ARGUMENT, "IBEX_STATUS_<n>" otherwise.
const char *status_name(ibex_status_t status);

// Raises ibex.IbexError(status name, ibex_last_error()) unless status is IBEX_OK. Call it
// on the thread that made the ibex call, before anything else touches ibex: the detail
// string is per thread and valid until the next call.
void check(ibex_status_t status);
[[noreturn]] void raise_status(ibex_status_t status, const std::string &detail);

// One attribute of ibex_qp_connect_attr by its Python name (timeout, retry_cnt, rnr_retry,
// min_rnr_timer, max_rd_atomic, traffic_class, sl) into attr, its bit into *mask. Raises
// ValueError for another name or a value outside 0..255; ibex checks each one's range.
void choose_qp_attr(const std::string &name, long long value, ibex_qp_attr_t *attr, unsigned *mask);

// The memory behind a Python object, borrowed for as long as this lives: a torch tensor
// (CPU or CUDA, through data_ptr()), or anything with the buffer protocol (NumPy arrays,
// bytearray, memoryview, array.array). Must be destroyed with the GIL held.
class BorrowedBuffer {
public:
    // Refuses, with TypeError / ValueError naming the problem, an object that is neither,
    // a non-contiguous or sparse tensor, a read-only buffer when writable, and an element
    // type ibex has no datatype for.
    BorrowedBuffer(py::handle obj, bool writable);
    ~BorrowedBuffer();
    BorrowedBuffer(const BorrowedBuffer &) = delete;
    BorrowedBuffer &operator=(const BorrowedBuffer &) = delete;

    void *data() const { return data_; }
    size_t count() const { return count_; }   // elements
    size_t bytes() const { return count_ * ibex_datatype_size(type_); }
    ibex_datatype_t type() const { return type_; }
    bool typed() const { return typed_; }     // false: raw bytes, taken as IBEX_U8

private:
    py::object owner_;
    Py_buffer view_{};
    bool have_view_ = false;
    void *data_ = nullptr;
    size_t count_ = 0;
    ibex_datatype_t type_ = IBEX_U8;
    bool typed_ = false;
};

using BufferRef = std::shared_ptr<BorrowedBuffer>;

void bind_verbs(py::module_ &m);

} // namespace ibex_py
