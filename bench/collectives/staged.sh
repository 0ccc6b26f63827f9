#!/usr/bin/env bash
# The staged collectives of one host (allreduce/shm_direct.h) beside the same collectives
# through process_vm_readv/writev (IBEX_SHM_STAGE_BYTES=0), alternated --repeat times, for
# each collective and rank count: ibex_allreduce_perf's busbw (out of place, f32 sum),
# median (min-max) of each side and staged / process_vm per size.
#
# usage: bench/collectives/staged.sh [--build DIR] [--ranks "2 4"]
#          [--colls "allreduce reduce_scatter allgather broadcast reduce"]
#          [--min 256K] [--max 16M] [--iters 20] [--repeat 3] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
RANKS="2 4"
COLLS="allreduce reduce_scatter allgather broadcast reduce"
MIN=256K
MAX=16M
ITERS=20
REPEAT=3
OUT=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options staged.sh 2,9 build ranks colls min max iters repeat out -- "$@"
TOOL=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
[[ -x $TOOL ]] || { echo "staged.sh: no $TOOL (build first)" >&2; exit 1; }
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_staged_bench.XXXXXX)
mkdir -p "$OUT"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; raw tables in $OUT"

for n in $RANKS; do
    for coll in $COLLS; do
        for rep in $(seq 1 "$REPEAT"); do
            for stage in default 0; do
                env_stage=()
                [[ $stage == 0 ]] && env_stage=(IBEX_SHM_STAGE_BYTES=0)
                env "${env_stage[@]}" timeout 300 "$TOOL" -np "$n" --coll "$coll" -b "$MIN" -e "$MAX" -f 2 \
                    -n "$ITERS" -w 3 -d float -o sum --device udp:lo >"$OUT/${coll}_np${n}_${stage}_$rep.txt" 2>&1
            done
        done
        # size and out-of-place busbw (column 7) of every run, then per size the medians.
        python3 - "$OUT" "$coll" "$n" "$REPEAT" <<'PY'
import statistics, sys
out, coll, n, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def table(stage, rep):
    rows = {}
    for line in open(f"{out}/{coll}_np{n}_{stage}_{rep}.txt"):
        f = line.split()
        if len(f) > 7 and f[0].isdigit():
            rows[int(f[0])] = float(f[6])
    return rows
runs = {s: [table(s, r) for r in range(1, reps + 1)] for s in ("default", "0")}
print(f"\n## {coll}, {n} ranks: busbw GB/s, median (min-max) of {reps}; staged = default, process_vm = IBEX_SHM_STAGE_BYTES=0")
print(f"{'bytes':>10}  {'staged':>22}  {'process_vm':>22}  {'ratio':>6}")
for size in sorted(runs["default"][0]):
    a = [t[size] for t in runs["default"] if size in t]
    b = [t[size] for t in runs["0"] if size in t]
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"{size:>10}  {ma:8.2f} ({min(a):5.2f}-{max(a):5.2f})  {mb:8.2f} ({min(b):5.2f}-{max(b):5.2f})  {ma / mb:6.2f}")
PY
    done
done
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
