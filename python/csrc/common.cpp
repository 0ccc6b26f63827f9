// ibex._core's shared pieces (common.h): ibex_status_t as ibex.IbexError, and the memory
// of a Python object (torch tensor or buffer protocol) borrowed without a copy.
#include <array>
#include <cstring>
#include <string>

#include "python/csrc/common.h"

namespace ibex_py {
namespace {

PyObject *g_error_type = nullptr; // ibex.IbexError, a RuntimeError

constexpr std::array<const char *, 12> kStatusNames = {
    "IBEX_OK",
    "IBEX_ERR_INVALID_ARGUMENT",
    "IBEX_ERR_NOT_SUPPORTED",
    "IBEX_ERR_NO_DEVICE",
    "IBEX_ERR_NO_MEMORY",
    "IBEX_ERR_INVALID_STATE",
    "IBEX_ERR_QUEUE_FULL",
    "IBEX_ERR_SYSTEM",
    "IBEX_ERR_TIMEOUT",
    "IBEX_ERR_REMOTE",
    "IBEX_ERR_ADDRESS_IN_USE",
    "IBEX_ERR_INTERNAL",
};

struct TypeName {
    const char *torch;
    ibex_datatype_t type;
};
constexpr std::array<TypeName, 7> kTorchTypes = {{
    {"torch.float32", IBEX_F32},
    {"torch.float64", IBEX_F64},
    {"torch.float16", IBEX_F16},
    {"torch.bfloat16", IBEX_BF16},
    {"torch.int32", IBEX_I32},
    {"torch.int64", IBEX_I64},
    {"torch.uint8", IBEX_U8},
}};

std::string type_name_of(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

// A buffer-protocol format ("<f", "d", "=q", ...) and item size as an ibex datatype.
ibex_datatype_t datatype_of_format(const char *format, Py_ssize_t itemsize) {
    std::string f = format ? format : "B";
    if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<'))
        f.erase(0, 1);
    if (f.size() == 1) {
        switch (f[0]) {
        case 'f': return IBEX_F32;
        case 'd': return IBEX_F64;
        case 'e': return IBEX_F16;
        case 'B':
        case 'c': return IBEX_U8;
        case 'i':
        case 'l':
        case 'q':
            if (itemsize == 4)
                return IBEX_I32;
            if (itemsize == 8)
                return IBEX_I64;
            break;
        default: break;
        }
    }
    raise(PyExc_ValueError,
          "ibex: buffer element format '" + std::string(format ? format : "") + "' (" +
              std::to_string(itemsize) +
              " bytes) has no ibex datatype; use float32/64, float16, int32/64 or uint8");
}

} // namespace

[[noreturn]] void raise(PyObject *type, const std::string &message) {
    PyErr_SetString(type, message.c_str());
    throw py::error_already_set();
}

void add_error_type(py::module_ &m) {
    g_error_type = PyErr_NewExceptionWithDoc(
        "ibex.IbexError",
        "An ibex call failed: .status is the ibex_status_t name, .detail ibex_last_error().",
        PyExc_RuntimeError, nullptr);
    m.attr("IbexError") = py::handle(g_error_type);
}

const char *status_name(ibex_status_t status) {
    const auto index = static_cast<size_t>(status);
    return index < kStatusNames.size() ? kStatusNames[index] : "IBEX_STATUS_UNKNOWN";
}

void check(ibex_status_t status) {
    if (status != IBEX_OK)
        raise_status(status, ibex_last_error());
}

void raise_status(ibex_status_t status, const std::string &detail) {
    const std::string name = status_name(status);
    const std::string message =
        name + ": " + (detail.empty() ? std::string(ibex_strerror(status)) : detail);
    py::object error = py::reinterpret_borrow<py::object>(g_error_type)(message);
    error.attr("status") = name;
    error.attr("code") = static_cast<int>(status);
    error.attr("detail") = detail;
    PyErr_SetObject(g_error_type, error.ptr());
    throw py::error_already_set();
}

BorrowedBuffer::BorrowedBuffer(py::handle obj, bool writable)
    : owner_(py::reinterpret_borrow<py::object>(obj)) {
    if (py::hasattr(obj, "data_ptr") && py::hasattr(obj, "is_contiguous") &&
        py::hasattr(obj, "dtype")) {
        if (obj.attr("is_sparse").cast<bool>())
            raise(PyExc_ValueError, "ibex: sparse tensors are not supported (use .to_dense())");
        if (!obj.attr("is_contiguous")().cast<bool>())
            raise(PyExc_ValueError,
                  "ibex: the tensor is not contiguous (pass tensor.contiguous())");
        const std::string dtype = py::str(obj.attr("dtype"));
        bool found = false;
        for (const TypeName &t : kTorchTypes) {
            if (dtype == t.torch) {
                type_ = t.type;
                found = true;
            }
        }
        if (!found)
            raise(PyExc_ValueError, "ibex: tensors of " + dtype +
                                        " are not supported (float32/64, float16, bfloat16, "
                                        "int32/64, uint8)");
        data_ = reinterpret_cast<void *>(obj.attr("data_ptr")().cast<uintptr_t>());
        count_ = obj.attr("numel")().cast<size_t>();
        typed_ = true;
        return;
    }
    if (!PyObject_CheckBuffer(obj.ptr()))
        raise(PyExc_TypeError, "ibex: expected a torch tensor or an object with the buffer "
                               "protocol (NumPy array, bytearray, memoryview), got " +
                                   type_name_of(obj));
    const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0)
        throw py::error_already_set();
    have_view_ = true;
    type_ = datatype_of_format(view_.format, view_.itemsize);
    typed_ = view_.format != nullptr && std::strcmp(view_.format, "B") != 0;
    data_ = view_.buf;
    count_ = static_cast<size_t>(view_.len) / ibex_datatype_size(type_);
}

BorrowedBuffer::~BorrowedBuffer() {
    if (have_view_)
        PyBuffer_Release(&view_);
}

void choose_qp_attr(const std::string &name, long long value, ibex_qp_attr_t *attr, unsigned *mask) {
    struct Field {
        const char *name;
        uint8_t ibex_qp_attr_t::*field;
        unsigned bit;
    };
    static const Field fields[] = {{"timeout", &ibex_qp_attr_t::timeout, IBEX_QP_TIMEOUT},
                                   {"retry_cnt", &ibex_qp_attr_t::retry_cnt, IBEX_QP_RETRY_CNT},
                                   {"rnr_retry", &ibex_qp_attr_t::rnr_retry, IBEX_QP_RNR_RETRY},
                                   {"min_rnr_timer", &ibex_qp_attr_t::min_rnr_timer, IBEX_QP_MIN_RNR_TIMER},
                                   {"max_rd_atomic", &ibex_qp_attr_t::max_rd_atomic, IBEX_QP_MAX_RD_ATOMIC},
                                   {"traffic_class", &ibex_qp_attr_t::traffic_class, IBEX_QP_TRAFFIC_CLASS},
                                   {"sl", &ibex_qp_attr_t::sl, IBEX_QP_SL}};
    for (const Field &f : fields) {
        if (name != f.name)
            continue;
        if (value < 0 || value > 255)
            raise(PyExc_ValueError, "ibex: " + name + " must be 0..255, got " + std::to_string(value));
        attr->*f.field = static_cast<uint8_t>(value);
        *mask |= f.bit;
        return;
    }
    std::string known;
    for (const Field &f : fields)
        known += std::string(known.empty() ? "" : ", ") + f.name;
    raise(PyExc_ValueError, "ibex: no QP attribute \"" + name + "\" (one of " + known + ")");
}

} // namespace ibex_py
