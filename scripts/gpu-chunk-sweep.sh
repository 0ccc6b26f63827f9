#!/usr/bin/env bash
# Collectives on GPU buffers stage through pinned host memory in chunks of at least
# IBEX_GPU_CHUNK bytes (at most 16 chunks; allreduce/gpu_staging.h): a chunk's copies in and
# out overlap the collective of its neighbours. This measures that choice on a CUDA host:
# ibex_allreduce_perf -np N with GPU buffers for each chunk size of CHUNKS, beside host
# buffers, over shm and over udp:lo (IBEX_SHM=0), 1 to 64 MiB, REPEAT runs interleaved. The staged path only
# (IBEX_GPU_DIRECT=0): with one host's ranks the mapped path (allreduce/gpu_direct.h) would
# otherwise take these sizes.
# Prints per transport, rank count and size the median busbw (GB/s) of host and of each
# chunk size, and each GPU / host ratio. Every run's #wrong must be 0.
# Usage: scripts/gpu-chunk-sweep.sh   (env: IBEX_BUILD_DIR, CHUNKS="262144 1048576 4194304",
#        REPEAT=3, NPS="2 4", TRANSPORTS="shm udp")
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${IBEX_BUILD_DIR:-build}
perf=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
CHUNKS=${CHUNKS:-262144 1048576 4194304}
REPEAT=${REPEAT:-3}
work=$(mktemp -d)
rc=0
median() { sort -g | awk '{v[NR] = $1} END {if (!NR) {print "-"; exit} printf "%.2f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for tr in ${TRANSPORTS:-shm udp}; do
    shm=1
    [[ $tr == udp ]] && shm=0
    for np in ${NPS:-2 4}; do
        for i in $(seq "$REPEAT"); do
            for cfg in host $CHUNKS; do
                mem=cuda chunk=$cfg
                [[ $cfg == host ]] && mem=host chunk=4194304
                out=$work/${tr}_${np}_${cfg}_$i.out
                IBEX_GPU_DIRECT=0 IBEX_SHM=$shm IBEX_GPU_CHUNK=$chunk timeout 120 "$perf" -np "$np" -b 1M -e 64M -f 4 -n 10 \
                    --device udp:lo --mem "$mem" >"$out" 2>&1 || { tail -5 "$out"; rc=1; }
                wrong=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {w += $9 + $13} END {print w + 0}' "$out")
                [[ $wrong -eq 0 ]] || { echo "gpu-chunk-sweep: $out: #wrong $wrong"; rc=1; }
            done
        done
        echo "# $tr, $np ranks: size, host busbw, then per chunk size: GPU busbw (GPU / host)"
        for size in 1048576 4194304 16777216 67108864; do
            line=$(printf "%9d" "$size")
            host=$(for i in $(seq "$REPEAT"); do awk -v s="$size" '$1 == s {print $8}' "$work/${tr}_${np}_host_$i.out"; done | median)
            line+=$(printf "  host %6s" "$host")
            for c in $CHUNKS; do
                g=$(for i in $(seq "$REPEAT"); do awk -v s="$size" '$1 == s {print $8}' "$work/${tr}_${np}_${c}_$i.out"; done | median)
                line+=$(printf "  %dK %6s (%s)" $((c / 1024)) "$g" "$(awk -v g="$g" -v h="$host" 'BEGIN {printf (h > 0 ? "%.2f" : "-"), g / h}')")
            done
            echo "$line"
        done
    done
done
exit "$rc"
