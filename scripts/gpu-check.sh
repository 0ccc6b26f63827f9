#!/usr/bin/env bash
# Everything that needs a GPU, in one go, with one summary at the end:
#   - the CUDA tests: ctest -L cuda (reduction kernels, dispatch, soft-provider staging,
#     collectives on device buffers with 2, 3, 4 and 8 ranks on one GPU); a test that
#     skips on a GPU host is listed, a failure fails the script;
#   - the GPU benchmarks: the reduction kernels against a device-to-device copy at
#     256 MiB; ibex_write_bw, ibex_read_bw and ibex_send_bw with --use_cuda=0 against the
#     same tool on host memory (udp:lo, 256 KiB and 1 MiB); ibex_allreduce_perf with GPU
#     against host buffers (2 and 4 ranks, 1 to 64 MiB), whose #wrong must be 0.
# Benchmark figures are the median of GPU_CHECK_REPEAT runs (default 3) with the spread;
# the ratios are GPU over host in the same script run. They are reported, not asserted.
# Where there is no usable GPU (or ibex was built without CUDA) it prints
# "gpu-check: no GPU: <why>" and exits 0, so CI can call it on any host.
# --probe: only say whether there is a GPU ("gpu-check: no GPU: <why>" or
# "gpu-check: GPU present") and exit 0.
# Exit status: 0 passed (or no GPU), 1 a test or a benchmark failed or found wrong
# results, 2 the build is missing or a bad argument.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${IBEX_BUILD_DIR:-build}
REPEAT=${GPU_CHECK_REPEAT:-3}
probe_only=0
case "${1:-}" in
"") ;;
--probe) probe_only=1 ;;
*) echo "usage: $0 [--probe]" >&2; exit 2 ;;
esac
perf=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
if [[ ! -x $perf ]]; then
    echo "gpu-check: $perf is not built (ninja -C $BUILD)" >&2
    exit 2
fi

# The probe is the benchmark itself on one rank: it names why there is no GPU.
probe=$("$perf" -G 1 -b 8 -e 8 -n 1 -w 0 --device udp:lo 2>&1)
probe_rc=$?
if [[ $probe_rc -ne 0 ]]; then
    if why=$(grep -o 'no CUDA device: .*' <<<"$probe" | head -1) && [[ -n $why ]]; then
        echo "gpu-check: no GPU: ${why#no CUDA device: }"
        echo "gpu-check: nothing run; the CUDA tests and GPU benchmarks need a GPU (and a CUDA build)"
        exit 0
    fi
    echo "gpu-check: the GPU probe failed (status $probe_rc):" >&2
    echo "$probe" >&2
    exit 1
fi
if [[ $probe_only -eq 1 ]]; then
    echo "gpu-check: GPU present"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
summary=()
note() { summary+=("$1"); }

# median and spread (max - min) of the numbers on stdin: "median spread"
median() { sort -g | awk '{v[NR] = $1} END {if (!NR) {print "- -"; exit} m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.4g %.4g\n", m, v[NR] - v[1]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }

# ---- tests
echo "== CUDA tests (ctest -L cuda)"
ctest --test-dir "$BUILD" -L cuda --output-on-failure --timeout 600 >"$work/ctest.log" 2>&1
ctest_rc=$?
cat "$work/ctest.log"
line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$work/ctest.log" | tail -1)
skipped=$(grep -E '\*\*\*Skipped|Not Run' "$work/ctest.log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' ')
note "tests: ${line:-no ctest summary} ${skipped:+(skipped: $skipped)}"
if [[ $ctest_rc -ne 0 || -z $line ]]; then failed=1; fi

# ---- reduction kernels against a device copy
bench=$BUILD/bench/cuda_reduce/ibex_bench_cuda_reduce
if [[ -x $bench ]]; then
    echo "== reduction kernels at 256 MiB"
    if "$bench" --benchmark_filter='^(copy_d2d|reduce/[^/]+/sum)/268435456' --benchmark_format=csv \
        --benchmark_repetitions="$REPEAT" --benchmark_report_aggregates_only=true >"$work/kernels.csv" 2>"$work/kernels.err"; then
        # name,iterations,real_time,cpu_time,time_unit,bytes_per_second,...: the medians, in TB/s
        # (with one repetition there are no aggregates: the plain rows)
        awk -F, '$1 ~ /(_median|manual_time)"?$/ && $9 != "true" {gsub(/"/, "", $1); sub(/\/268435456.*/, "", $1);
                 printf "  %-22s %.3f TB/s\n", $1, $6 / 1e12}' "$work/kernels.csv" | tee "$work/kernels.txt"
        if grep -q ',true,' "$work/kernels.csv"; then
            grep ',true,' "$work/kernels.csv"
            failed=1
        fi
        copy=$(awk '$1 == "copy_d2d" {print $2}' "$work/kernels.txt")
        f32=$(awk '$1 ~ /^reduce\/f(loat)?32\/sum$/ {print $2}' "$work/kernels.txt")
        note "kernels, 256 MiB: f32 sum ${f32:--} TB/s against device copy ${copy:--} TB/s (ratio $(ratio "${f32:--}" "${copy:--}"))"
    else
        cat "$work/kernels.err"
        note "kernels: ibex_bench_cuda_reduce FAILED"
        failed=1
    fi
else
    note "kernels: $bench not built (needs Google Benchmark and CUDA)"
fi

# ---- perftest bandwidth tools: GPU buffers against host buffers
# bw_run TOOL SIZE [--use_cuda=0]: the client's BW average in Gb/s, or nothing on failure
bw_run() {
    local tool=$BUILD/tools/$1/$1 size=$2 port
    shift 2
    port=$((20000 + RANDOM % 20000))
    "$tool" -s "$size" -D 2 --report_gbits -p "$port" "$@" >"$work/srv.out" 2>&1 &
    local srv=$!
    sleep 0.3
    timeout 60 "$tool" -s "$size" -D 2 --report_gbits -p "$port" "$@" 127.0.0.1 >"$work/cli.out" 2>&1
    local rc=$?
    wait "$srv"
    [[ $rc -eq 0 ]] || { cat "$work/cli.out" "$work/srv.out" >&2; return; }
    # the data row: "#bytes #iterations BW-peak BW-average MsgRate"
    awk 'h && NF == 5 && $1 ~ /^[0-9]+$/ {print $4; exit} /#bytes/ {h = 1}' "$work/cli.out"
}
echo "== perftest bandwidth, udp:lo, GPU 0 against host memory"
for tool in ibex_write_bw ibex_read_bw ibex_send_bw; do
    for size in 262144 1048576; do
        host=$(for _ in $(seq "$REPEAT"); do bw_run "$tool" "$size"; done | median)
        gpu=$(for _ in $(seq "$REPEAT"); do bw_run "$tool" "$size" --use_cuda=0; done | median)
        read -r hm hs <<<"$host"
        read -r gm gs <<<"$gpu"
        [[ $hm == - || $gm == - ]] && failed=1
        msg="$tool -s $size: GPU $gm Gb/s (spread $gs), host $hm Gb/s (spread $hs), ratio $(ratio "$gm" "$hm") (target >= 0.9)"
        echo "  $msg"
        note "$msg"
    done
done

# ---- allreduce_perf: GPU buffers against host buffers
echo "== ibex_allreduce_perf, GPU against host buffers"
for np in 2 4; do
    for mem in host cuda; do
        for i in $(seq "$REPEAT"); do
            "$perf" -np "$np" -b 1M -e 64M -f 4 -n 10 --device udp:lo --mem "$mem" >"$work/ar_${np}_${mem}_$i.out" 2>&1 ||
                { cat "$work/ar_${np}_${mem}_$i.out"; failed=1; }
        done
    done
    for size in 1048576 4194304 16777216 67108864; do
        vals() { for i in $(seq "$REPEAT"); do awk -v s="$size" '$1 == s {print $8}' "$work/ar_${np}_$1_$i.out"; done | median; }
        read -r hm hs <<<"$(vals host)"
        read -r gm gs <<<"$(vals cuda)"
        msg="allreduce $np ranks $size B: GPU busbw $gm GB/s (spread $gs), host $hm GB/s (spread $hs), ratio $(ratio "$gm" "$hm") (target >= 0.9)"
        echo "  $msg"
        note "$msg"
    done
    wrong=$(cat "$work"/ar_"${np}"_cuda_*.out | awk '$1 ~ /^[0-9]+$/ && NF >= 13 {w += $9 + $13} END {print w + 0}')
    [[ $wrong -eq 0 ]] || failed=1
    note "allreduce $np ranks, GPU buffers: #wrong $wrong"
done

echo
echo "== gpu-check summary ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
for s in "${summary[@]}"; do echo "  $s"; done
if [[ $failed -ne 0 ]]; then
    echo "gpu-check: FAILED"
    exit 1
fi
echo "gpu-check: passed"
