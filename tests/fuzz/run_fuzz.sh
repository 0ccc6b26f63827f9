#!/usr/bin/env bash
# Builds the receive-path fuzz target with clang's libFuzzer + ASan + UBSan and runs it
# for a bounded time on a freshly generated seed corpus (valid frames of every opcode).
# Fails on any crash, sanitizer report, leak, timeout or out-of-memory.
#
# usage: run_fuzz.sh SOURCE_DIR OUT_DIR [SECONDS]
#   IBEX_FUZZ_CXX      compiler (default: clang++-14, else clang++)
#   IBEX_FUZZ_SECONDS  run time, overrides SECONDS (default 60)
#   IBEX_FUZZ_JOBS     parallel compile jobs (default 2)
#   IBEX_FUZZ_BUDGET   seconds for build + run together (default 280, under ctest's 300):
#                      a slow first build shortens the run, down to 30 s at least
# Exit codes: 0 pass, 1 failure, 77 skipped (no libFuzzer-capable clang; ctest reports
# SKIP_RETURN_CODE 77 as "skipped", never as passed).
set -u -o pipefail

SKIP=77
src=${1:?usage: run_fuzz.sh SOURCE_DIR OUT_DIR [SECONDS]}
out=${2:?usage: run_fuzz.sh SOURCE_DIR OUT_DIR [SECONDS]}
seconds=${IBEX_FUZZ_SECONDS:-${3:-60}}
jobs=${IBEX_FUZZ_JOBS:-2}
budget=${IBEX_FUZZ_BUDGET:-280}
t0=$SECONDS
src=$(cd "$src" && pwd) || exit 1
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd) || exit 1

cxx=${IBEX_FUZZ_CXX:-}
if [[ -z $cxx ]]; then
    for c in clang++-14 clang++; do
        if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
    done
fi
if [[ -z $cxx ]]; then
    echo "SKIPPED: no clang++ (libFuzzer) found; install clang-14 (apt-get install clang-14) to run the fuzz target"
    exit $SKIP
fi

san="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all"
cflags="-std=c++20 -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Wno-missing-field-initializers"
incs="-I$src -I$src/runtime/include"

# Can this clang build a libFuzzer binary at all (runtime libraries installed)?
probe=$out/probe
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long){return 0;}\n' >"$probe.cpp"
if ! "$cxx" $san "$probe.cpp" -o "$probe" >"$probe.log" 2>&1; then
    echo "SKIPPED: $cxx cannot build with -fsanitize=fuzzer,address,undefined:"
    cat "$probe.log"
    exit $SKIP
fi

[[ -f /usr/include/isa-l/crc.h ]] || { echo "FAILED: ISA-L headers (isa-l/crc.h) not found"; exit 1; }

# What the receive path needs: codec, engine, the soft provider (ops table used through
# the C API), the runtime pieces of the C API. The udp port comes along with the provider.
engine_srcs=()
for f in "$src"/transport/soft/codec/*.cpp "$src"/transport/soft/engine/*.cpp; do engine_srcs+=("$f"); done
for f in "$src"/transport/soft/*.cpp; do engine_srcs+=("$f"); done
for f in "$src"/transport/*.cpp; do engine_srcs+=("$f"); done
engine_srcs+=("$src/transport/soft/udp/udp_port.cpp")
# The provider list names the shm provider too (and the C API reaches its ibex_mem_alloc).
for f in "$src"/transport/shm/*.cpp; do engine_srcs+=("$f"); done
for f in "$src"/runtime/base/*.cpp; do engine_srcs+=("$f"); done
for f in api endpoint device binding_defaults memory; do engine_srcs+=("$src/runtime/$f.cpp"); done
# The runtime's progress-CPU choice reads the topology (hwloc) and parses cpulists.
for f in "$src"/runtime/topology/*.cpp; do engine_srcs+=("$f"); done
# The engine paces and reacts to CNPs through congestion/ (DCQCN state machines) and
# holds each QP's send window there (window/).
for f in "$src"/congestion/*.cpp "$src"/congestion/dcqcn/*.cpp "$src"/congestion/window/*.cpp; do engine_srcs+=("$f"); done
# dpdk: device names are parsed everywhere; the port itself is the no-DPDK stand-in here.
engine_srcs+=("$src/transport/soft/dpdk/device_spec.cpp" "$src/transport/soft/dpdk/dpdk_unavailable.cpp")
fuzz_srcs=("$src/tests/fuzz/fuzz_receive_path.cpp")
gen_srcs=("$src/tests/fuzz/gen_seeds.cpp" "$src/transport/soft/codec/roce.cpp" "$src/transport/soft/codec/icrc.cpp"
          "$src/transport/soft/codec/crc32_wide.cpp")

# Incremental build through a generated ninja file (header dependencies tracked), or a
# plain parallel compile when ninja is absent.
obj_of() { local r=${1#"$src"/}; echo "obj/${r//\//_}.o"; }
if command -v ninja >/dev/null 2>&1; then
    nf=$out/build.ninja
    {
        echo "cxx = $cxx"
        echo "cflags = $cflags $incs"
        echo "san = $san"
        echo "rule cc"
        echo "  command = \$cxx \$cflags \$flags -MMD -MF \$out.d -c \$in -o \$out"
        echo "  depfile = \$out.d"
        echo "  deps = gcc"
        echo "  description = CXX \$in"
        echo "rule link"
        echo "  command = \$cxx \$flags \$in -o \$out -lisal -lhwloc -lnuma -lpthread"
        echo "  description = LINK \$out"
        fuzz_objs=""
        for f in "${engine_srcs[@]}" "${fuzz_srcs[@]}"; do
            o=$(obj_of "$f")
            echo "build $o: cc $f"
            echo "  flags = \$san"
            fuzz_objs+=" $o"
        done
        gen_objs=""
        for f in "${gen_srcs[@]}"; do
            o=gen/$(obj_of "$f")
            echo "build $o: cc $f"
            echo "  flags = -O1"
            gen_objs+=" $o"
        done
        echo "build fuzz_receive_path: link$fuzz_objs"
        echo "  flags = \$san"
        echo "build gen_seeds: link$gen_objs"
        echo "  flags ="
    } >"$nf.tmp"
    mv "$nf.tmp" "$nf"
    if ! ninja -C "$out" -j "$jobs" fuzz_receive_path gen_seeds; then
        echo "FAILED: building the fuzz target"
        exit 1
    fi
else
    mkdir -p "$out/obj" "$out/gen/obj"
    compile_link() { # flags, output, prefix, sources...: everything rebuilt, $jobs at a time
        local fl=$1 bin=$2 pre=$3 objs=() pids=() f o p
        shift 3
        for f in "$@"; do
            o=$out/$pre$(obj_of "$f")
            objs+=("$o")
            $cxx $cflags $incs $fl -c "$f" -o "$o" &
            pids+=($!)
            if (( ${#pids[@]} >= jobs )); then
                for p in "${pids[@]}"; do wait "$p" || return 1; done
                pids=()
            fi
        done
        for p in "${pids[@]}"; do wait "$p" || return 1; done
        $cxx $fl "${objs[@]}" -o "$out/$bin" -lisal -lhwloc -lnuma -lpthread
    }
    compile_link "$san" fuzz_receive_path "" "${engine_srcs[@]}" "${fuzz_srcs[@]}" ||
        { echo "FAILED: building the fuzz target"; exit 1; }
    compile_link "-O1" gen_seeds "gen/" "${gen_srcs[@]}" || { echo "FAILED: building the seed generator"; exit 1; }
fi

seeds=$out/seeds
corpus=$out/corpus
artifacts=$out/artifacts
rm -rf "$seeds" "$artifacts"
mkdir -p "$seeds" "$corpus" "$artifacts"
"$out/gen_seeds" "$seeds" || { echo "FAILED: generating seeds"; exit 1; }

left=$(( budget - (SECONDS - t0) - 15 ))
if (( left < seconds )); then
    (( left < 30 )) && left=30
    echo "the build took $((SECONDS - t0))s: fuzzing ${left}s instead of ${seconds}s to stay within ${budget}s"
    seconds=$left
fi

log=$out/fuzz.log
echo "running $out/fuzz_receive_path for ${seconds}s (log: $log)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# New inputs go to corpus/ (kept between runs, so coverage accumulates); seeds/ is read only.
# libFuzzer's own failure exit code is 77, ctest's skip code here: any non-zero status is
# turned into exit 1 below.
"$out/fuzz_receive_path" "$corpus" "$seeds" \
    -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1
rc=$?

grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$log" | tail -2
grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb|new_units_added)' "$log"
crashes=$(find "$artifacts" -type f | wc -l)
if [[ $rc -ne 0 || $crashes -ne 0 ]] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant broken' "$log"; then
    echo "FAILED: fuzzer exit status $rc, $crashes artifact(s) in $artifacts"
    grep -nE 'ERROR|runtime error|invariant broken|SUMMARY' "$log" | head -20
    tail -60 "$log"
    exit 1
fi
echo "PASSED: no crash, hang, leak or sanitizer report in ${seconds}s"
exit 0
