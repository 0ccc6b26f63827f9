#!/usr/bin/env bash
# Hierarchical allreduce against the flat ring across two "hosts": network namespaces with
# a veth each on one bridge, every veth's egress shaped with tc (tbf) to --rate (10gbit).
# Two ranks per host (ibex_allreduce_perf launched by IBEX_RANK/IBEX_NRANKS, each on its
# host's veth, udp): --algo hierarchical and --algo ring with shm inside a host (the
# default), and ring with IBEX_SHM=0 (every byte over udp). --repeat runs of each,
# interleaved; per size the median time, its spread (min-max) and the ratio ring /
# hierarchical, and the cost model's predicted time (printed by ibex_allreduce_perf) over
# the measured median, for each of the three (model/meas; m/m). --dpdk PMD (af_packet)
# adds hierarchical with the network side over the DPDK port on the same veths (each rank
# its own address on its host's veth; its frames go through the tbf qdisc too,
# IBEX_AF_PACKET_QDISC=1). A fourth configuration runs with no --algo at all (shm in the
# host, udp across): what the cost model picks per size, and its time against the forced
# hierarchical one's. Needs root and iproute2.
#
# usage: bench/collectives/hierarchical.sh [--build DIR] [--rate 10gbit] [--burst 4mb]
#                                          [--repeat 3] [--min 1M] [--max 64M] [--iters 5]
#                                          [--out DIR] [--dpdk af_packet]
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
RATE=10gbit
BURST=4mb
REPEAT=3
MIN=1M
MAX=64M
ITERS=5
OUT=
DPDK=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options hierarchical.sh 2,16 build rate burst repeat min max iters out dpdk -- "$@"
[[ $(id -u) == 0 ]] || { echo "hierarchical.sh: needs root (network namespaces, tc)" >&2; exit 2; }
PERF=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
[[ -x $PERF ]] || { echo "hierarchical.sh: $PERF not built" >&2; exit 2; }
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_hier_bench.XXXXXX)
mkdir -p "$OUT"

ID=$$
NET=10.79.$((ID % 200 + 20))
BR=hbr$ID
NS=(hns${ID}_0 hns${ID}_1)
source bench/collectives/hosts.sh
trap 'shaped_hosts_down "$BR" "hns${ID}_" 2' EXIT INT TERM
shaped_hosts_up "$BR" "hns${ID}_" "hb${ID}_" "hv${ID}_" 2 "$NET" "$RATE" "$BURST"

# run TAG ALGO SHM DEV: one 4-rank run; rank 0's table in $OUT/TAG.txt.
run() {
    local tag=$1 algo=$2 shm=$3 dev=$4 pids=() r h device algo_args=(--algo "$2")
    [[ $algo != auto ]] || algo_args=() # the cost model's own choice
    for r in 0 1 2 3; do
        h=$((r / 2))
        device="udp:hv${ID}_$h:$((4791 + r))"
        [[ $dev == udp ]] || device="dpdk:$dev:hv${ID}_$h,ip=$NET.$((10 + r))/24"
        ip netns exec "${NS[$h]}" env IBEX_AF_PACKET_QDISC=1 IBEX_RANK=$r IBEX_NRANKS=4 IBEX_ROOT_ADDR="$NET.1:$((29500 + ID % 1000))" \
            IBEX_SHM="$shm" timeout 600 "$PERF" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w 1 -d float -o sum \
            "${algo_args[@]}" --device "$device" >"$OUT/$tag.r$r.txt" 2>"$OUT/$tag.r$r.err" &
        pids+=($!)
    done
    local ok=0
    for p in "${pids[@]}"; do wait "$p" || ok=1; done
    cp "$OUT/$tag.r0.txt" "$OUT/$tag.txt"
    return $ok
}

echo "# $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); 2 hosts x 2 ranks, links $RATE (burst $BURST); raw output in $OUT"
CONFIGS=("hier hierarchical 1 udp" "ring ring 1 udp" "ring_udp ring 0 udp" "auto auto 1 udp")
[[ -z $DPDK ]] || CONFIGS+=("hier_dpdk hierarchical 1 $DPDK")
for ((k = 1; k <= REPEAT; k++)); do
    for c in "${CONFIGS[@]}"; do
        read -r tag algo shm dev <<<"$c"
        run "${tag}_$k" "$algo" "$shm" "$dev" || echo "hierarchical.sh: run ${tag}_$k failed (see $OUT/${tag}_$k.r*.err)" >&2
    done
done
grep -h '^# Topology\|^# Cost model' "$OUT/hier_1.txt" || true

# Per config and size: median, min, max of the out-of-place time over the runs, and the
# median of the predicted times.
for c in "${CONFIGS[@]}"; do
    read -r tag _ _ _ <<<"$c"
    for ((k = 1; k <= REPEAT; k++)); do
        f=$OUT/${tag}_$k.txt
        awk -v k="$k" '/^# Predicted/ { for (i = 6; i <= NF; i++) { split($i, p, ":"); pred[p[1]] = p[2] } }
                       !/^#/ && NF >= 13 { print $1, $6, (($1 in pred) ? pred[$1] : -1) }' "$f"
    done >"$OUT/$tag.all"
done
summary() { # FILE -> "size median min max predicted_median" per size
    python3 - "$1" <<'PY'
import sys, collections
t, p = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    s, time, pred = line.split()
    t[int(s)].append(float(time)); p[int(s)].append(float(pred))
med = lambda v: sorted(v)[(len(v) - 1) // 2]
for s in sorted(t):
    print(s, med(t[s]), min(t[s]), max(t[s]), med(p[s]))
PY
}
summary "$OUT/hier.all" >"$OUT/hier.sum"
summary "$OUT/ring.all" >"$OUT/ring.sum"
summary "$OUT/ring_udp.all" >"$OUT/ring_udp.sum"
echo
echo "## allreduce, float sum, out-of-place, median of $REPEAT runs (min-max) in us; ratio = ring median / hierarchical median"
printf "%10s  %26s  %26s  %26s  %8s  %8s  %12s  %10s  %10s  %10s\n" size hierarchical "ring (shm in host)" "ring (all udp)" \
    ring/hier udp/hier "hier model" model/meas "ring m/m" "udp m/m"
join <(sort -k1,1 "$OUT/hier.sum") <(sort -k1,1 "$OUT/ring.sum") | join - <(sort -k1,1 "$OUT/ring_udp.sum") | sort -n |
    awk '{ printf "%10s  %9.0f (%6.0f-%6.0f)  %9.0f (%6.0f-%6.0f)  %9.0f (%6.0f-%6.0f)  %8.2f  %8.2f  %12.0f  %10.2f  %10.2f  %10.2f\n",
                  $1, $2, $3, $4, $6, $7, $8, $10, $11, $12, $6 / $2, $10 / $2, $5, $5 / $2, $9 / $6, $13 / $10 }'
summary "$OUT/auto.all" >"$OUT/auto.sum"
echo
echo "## the cost model's own choice (no --algo): per size the algorithm each run's communicator picked, the"
echo "## median time (min-max) in us, auto / hierarchical (median times; above 1: the choice cost time), model/meas"
printf "%10s  %-28s  %26s  %10s  %10s\n" size "picked (per run)" auto auto/hier model/meas
python3 - "$OUT" "$REPEAT" <<'PY'
import re, sys
out, repeat = sys.argv[1], int(sys.argv[2])
picked = {}
for k in range(1, repeat + 1):
    for line in open(f"{out}/auto_{k}.txt"):
        if line.startswith("# Algorithm:"):
            for lo, hi, algo in re.findall(r"(\d+)(?:-(\d+))? B (\w+)", line):
                picked.setdefault((int(lo), int(hi or lo)), []).append(algo)
def algos(size):
    names = [a for (lo, hi), v in picked.items() if lo <= size <= hi for a in v]
    return "/".join(dict.fromkeys(names)) if names else "?"
hier = {int(l.split()[0]): float(l.split()[1]) for l in open(f"{out}/hier.sum")}
for line in open(f"{out}/auto.sum"):
    s, med, lo, hi, pred = line.split()
    s, med = int(s), float(med)
    print(f"{s:>10}  {algos(s):<28}  {med:9.0f} ({float(lo):6.0f}-{float(hi):6.0f})  {med / hier[s]:10.2f}  {float(pred) / med:10.2f}")
PY
if [[ -n $DPDK ]]; then
    summary "$OUT/hier_dpdk.all" >"$OUT/hier_dpdk.sum"
    echo
    echo "## hierarchical with the network side over dpdk:$DPDK (same veths), median (min-max) in us; ratio = dpdk / udp time"
    printf "%10s  %26s  %10s\n" size "hierarchical (dpdk)" dpdk/udp
    join <(sort -k1,1 "$OUT/hier_dpdk.sum") <(sort -k1,1 "$OUT/hier.sum") | sort -n |
        awk '{ printf "%10s  %9.0f (%6.0f-%6.0f)  %10.2f\n", $1, $2, $3, $4, $2 / $6 }'
fi
