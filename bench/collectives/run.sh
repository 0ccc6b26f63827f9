#!/usr/bin/env bash
# ibex_allreduce_perf beside Open MPI's MPI_Allreduce on this host, in one go: for each
# rank count, ibex over each device given (soft provider: udp:lo; the DPDK port when a
# dpdk:... device is given; "dpdk:switch" joins any number of ranks' memif ports through
# ibex_switch), and MPI_Allreduce over Open MPI's TCP BTL and its
# shared-memory BTL (vader), same sizes, f32 sum, out-of-place. Prints per rank count a
# table of time and busbw per size and the ratio of each ibex device's busbw to each MPI's.
#
# usage: bench/collectives/run.sh [--build DIR] [--ranks "2 4"] [--devices "udp:lo ..."]
#                                 [--min 8] [--max 64M] [--iters 10] [--warmup 2] [--out DIR]
#                                 [--repeat 1] [--coll allreduce] [--ranks_per_host N]
# --coll alltoall: ibex_alltoall beside MPI_Alltoall instead (the size: a rank's whole send
# buffer; busbw = algbw (n-1)/n). --coll sendrecv: every rank sends to rank+1 and receives
# from rank-1 at once, ibex_p2p_batch beside MPI_Sendrecv (busbw = algbw).
# --repeat N: N rounds, each measuring every column once in turn (one table per round), then
# per rank count the median (min-max) over the rounds of each ibex / MPI busbw ratio, the
# ratio being taken within a round (this VM's speed moves between runs).
# A device word ending in "+shared" (udp:lo+shared) runs ibex with -R 1: its buffers from
# ibex_comm_mem_alloc, which same-host peers map and use in place (Open MPI's stay malloc'd).
# --ranks_per_host N: ibex's ranks r / N make a host each (IBEX_HOST_ID), so ranks of
# different hosts talk over the device as across a network; beside Open MPI's TCP only.
# The MPI program (mpi_allreduce_bench.c) is compiled with mpicc into the output folder.
# Raw tables stay in --out (default: a fresh folder under /tmp, printed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
RANKS="2 4"
DEVICES="udp:lo"
MIN=8
MAX=64M
ITERS=10
WARMUP=2
OUT=
REPEAT=1
COLL=allreduce
RANKS_PER_HOST=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options run.sh 2,23 build ranks devices min max iters warmup out repeat coll ranks_per_host -- "$@"
[[ $COLL == allreduce || $COLL == alltoall || $COLL == sendrecv ]] ||
    { echo "run.sh: --coll allreduce, alltoall or sendrecv" >&2; exit 2; }
BUSF=$([[ $COLL == allreduce ]] && echo 2 || echo 1) # busbw = algbw x BUSF (n-1)/n (sendrecv: x 1)
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_coll_bench.XXXXXX)
mkdir -p "$OUT"

PERF=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
SWITCH=$BUILD/tools/ibex_switch/ibex_switch
[[ -x $PERF ]] || { echo "run.sh: $PERF not built (cmake --build $BUILD --target ibex_allreduce_perf)" >&2; exit 2; }
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    { echo "run.sh: mpicc/mpirun missing (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 2; }
MPIB=$OUT/mpi_allreduce_bench
mpicc -O2 -o "$MPIB" bench/collectives/mpi_allreduce_bench.c

# "size time_us" per line, from either tool's table (out-of-place columns); busbw is
# recomputed from these (the tables round it to 0.01 GB/s).
ibex_cols() { awk '!/^#/ && NF >= 13 { print $1, $6 }' "$1"; }
mpi_cols() { awk '!/^#/ && NF >= 6 { print $1, $3 }' "$1"; }

MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
cols=()
names=()
# measure TAG NAME COLS_FN COMMAND...: runs one benchmark into $OUT/TAG.txt and its
# "size time" columns into $OUT/TAG.cols (empty if it failed, so the table shows "-").
measure() {
    local tag=$1 name=$2 fn=$3
    shift 3
    echo "## $*" >&2
    if timeout 1200 "$@" >"$OUT/$tag.txt" 2>"$OUT/$tag.err"; then
        "$fn" "$OUT/$tag.txt" >"$OUT/$tag.cols"
    else
        echo "run.sh: $name failed (see $OUT/$tag.err); its columns stay empty" >&2
        : >"$OUT/$tag.cols"
    fi
    cols+=("$OUT/$tag.cols")
    names+=("$name")
}

echo "# $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); raw output in $OUT"
[[ -z $RANKS_PER_HOST ]] || echo "# ibex: $RANKS_PER_HOST rank(s) per host (IBEX_HOST_ID), the others over the device"
for round in $(seq "$REPEAT"); do
((REPEAT == 1)) || echo "# round $round of $REPEAT"
for n in $RANKS; do
    cols=()
    names=()
    for dev in $DEVICES; do
        shared=()
        suffix=
        if [[ $dev == *+shared ]]; then
            dev=${dev%+shared}
            shared=(-R 1)
            suffix=+shared
        fi
        label=${dev%%,*}                          # "dpdk:memif:/x.sock,ip=..." -> "dpdk:memif"
        label=$(cut -d: -f1-2 <<<"$label")$suffix
        rankdev=$dev
        if [[ $dev == dpdk:switch ]]; then
            # Any rank count over DPDK: each rank's memif port meets ibex_switch, which
            # forwards by destination IP (unshaped: --rate far above what the CPU moves).
            ports=()
            for ((r = 0; r < n; r++)); do ports+=("$OUT/sw$n-$r.sock=10.79.0.$((10 + r))"); done
            "$SWITCH" --memif "$(IFS=,; echo "${ports[*]}")" --rate 1000000 --buffer $((64 << 20)) --no-ecn \
                >"$OUT/switch_$n.log" 2>&1 &
            switch_pid=$!
            sleep 1
            rankdev="dpdk:memif:$OUT/sw$n-{rank}.sock,role=client,ip=10.79.0.1{rank}"
            ((n <= 10)) || { echo "run.sh: dpdk:switch takes at most 10 ranks" >&2; rankdev=none; }
        fi
        sock=${dev%%,*}
        if [[ $dev == dpdk:memif:* && $sock != *"{rank}"* ]] && ((n > 2)); then
            # One memif socket joins exactly two ports.
            echo "run.sh: ibex:$label skipped for $n ranks: one memif socket joins two ranks (use dpdk:switch)" >&2
            : >"$OUT/ibex_${dev//[^A-Za-z0-9]/_}_$n.cols"
            cols+=("$OUT/ibex_${dev//[^A-Za-z0-9]/_}_$n.cols")
            names+=("ibex:$label")
        else
            measure "ibex_${dev//[^A-Za-z0-9]/_}${suffix:+_shared}_$n" "ibex:$label" ibex_cols \
                "$PERF" -np "$n" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARMUP" -d float -o sum --device "$rankdev" --coll "$COLL" \
                "${shared[@]}" ${RANKS_PER_HOST:+--ranks_per_host "$RANKS_PER_HOST"}
        fi
        if [[ $dev == dpdk:switch ]]; then
            kill "$switch_pid" 2>/dev/null || true
            wait "$switch_pid" 2>/dev/null || true
        fi
    done
    # Open MPI's TCP BTL skips loopback unless told; ibex's soft provider runs on lo too.
    measure "mpi_tcp_$n" ompi:tcp mpi_cols "${MPIRUN[@]}" -np "$n" --mca btl tcp,self --mca btl_tcp_if_include lo \
        "$MPIB" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARMUP" -c "$COLL"
    # With --ranks_per_host, ibex's ranks of different hosts share no memory: TCP is the peer.
    [[ -n $RANKS_PER_HOST ]] ||
        measure "mpi_vader_$n" ompi:vader mpi_cols "${MPIRUN[@]}" -np "$n" --mca btl vader,self \
            "$MPIB" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARMUP" -c "$COLL"

    # Join on size: time and busbw per column, then each ibex device over each MPI.
    echo
    echo "## $n ranks, float, out-of-place: time per $COLL (us) and busbw (GB/s = 10^9 B/s)"
    awk -v names="${names[*]}" -v ndev="$(wc -w <<<"$DEVICES")" -v n="$n" -v busf="$BUSF" -v coll="$COLL" '
        BEGIN { nn = split(names, nm, " "); for (i = 1; i < ARGC; i++) idx[ARGV[i]] = i }
        { f = idx[FILENAME] }  # by name: a failed run leaves an empty file, which must keep its column
        $2 > 0 {
            t[f, $1] = $2; b[f, $1] = $1 / ($2 * 1e3) * (coll == "sendrecv" ? 1 : busf * (n - 1) / n)  # nccl-tests busbw
            if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 }
        }
        END {
            printf "%10s", "size"
            for (i = 1; i <= nn; i++) printf "  %22s", nm[i] " us/GB/s"
            for (d = 1; d <= ndev; d++)
                for (i = ndev + 1; i <= nn; i++) printf "  %16s", substr(nm[d], 6) "/" substr(nm[i], 6)
            printf "\n"
            for (s = 1; s <= ns; s++) {
                z = order[s]; printf "%10s", z
                for (i = 1; i <= nn; i++)
                    if ((i, z) in t) printf "  %11.1f / %8.4f", t[i, z], b[i, z]; else printf "  %22s", "-"
                for (d = 1; d <= ndev; d++)
                    for (i = ndev + 1; i <= nn; i++)
                        if ((d, z) in b && (i, z) in b) printf "  %16.3f", b[d, z] / b[i, z]; else printf "  %16s", "-"
                printf "\n"
            }
        }' "${cols[@]}"
    for i in "${!cols[@]}"; do cp "${cols[$i]}" "$OUT/round_${n}_${round}_$i.cols"; done
    printf '%s\n' "${names[@]}" >"$OUT/names_$n"
done
done

# Over the rounds: per rank count, size and pair, the median (min-max) of the within-round
# busbw ratios (ibex device over MPI BTL).
if ((REPEAT > 1)); then
    for n in $RANKS; do
        echo
        echo "## $n ranks, $REPEAT rounds: ibex busbw / MPI busbw within a round, median (min-max)"
        awk -v ndev="$(wc -w <<<"$DEVICES")" -v names="$(paste -sd' ' "$OUT/names_$n")" '
            BEGIN { nn = split(names, nm, " ") }
            {
                f = FILENAME; sub(/.*\//, "", f); sub(/\.cols$/, "", f)  # round_N_ROUND_COLUMN
                split(f, p, "_"); r = p[3] + 0; c = p[4] + 1
                if ($2 > 0) { t[r, c, $1] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++ns] = $1 } }
                if (r > nr) nr = r
            }
            function show(v, k,   i, j, x, m) {
                if (k == 0) return sprintf("%22s", "-")
                for (i = 2; i <= k; i++) { x = v[i]; for (j = i - 1; j >= 1 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
                m = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
                return sprintf("%8.3f (%5.2f-%5.2f)", m, v[1], v[k])
            }
            END {
                printf "%10s", "size"
                for (d = 1; d <= ndev; d++) for (i = ndev + 1; i <= nn; i++) printf "  %22s", substr(nm[d], 6) "/" substr(nm[i], 6)
                printf "\n"
                for (s = 1; s <= ns; s++) {
                    z = order[s]; printf "%10s", z
                    for (d = 1; d <= ndev; d++)
                        for (i = ndev + 1; i <= nn; i++) {
                            k = 0; delete v
                            for (r = 1; r <= nr; r++) if ((r, d, z) in t && (r, i, z) in t) v[++k] = t[r, i, z] / t[r, d, z]
                            printf "  %s", show(v, k)
                        }
                    printf "\n"
                }
            }' "$OUT"/round_"${n}"_*.cols
    done
fi
echo
echo "# ratio dev/btl: busbw of ibex on that device / busbw of MPI over that BTL (= MPI time / ibex time);"
echo "# above 1 means ibex is faster. busbw = size / time x $([[ $COLL == sendrecv ]] && echo 1 || echo "$BUSF(n-1)/n") (nccl-tests' $COLL factor)."
