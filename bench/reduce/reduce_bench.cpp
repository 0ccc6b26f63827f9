// out = op(a, b) over one buffer per iteration, for each kernel path. Counters:
// bytes_per_second is the memory traffic (two inputs read, one output written);
// buf_GB/s is the size of one buffer per second, the rate an allreduce step reduces at.
// 64 KiB buffers stay in L1/L2 (compute bound: a pipelined ring's chunk), 16 MiB buffers go
// to memory.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "allreduce/cpu/elementwise.h"
#include "allreduce/cpu/kernels.h"

namespace {

using ibex::coll::cpu::KernelTable;

// Ordinary values near 1 (floats) so products stay normal: subnormal operands would
// measure the CPU's microcode assists, not the kernel.
void fill(uint8_t *p, size_t count, ibex_datatype_t type, int seed) {
    namespace cpu = ibex::coll::cpu;
    for (size_t i = 0; i < count; ++i) {
        const float f = 1.0f + static_cast<float>((i * 7 + static_cast<size_t>(seed) * 13) % 64) / 256.0f;
        const uint64_t n = i * 2654435761u + static_cast<uint64_t>(seed);
        switch (type) {
        case IBEX_F32: std::memcpy(p + 4 * i, &f, 4); break;
        case IBEX_F64: { const double d = f; std::memcpy(p + 8 * i, &d, 8); break; }
        case IBEX_F16: { const uint16_t h = cpu::f32_to_f16(f); std::memcpy(p + 2 * i, &h, 2); break; }
        case IBEX_BF16: { const uint16_t h = cpu::f32_to_bf16(f); std::memcpy(p + 2 * i, &h, 2); break; }
        default: std::memcpy(p + ibex_datatype_size(type) * i, &n, ibex_datatype_size(type)); break;
        }
    }
}

void run(benchmark::State &state, const KernelTable *k, ibex_datatype_t type, ibex_redop_t op) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    const size_t count = bytes / ibex_datatype_size(type);
    std::vector<uint8_t> a(bytes), b(bytes), out(bytes);
    fill(a.data(), count, type, 1);
    fill(b.data(), count, type, 2);
    for (auto _ : state) {
        k->reduce[type][op](out.data(), a.data(), b.data(), count);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes * 3));
    state.counters["buf_GB/s"] =
        benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
                           benchmark::Counter::kIsRate);
}

const int registered = [] {
    std::vector<const KernelTable *> paths{&ibex::coll::cpu::scalar_kernels()};
    if (const KernelTable *simd = ibex::coll::cpu::avx2_kernels()) paths.push_back(simd);
    const ibex_datatype_t types[] = {IBEX_F32, IBEX_F16, IBEX_BF16, IBEX_F64, IBEX_I32, IBEX_I64, IBEX_U8};
    for (const KernelTable *k : paths) {
        for (ibex_datatype_t t : types) {
            for (ibex_redop_t op : {IBEX_SUM, IBEX_MAX, IBEX_PROD}) {
                if (op != IBEX_SUM && t != IBEX_F32 && t != IBEX_BF16 && t != IBEX_U8 && t != IBEX_I64) continue;
                const std::string name = std::string("reduce/") + k->name + "/" + ibex_datatype_name(t) + "/" +
                                         ibex_redop_name(op);
                benchmark::RegisterBenchmark(name.c_str(), run, k, t, op)->Arg(64 << 10)->Arg(16 << 20);
            }
        }
    }
    return 0;
}();

} // namespace

BENCHMARK_MAIN();
