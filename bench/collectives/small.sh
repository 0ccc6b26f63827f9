#!/usr/bin/env bash
# Small-message allreduce latency on one host: ibex_allreduce_perf -np N (f32 sum,
# out-of-place; issued all at once and then waited, the tool's default, and one at a time
# with -z 1, which is how the MPI program issues them) beside Open MPI's MPI_Allreduce over
# its shared-memory BTL (vader), interleaved --repeat times. Prints per rank count and size
# the median time in microseconds with the range, and ibex / MPI of the medians.
#
# usage: bench/collectives/small.sh [--build DIR] [--ranks "2 4"] [--sizes "8 1024 4096"]
#                                   [--iters 5000] [--warmup N] [--repeat 3] [--out DIR]
# The warm-up defaults to as many as the timed loop: issued all at once, like it, it grows
# what a burst of that depth uses (requests, the stream's queue) before the clock starts;
# a shorter one left that growth inside the first timed loop (+0.1-0.4 us per op).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
RANKS="2 4"
SIZES="8 1024 4096"
ITERS=5000
WARMUP=
REPEAT=3
OUT=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options small.sh 2,13 build ranks sizes iters warmup repeat out -- "$@"
[[ -n $WARMUP ]] || WARMUP=$ITERS
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_small_bench.XXXXXX)
mkdir -p "$OUT"
TOOL=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
mpicc -O2 -o "$OUT/mpi_allreduce_bench" bench/collectives/mpi_allreduce_bench.c
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"

# time (us) per size from a table: column 6 of ibex's, column 3 of the MPI program's.
ibex_times() { awk '/^ +[0-9]/ { print $1, $6 }' "$1"; }
mpi_times() { awk '/^ +[0-9]/ { print $1, $3 }' "$1"; }

for n in $RANKS; do
    for rep in $(seq 1 "$REPEAT"); do
        for size in $SIZES; do
            common=(-b "$size" -e "$size" -n "$ITERS" -w "$WARMUP" -d float -o sum --device udp:lo)
            "$TOOL" -np "$n" "${common[@]}" > "$OUT/ibex_np${n}_${size}_$rep.txt" 2>&1
            "$TOOL" -np "$n" "${common[@]}" -z 1 > "$OUT/ibexz_np${n}_${size}_$rep.txt" 2>&1
            mpirun --allow-run-as-root --oversubscribe -np "$n" --mca btl vader,self "$OUT/mpi_allreduce_bench" \
                -b "$size" -e "$size" -n "$ITERS" -w "$WARMUP" > "$OUT/mpi_np${n}_${size}_$rep.txt" 2>&1
        done
    done
    echo
    echo "## $n ranks: time per allreduce, us, median (min-max) of $REPEAT; ibex -z 0 issues all, then waits"
    printf "%8s  %22s  %22s  %22s  %8s  %8s\n" bytes "ibex" "ibex -z 1" "Open MPI vader" "ibex/MPI" "-z1/MPI"
    for size in $SIZES; do
        stats() { # prefix -> "median min max"
            local prefix=$1 kind=$2
            for rep in $(seq 1 "$REPEAT"); do
                if [[ $kind == mpi ]]; then mpi_times "$OUT/${prefix}_np${n}_${size}_$rep.txt"; else ibex_times "$OUT/${prefix}_np${n}_${size}_$rep.txt"; fi
            done | awk -v s="$size" '$1 == s { print $2 }' | sort -g |
                awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)], v[1], v[NR]; else print "nan nan nan" }'
        }
        read -r im ilo ihi < <(stats ibex ibex)
        read -r zm zlo zhi < <(stats ibexz ibex)
        read -r mm mlo mhi < <(stats mpi mpi)
        printf "%8s  %8s (%5s-%5s)  %8s (%5s-%5s)  %8s (%5s-%5s)  %8s  %8s\n" "$size" "$im" "$ilo" "$ihi" "$zm" "$zlo" "$zhi" \
            "$mm" "$mlo" "$mhi" "$(awk -v a="$im" -v b="$mm" 'BEGIN { printf "%.2f", a / b }')" \
            "$(awk -v a="$zm" -v b="$mm" 'BEGIN { printf "%.2f", a / b }')"
    done
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); raw tables in $OUT"
