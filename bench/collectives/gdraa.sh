#!/usr/bin/env bash
# GDRAA against ring on one host: ibex_allreduce_perf -np N with IBEX_ALGO=gdraa and
# IBEX_ALGO=ring in turn (interleaved --repeat times), f32 sum, 8 B to 1 MiB, over udp:lo
# (IBEX_SHM=0) and over shm with its direct path off (IBEX_SHM_DIRECT_MIN=0), so both run
# their schedules on the executor. Prints per transport, rank count and size the median
# out-of-place time in microseconds with the range, and gdraa / ring of the medians.
# Control messages per allreduce are counted by the test
# AlgorithmsForced.GdraaAnnouncesBuffersOnceAndSendsNoCredits, not here.
#
# usage: bench/collectives/gdraa.sh [--build DIR] [--ranks "2 4"] [--iters 200] [--repeat 3] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
RANKS="2 4"
ITERS=200
REPEAT=3
OUT=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options gdraa.sh 2,11 build ranks iters repeat out -- "$@"
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_gdraa_bench.XXXXXX)
mkdir -p "$OUT"
TOOL=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"

for tr in udp shm; do
    shm=1
    [[ $tr == udp ]] && shm=0
    for n in $RANKS; do
        for rep in $(seq 1 "$REPEAT"); do
            for algo in gdraa ring; do
                IBEX_SHM=$shm IBEX_SHM_DIRECT_MIN=0 IBEX_ALGO=$algo timeout 300 "$TOOL" -np "$n" -b 8 -e 1M -f 8 \
                    -n "$ITERS" -w 20 --device udp:lo >"$OUT/${tr}_np${n}_${algo}_$rep.txt" 2>&1 ||
                    { cat "$OUT/${tr}_np${n}_${algo}_$rep.txt"; exit 1; }
            done
        done
        echo "# $tr, $n ranks: size, gdraa median us (range), ring median us (range), gdraa / ring"
        for size in 8 64 512 4096 32768 262144; do
            stats() { # median and range of column 6 at this size over the repeats
                for f in "$OUT/${tr}_np${n}_$1"_*.txt; do awk -v s="$size" '$1 == s { print $6 }' "$f"; done | sort -g |
                    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                              printf "%.1f %.1f-%.1f", m, v[1], v[NR] }'
            }
            read -r gm gr <<<"$(stats gdraa)"
            read -r rm rr <<<"$(stats ring)"
            awk -v s="$size" -v gm="$gm" -v gr="$gr" -v rm="$rm" -v rr="$rr" \
                'BEGIN { printf "%8d  %9s (%s)  %9s (%s)  %.2f\n", s, gm, gr, rm, rr, gm / rm }'
        done
    done
done
echo "# raw tables in $OUT"
