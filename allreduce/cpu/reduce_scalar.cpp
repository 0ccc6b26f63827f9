// The portable kernels: a plain loop over elementwise.h. Also the reference the SIMD path
// is tested against, and what handles the SIMD path's tails.
#include "allreduce/cpu/elementwise.h"
#include "allreduce/cpu/kernels.h"

namespace ibex::coll::cpu {
namespace {

template <class T> struct Scalar {
    template <int Op> static void run(void *out, const void *a, const void *b, size_t count) {
        auto *o = static_cast<T *>(out);
        const auto *x = static_cast<const T *>(a);
        const auto *y = static_cast<const T *>(b);
        for (size_t i = 0; i < count; ++i) o[i] = combine<T, Op>(x[i], y[i]);
    }
};

template <class T> void avg_scalar(void *buf, size_t count, int nranks) {
    auto *p = static_cast<T *>(buf);
    for (size_t i = 0; i < count; ++i) p[i] = divide(p[i], nranks);
}

template <class T> void fill(KernelTable &t, ibex_datatype_t type) {
    fill_ops<Scalar<T>>(t, type);
    t.avg[type] = avg_scalar<T>;
}

KernelTable make_table() {
    KernelTable t{};
    t.name = "scalar";
    fill<uint8_t>(t, IBEX_U8);
    fill<int32_t>(t, IBEX_I32);
    fill<int64_t>(t, IBEX_I64);
    fill<f16_t>(t, IBEX_F16);
    fill<bf16_t>(t, IBEX_BF16);
    fill<float>(t, IBEX_F32);
    fill<double>(t, IBEX_F64);
    return t;
}

} // namespace

const KernelTable &scalar_kernels() {
    static const KernelTable table = make_table();
    return table;
}

} // namespace ibex::coll::cpu
