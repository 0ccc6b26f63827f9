#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs into one folder that can travel to a bare CUDA host
# (no apt, no network) beside a copy of the source tree:
#   <out>/build   the CUDA test, tool and bench binaries (stripped), libibex and the NCCL net
#                 plugin at their build-tree paths, and every ctest file, so that
#                 `ctest -L cuda` runs unchanged once <out>/build is reachable at the
#                 absolute path this build was configured in (the test files name it);
#   <out>/lib     the non-glibc shared libraries those binaries load (DPDK, hwloc, ...);
#   <out>/prefix  the public headers and libibex, for `python3 setup.py build_ext` there.
# On the CUDA host, scripts/gpu-remote.sh <out> links it all into place and runs the check.
# Usage: scripts/gpu-bundle.sh [out] (default gpu-bundle; keep it out of git, for example
# in .git/info/exclude). IBEX_BUILD_DIR names the CUDA-enabled build (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${IBEX_BUILD_DIR:-build}
OUT=${1:-gpu-bundle}
grep -q '^IBEX_CUDA_FOUND:INTERNAL=1\|^CMAKE_CUDA_COMPILER:STRING=.' "$BUILD/CMakeCache.txt" ||
    { echo "gpu-bundle: $BUILD was not configured with CUDA" >&2; exit 2; }
binaries=(
    tests/allreduce/cuda/test_cuda_reduce
    tests/runtime/base/test_cuda_memory
    tests/allreduce/cuda/test_cuda_collectives
    tests/allreduce/cuda/test_coll_dispatch
    tests/allreduce/cuda/test_cuda_elementwise_host
    tests/allreduce/cuda/test_coll_simulated_gpu
    tests/allreduce/cuda/test_coll_gpu_direct
    tests/allreduce/cuda/test_cuda_fold_host
    tests/transport/soft/staging/test_soft_staging
    tests/transport/shm/test_shm_gpu
    tests/plugins/nccl-net/test_nccl_net_plugin
    tools/ibex_allreduce_perf/ibex_allreduce_perf
    tools/ibex_write_bw/ibex_write_bw
    tools/ibex_read_bw/ibex_read_bw
    tools/ibex_send_bw/ibex_send_bw
    bench/cuda_reduce/ibex_bench_cuda_reduce
    plugins/nccl-net/libnccl-net-ibex.so
)
# Optional extras: copied when built.
extras=()
rm -rf "$OUT"
mkdir -p "$OUT/build" "$OUT/lib" "$OUT/prefix/include/ibex" "$OUT/prefix/lib"
copy_stripped() {
    mkdir -p "$OUT/build/$(dirname "$1")"
    strip --strip-unneeded -o "$OUT/build/$1" "$BUILD/$1"
}
for b in "${binaries[@]}"; do copy_stripped "$b"; done
for b in "${extras[@]}"; do [[ -e $BUILD/$b ]] && copy_stripped "$b"; done
lib=$(readlink -f "$BUILD/libibex.so")
strip --strip-unneeded -o "$OUT/build/$(basename "$lib")" "$lib"
for l in libibex.so libibex.so.0; do ln -sfn "$(basename "$lib")" "$OUT/build/$l"; done
outabs=$(readlink -f "$OUT")
# with the test lists that gtest_discover_tests wrote beside them
(cd "$BUILD" && find . \( -name CTestTestfile.cmake -o -name '*_include.cmake' -o -name '*_tests.cmake' \) -print0 | xargs -0 cp --parents -t "$outabs/build")
cp runtime/include/ibex/*.h "$OUT/prefix/include/ibex/"
# the libraries the binaries load, less glibc, libstdc++ and libgcc (the host has newer ones)
for b in "${binaries[@]}"; do ldd "$BUILD/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libibex|libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r l; do cp -L "$l" "$OUT/lib/"; done
# a native stack on a crash, for the Python tests there (the host has no gdb)
cc -shared -fPIC -O1 -o "$OUT/lib/segv-trace.so" scripts/segv-trace.c
echo "gpu-bundle: $OUT ($(du -sh "$OUT" | cut -f1)); built in $(readlink -f "$BUILD")"
readlink -f "$BUILD" >"$OUT/build_dir"
