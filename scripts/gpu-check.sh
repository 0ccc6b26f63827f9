#!/usr/bin/env bash
# Everything that needs a GPU, in one go, with one summary at the end:
#   - the CUDA tests: ctest -L cuda (reduction kernels, dispatch, soft-provider staging,
#     collectives on device buffers with 2, 3, 4 and 8 ranks on one GPU); a test that
#     skips on a GPU host is listed, a failure fails the script;
#   - the GPU benchmarks: the reduction kernels, and the mapped collectives' whole-op fold of
#     2 and 4 ranks in one process, against a device-to-device copy at
#     256 MiB; ibex_write_bw, ibex_read_bw and ibex_send_bw with --use_cuda=0 against the
#     same tool on host memory (udp:lo, 256 KiB and 1 MiB); ibex_allreduce_perf with GPU
#     against host buffers (2 and 4 ranks, 1 to 64 MiB, over shm and over udp:lo), whose
#     #wrong must be 0, and
#     torch.distributed's gloo on CUDA tensors at the same sizes where torch has CUDA;
#   - a real NCCL (system or torch's) loading the ibex net plugin (NcclNetPlugin.RealNcclLoadsIt).
# Benchmark figures are the median of GPU_CHECK_REPEAT runs (default 3) with the spread;
# the ratios are GPU over host in the same script run. They are reported, not asserted.
# Where there is no usable GPU (or ibex was built without CUDA) it prints
# "gpu-check: no GPU: <why>" and exits 0, so CI can call it on any host.
# --probe: only say whether there is a GPU ("gpu-check: no GPU: <why>" or
# "gpu-check: GPU present") and exit 0.
#   - ibex_write_bw -d shm between two processes on GPU memory (CUDA IPC) against a
#     device-to-device copy of the same size (64 KiB to 256 MiB);
#   - ibex_allreduce_perf on GPU buffers of 2 and 4 ranks on one GPU, 16 to 256 MiB, with
#     the peers' buffers mapped (CUDA IPC, allreduce/gpu_direct.h) against the staged path
#     (IBEX_GPU_DIRECT=0) and against a device-to-device copy's bandwidth (bytes read plus
#     written), in the same run;
# GPU_CHECK_PARTS picks what runs (default: "tests kernels perftest shmipc allreduce mapped
# profile gloo nccl"; profile: where a mapped op's time goes, per step; staging, not in the
# default: where a staged op's time goes over udp:lo, with 4 MiB and 256 KiB chunks and
# with ops issued one at a time, beside host buffers).
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

PARTS=" ${GPU_CHECK_PARTS:-tests kernels perftest shmipc allreduce mapped profile gloo nccl} "
part() { [[ $PARTS == *" $1 "* ]]; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
summary=()
note() { summary+=("$1"); }

# median and spread (max - min) of the numbers on stdin: "median spread"
median() { sort -g | awk '{v[NR] = $1} END {if (!NR) {print "- -"; exit} m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.4g %.4g\n", m, v[NR] - v[1]}'; }
# busbw_median SIZE FILES...: the median (and spread) of the out-of-place busbw at SIZE over
# the ibex_allreduce_perf outputs named
busbw_median() { local size=$1; shift; awk -v s="$size" '$1 == s {print $8}' "$@" | median; }
# the #wrong of every run in the ibex_allreduce_perf outputs named (out of place + in place)
wrong_in() { cat "$@" | awk '$1 ~ /^[0-9]+$/ && NF >= 13 {w += $9 + $13} END {print w + 0}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }

# ---- tests
if part tests; then
echo "[${SECONDS}s] == CUDA tests (ctest -L cuda)"
ctest --test-dir "$BUILD" -L cuda --output-on-failure --timeout 600 >"$work/ctest.log" 2>&1
ctest_rc=$?
cat "$work/ctest.log"
# ctest 3.x: "100% tests passed, 0 tests failed out of 22"; 4.x: "100% tests passed out of 22"
line=$(grep -E 'tests passed(, [0-9]+ tests failed)? out of [0-9]+' "$work/ctest.log" | tail -1)
skipped=$(grep -E '\*\*\*Skipped|Not Run' "$work/ctest.log" | sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/' | tr '\n' ' ')
note "tests: ${line:-no ctest summary} ${skipped:+(skipped: $skipped)}"
if [[ $ctest_rc -ne 0 || -z $line ]]; then failed=1; fi
fi

# ---- reduction kernels against a device copy
bench=$BUILD/bench/cuda_reduce/ibex_bench_cuda_reduce
if ! part kernels; then
    :
elif [[ -x $bench ]]; then
    echo "[${SECONDS}s] == reduction kernels at 256 MiB"
    if "$bench" --benchmark_filter='^(copy_d2d|reduce/[^/]+/sum|fold/[0-9]+/[a-z_]+)/268435456' --benchmark_format=csv \
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
        f32=$(awk '$1 ~ /^reduce\/(f32|float|float32)\/sum$/ {print $2}' "$work/kernels.txt")
        note "kernels, 256 MiB: f32 sum ${f32:--} TB/s against device copy ${copy:--} TB/s (ratio $(ratio "${f32:--}" "${copy:--}"))"
        # the whole-op fold of the mapped collectives, in one process (no CUDA IPC)
        for n in 2 4; do
            oop=$(awk -v k="fold/$n/out_of_place" '$1 == k {print $2}' "$work/kernels.txt")
            inp=$(awk -v k="fold/$n/in_place" '$1 == k {print $2}' "$work/kernels.txt")
            [[ -n $oop$inp ]] && note "kernels, fold of $n ranks' 256 MiB (one process): out of place ${oop:--} TB/s ($(ratio "${oop:--}" "${copy:--}") of the copy), in place ${inp:--} TB/s ($(ratio "${inp:--}" "${copy:--}"))"
        done
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
part perftest && echo "[${SECONDS}s] == perftest bandwidth, udp:lo, GPU 0 against host memory"
for tool in ibex_write_bw ibex_read_bw ibex_send_bw; do
    part perftest || break
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

# ---- shm between two processes on GPU memory (CUDA IPC: one device-to-device copy per
# WRITE) against a device-to-device cudaMemcpy of the same size in one process, the limit
if part shmipc; then
    echo "[${SECONDS}s] == ibex_write_bw -d shm --use_cuda=0 against a device-to-device copy"
    sizes="65536 1048576 16777216 268435456"
    if [[ -x $bench ]] && "$bench" --benchmark_filter='^copy_d2d/' --benchmark_format=csv --benchmark_repetitions="$REPEAT" \
        --benchmark_report_aggregates_only=true >"$work/d2d.csv" 2>"$work/d2d.err"; then
        :
    else
        cat "$work/d2d.err" 2>/dev/null
        note "shm GPU: the device copy limit could not be measured"
        failed=1
    fi
    for size in $sizes; do
        # copy_d2d counts bytes read plus written: the payload rate is half, in Gb/s
        limit=$(awk -F, -v s="copy_d2d/$size/" 'index($1, s) && $1 ~ /_median"?$/ {printf "%.4g", $6 * 8 / 2 / 1e9}' "$work/d2d.csv")
        read -r gm gs <<<"$(for _ in $(seq "$REPEAT"); do bw_run ibex_write_bw "$size" -d shm --use_cuda=0; done | median)"
        [[ $gm == - ]] && failed=1
        msg="shm GPU->GPU WRITE -s $size: $gm Gb/s (spread $gs), device copy ${limit:--} Gb/s, ratio $(ratio "$gm" "${limit:--}") (target >= 0.8 from 16 MiB)"
        echo "  $msg"
        note "$msg"
    done
fi

# ---- allreduce_perf: GPU buffers against host buffers
# The ranks share this host: over shm by default (IBEX_SHM=1), and over the network
# device (udp:lo) with IBEX_SHM=0. GPU_CHECK_TRANSPORTS picks (default: both).
part allreduce && echo "[${SECONDS}s] == ibex_allreduce_perf, GPU against host buffers"
for tr in ${GPU_CHECK_TRANSPORTS:-shm udp}; do
    part allreduce || break
    shm=1
    [[ $tr == udp ]] && shm=0
    for np in 2 4; do
        for mem in host cuda; do
            for i in $(seq "$REPEAT"); do
                out=$work/ar_${tr}_${np}_${mem}_$i.out
                IBEX_SHM=$shm "$perf" -np "$np" -b 1M -e 64M -f 4 -n 10 --device udp:lo --mem "$mem" >"$out" 2>&1 ||
                    { cat "$out"; failed=1; }
            done
        done
        for size in 1048576 4194304 16777216 67108864; do
            read -r hm hs <<<"$(busbw_median "$size" "$work"/ar_"${tr}_${np}"_host_*.out)"
            read -r gm gs <<<"$(busbw_median "$size" "$work"/ar_"${tr}_${np}"_cuda_*.out)"
            msg="allreduce $tr $np ranks $size B: GPU busbw $gm GB/s (spread $gs), host $hm GB/s (spread $hs), ratio $(ratio "$gm" "$hm") (target >= 0.9)"
            echo "  $msg"
            note "$msg"
        done
        wrong=$(wrong_in "$work"/ar_"${tr}_${np}"_cuda_*.out)
        [[ $wrong -eq 0 ]] || failed=1
        note "allreduce $tr $np ranks, GPU buffers: #wrong $wrong"
    done
done

# ---- mapped GPU collectives of one host's ranks (allreduce/gpu_direct.h): rank 0 running
# each op whole where every buffer is on one GPU (the default), each rank its share
# (IBEX_GPU_DIRECT_LEADER=0), and the staged path (IBEX_GPU_DIRECT=0), beside a
# device-to-device copy (its rate counts bytes read plus written). GPU_CHECK_MAPPED_MODES
# picks the modes (default: "whole shares staged"); the first is the one reported against
# the copy and against gloo.
if part mapped; then
    modes=${GPU_CHECK_MAPPED_MODES:-whole shares staged}
    echo "[${SECONDS}s] == ibex_allreduce_perf on GPU buffers, mapped (CUDA IPC): $modes; beside a device copy"
    if [[ -x $bench ]] && "$bench" --benchmark_filter='^copy_d2d/268435456' --benchmark_format=csv \
        --benchmark_repetitions="$REPEAT" --benchmark_report_aggregates_only=true >"$work/d2d256.csv" 2>/dev/null; then
        d2d=$(awk -F, '$1 ~ /_median"?$/ || $1 ~ /manual_time"?$/ {printf "%.4g", $6 / 1e9; exit}' "$work/d2d256.csv")
    fi
    for np in 2 4; do
        for mode in $modes; do
            case $mode in
            whole) env=(IBEX_GPU_DIRECT=1 IBEX_GPU_DIRECT_LEADER=1) ;;
            shares) env=(IBEX_GPU_DIRECT=1 IBEX_GPU_DIRECT_LEADER=0) ;;
            staged) env=(IBEX_GPU_DIRECT=0) ;;
            *) echo "gpu-check: unknown mapped mode $mode" >&2; exit 2 ;;
            esac
            for i in $(seq "$REPEAT"); do
                out=$work/mapped_${np}_${mode}_$i.out
                env "${env[@]}" "$perf" -np "$np" -b 16M -e 256M -f 4 -n 10 -w 2 --mem cuda >"$out" 2>&1 ||
                    { cat "$out"; failed=1; }
            done
        done
        for size in 16777216 67108864 268435456; do
            msg="mapped $np ranks $size B:"
            first=
            for mode in $modes; do
                read -r mm ms <<<"$(busbw_median "$size" "$work"/mapped_"${np}_${mode}"_*.out)"
                msg+=" $mode $mm GB/s (spread $ms)"
                if [[ -z $first ]]; then first=$mm; else msg+=" (${modes%% *}/$mode $(ratio "$first" "$mm"))"; fi
            done
            [[ $size == 268435456 ]] && msg+="; device copy ${d2d:--} GB/s, ${modes%% *}/copy $(ratio "$first" "${d2d:--}") (issue 23's target >= 0.3)"
            echo "  $msg"
            note "$msg"
        done
        wrong=$(wrong_in "$work"/mapped_"${np}"_*.out)
        [[ $wrong -eq 0 ]] || failed=1
        note "mapped $np ranks: #wrong $wrong"
    done
fi

# ---- where a mapped op's time goes: IBEX_GPU_DIRECT_PROFILE=1 (each rank's mean per step,
# allreduce/gpu_direct.cpp), 4 ranks at 1 MiB and 256 MiB, run whole and per rank
if part profile; then
    echo "[${SECONDS}s] == mapped GPU allreduce, time per step (4 ranks, us)"
    for size in 1M 256M; do
        for leader in 1 0; do
            echo "  -b $size IBEX_GPU_DIRECT_LEADER=$leader:"
            IBEX_GPU_DIRECT_PROFILE=1 IBEX_GPU_DIRECT_LEADER=$leader "$perf" -np 4 -b "$size" -e "$size" -n 20 -w 2 --mem cuda \
                >"$work/profile.out" 2>&1 || { cat "$work/profile.out"; failed=1; }
            grep -E '^ +[0-9]+ ' "$work/profile.out" | head -1 | sed 's/^/    /'
            grep 'GPU-direct profile' "$work/profile.out" | sed 's/^/    /'
        done
    done
fi

# ---- the staged path (ranks on different hosts; here udp:lo): where its time goes, whether
# smaller chunks (more overlap of the copies with the wire) gain at 1 MiB, and how much the
# overlap across ops issued without waiting (prefetch and retirement, allreduce/
# gpu_staging.h) gains over ops issued one at a time (-z 1), each beside host buffers
if part staging; then
    echo "[${SECONDS}s] == staged GPU allreduce over udp:lo, time per step (us per op) and chunk size"
    for np in 2 4; do
        for size in 1M 16M; do
            for variant in default 262144 blocking; do
                echo "  -np $np -b $size, $([[ $variant == blocking ]] && echo "-z 1" || echo "IBEX_GPU_CHUNK $variant"):"
                run_env=() z=0
                [[ $variant == 262144 ]] && run_env=(IBEX_GPU_CHUNK="$variant")
                [[ $variant == blocking ]] && z=1
                env "${run_env[@]}" IBEX_GPU_STAGING_PROFILE=1 IBEX_SHM=0 timeout 120 "$perf" -np "$np" -b "$size" -e "$size" \
                    -n 20 -w 3 -z "$z" --mem cuda --device udp:lo >"$work/staging.out" 2>&1 || { cat "$work/staging.out"; failed=1; }
                grep -E '^ +[0-9]+ ' "$work/staging.out" | head -1 | sed 's/^/    /'
                grep 'GPU-staging profile' "$work/staging.out" | sed 's/^/    /'
            done
            for z in 0 1; do
                echo "  -np $np -b $size, host buffers, -z $z:"
                IBEX_SHM=0 timeout 120 "$perf" -np "$np" -b "$size" -e "$size" -n 20 -w 3 -z "$z" --device udp:lo \
                    >"$work/staging.out" 2>&1 || { cat "$work/staging.out"; failed=1; }
                grep -E '^ +[0-9]+ ' "$work/staging.out" | head -1 | sed 's/^/    /'
            done
        done
    done
fi

# ---- torch.distributed's gloo on CUDA tensors, the peer a framework user has today
py=${PYTHON:-python3}
if ! part gloo; then
    :
elif "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    echo "[${SECONDS}s] == gloo allreduce on CUDA tensors against ibex on GPU buffers"
    for np in 2 4; do
        for i in $(seq "$REPEAT"); do
            port=$((30000 + RANDOM % 20000))
            pids=()
            for r in $(seq 0 $((np - 1))); do
                timeout 120 "$py" bench/cross_host/gloo_allreduce.py "$r" "$np" 127.0.0.1 "$port" 1048576 268435456 5 cuda \
                    >"$work/gloo_${np}_${i}_$r.out" 2>&1 &
                pids+=($!)
            done
            wait "${pids[@]}" || cat "$work/gloo_${np}_${i}_0.out"
        done
        for size in 1048576 4194304 16777216 67108864 268435456; do
            read -r gm gs <<<"$(for i in $(seq "$REPEAT"); do awk -v s="$size" '$1 == s {print $3}' "$work/gloo_${np}_${i}_0.out"; done | median)"
            tr=${GPU_CHECK_TRANSPORTS:-shm udp}
            tr=${tr%% *}
            ibex_runs=("$work"/ar_"${tr}_${np}"_cuda_*.out)
            # 256 MiB: the mapped part's runs (its first mode)
            if [[ $size == 268435456 ]]; then
                first_mode=${GPU_CHECK_MAPPED_MODES:-whole}
                first_mode=${first_mode%% *}
                tr="mapped, $first_mode"
                ibex_runs=("$work"/mapped_"${np}_${first_mode}"_*.out)
            fi
            [[ -e ${ibex_runs[0]} ]] || continue
            read -r im is <<<"$(busbw_median "$size" "${ibex_runs[@]}")"
            msg="gloo $np ranks $size B on CUDA tensors: busbw $gm GB/s (spread $gs); ibex ($tr) GPU buffers $im GB/s; ratio $(ratio "$im" "$gm") (targets: >= 1.5, issue 17; >= 50 over shm, issue 23)"
            echo "  $msg"
            note "$msg"
        done
    done
else
    note "gloo: not run (no python3 with torch and CUDA)"
fi

# ---- a real NCCL loads the plugin (NcclNetPlugin.RealNcclLoadsIt), with the libnccl.so.2
# and libcudart of the installed torch when there is no system NCCL
plugin_test=$BUILD/tests/plugins/nccl-net/test_nccl_net_plugin
if part nccl && [[ -x $plugin_test ]]; then
    echo "[${SECONDS}s] == a real NCCL loads libnccl-net-ibex.so"
    dirs=$("$py" - 2>/dev/null <<'PY'
import glob, os
roots = []
try:
    import torch
    roots.append(os.path.dirname(torch.__file__))
except Exception:
    pass
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
found = set()
for r in roots:
    for pat in ("libnccl.so*", "libcudart.so*"):
        found.update(os.path.dirname(p) for p in glob.glob(os.path.join(r, "**", pat), recursive=True))
print(":".join(sorted(found)))
PY
)
    LD_LIBRARY_PATH=${dirs:+$dirs:}${LD_LIBRARY_PATH:-} "$plugin_test" --gtest_filter='NcclNetPlugin.RealNcclLoadsIt' \
        >"$work/nccl.log" 2>&1
    nccl_rc=$?
    tail -5 "$work/nccl.log"
    if grep -q '\[  SKIPPED \]' "$work/nccl.log"; then
        note "nccl: skipped ($(grep -m1 -A1 'Skipped' "$work/nccl.log" | tail -1))"
    elif [[ $nccl_rc -eq 0 ]]; then
        note "nccl: a real NCCL loaded and initialised the ibex net plugin"
    else
        note "nccl: FAILED (see the log above)"
        failed=1
    fi
fi

echo
echo "[${SECONDS}s] == gpu-check summary ($(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
for s in "${summary[@]}"; do echo "  $s"; done
if [[ $failed -ne 0 ]]; then
    echo "gpu-check: FAILED"
    exit 1
fi
echo "gpu-check: passed"
