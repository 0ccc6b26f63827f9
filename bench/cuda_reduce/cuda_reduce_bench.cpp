// out = op(a, b) on GPU buffers, timed with CUDA events, next to cudaMemcpy device to
// device of the same buffer: the copy is the memory system's ceiling. bytes_per_second is
// memory traffic (reduce: two reads and a write per element; copy: a read and a write),
// so the two are directly comparable; a memory-bound kernel should come close to the copy.
// fold/N/...: the whole-op kernel of N ranks sharing one GPU (below).
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <string>

#include "allreduce/cuda/reduce.h"
#include "runtime/base/cuda_memory.h"

namespace {

struct Buffers {
    void *a = nullptr, *b = nullptr, *out = nullptr;
    explicit Buffers(size_t bytes) {
        cudaMalloc(&a, bytes);
        cudaMalloc(&b, bytes);
        cudaMalloc(&out, bytes);
        // Zeros: finite for every type and op, and no subnormal slow paths.
        cudaMemset(a, 0, bytes);
        cudaMemset(b, 0, bytes);
    }
    ~Buffers() {
        cudaFree(a);
        cudaFree(b);
        cudaFree(out);
    }
    bool ok() const { return a && b && out; }
};

template <class Body> void timed(benchmark::State &state, size_t traffic, Body body) {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (auto _ : state) {
        cudaEventRecord(start);
        body();
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        state.SetIterationTime(ms / 1e3);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(traffic));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
}

void reduce(benchmark::State &state, ibex_datatype_t type, ibex_redop_t op) {
    if (!ibex::cuda::available()) return state.SkipWithError(ibex::cuda::unavailable_reason());
    const size_t bytes = static_cast<size_t>(state.range(0));
    Buffers buf(bytes);
    if (!buf.ok()) return state.SkipWithError("cudaMalloc failed");
    const size_t count = bytes / ibex_datatype_size(type);
    timed(state, 3 * bytes, [&] { ibex::coll::cuda_reduce_into(buf.out, buf.a, buf.b, count, type, op, nullptr); });
}

// The mapped collectives' whole-op kernel (allreduce/gpu_direct.h) in one process: n
// ranks' f32 inputs folded into n outputs, each `bytes` long, out of place (2n buffers) or
// in place (n). Traffic is n reads and n writes per element, as for the collective, so
// beside copy_d2d this is the ceiling that ibex_allreduce_perf --mem cuda on one GPU
// meets, with no CUDA IPC mappings in the way.
void fold(benchmark::State &state, int n, bool in_place) {
    if (!ibex::cuda::available()) return state.SkipWithError(ibex::cuda::unavailable_reason());
    const size_t bytes = static_cast<size_t>(state.range(0));
    void *ins[ibex::coll::kMaxFold] = {}, *outs[ibex::coll::kMaxFold] = {};
    bool ok = true;
    for (int q = 0; q < n; ++q) {
        ok = ok && cudaMalloc(&ins[q], bytes) == cudaSuccess && cudaMemset(ins[q], 0, bytes) == cudaSuccess;
        if (in_place)
            outs[q] = ins[q];
        else
            ok = ok && cudaMalloc(&outs[q], bytes) == cudaSuccess;
    }
    if (ok)
        timed(state, 2 * static_cast<size_t>(n) * bytes, [&] {
            ibex::coll::cuda_fold_into(outs, n, ins, n, bytes / 4, IBEX_F32, IBEX_SUM, n, nullptr);
        });
    else
        state.SkipWithError("cudaMalloc failed");
    for (int q = 0; q < n; ++q) {
        cudaFree(ins[q]);
        if (!in_place) cudaFree(outs[q]);
    }
}

void copy(benchmark::State &state) {
    if (!ibex::cuda::available()) return state.SkipWithError(ibex::cuda::unavailable_reason());
    const size_t bytes = static_cast<size_t>(state.range(0));
    Buffers buf(bytes);
    if (!buf.ok()) return state.SkipWithError("cudaMalloc failed");
    timed(state, 2 * bytes, [&] { cudaMemcpyAsync(buf.out, buf.a, bytes, cudaMemcpyDeviceToDevice, nullptr); });
}

int register_all() {
    const ibex_datatype_t types[] = {IBEX_U8, IBEX_I32, IBEX_I64, IBEX_F16, IBEX_BF16, IBEX_F32, IBEX_F64};
    const ibex_redop_t ops[] = {IBEX_SUM, IBEX_PROD, IBEX_MIN, IBEX_MAX};
    // 64 KiB and 16 MiB too: the limit scripts/gpu-check.sh sets beside shm's GPU WRITEs.
    benchmark::RegisterBenchmark("copy_d2d", copy)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20)->Arg(256 << 20)->UseManualTime();
    for (int n : {2, 4})
        for (bool in_place : {false, true})
            benchmark::RegisterBenchmark(("fold/" + std::to_string(n) + (in_place ? "/in_place" : "/out_of_place")).c_str(),
                                         [n, in_place](benchmark::State &s) { fold(s, n, in_place); })
                ->Arg(256 << 20)
                ->UseManualTime();
    for (ibex_datatype_t t : types)
        for (ibex_redop_t op : ops)
            benchmark::RegisterBenchmark((std::string("reduce/") + ibex_datatype_name(t) + "/" + ibex_redop_name(op)).c_str(),
                                         [t, op](benchmark::State &s) { reduce(s, t, op); })
                ->Arg(1 << 20)
                ->Arg(256 << 20)
                ->UseManualTime();
    return 0;
}
const int registered = register_all();

} // namespace

BENCHMARK_MAIN();
