#!/usr/bin/env bash
# The summation service where BytePS's analysis applies: every worker host and every server
# a "host" of its own, a network namespace with a veth on one bridge whose egress is shaped
# with tc (tbf) to --rate, so the links, not this machine's cores, set the pace. --per_host
# ranks on each of --hosts worker hosts (ibex_allreduce_perf launched by IBEX_RANK/
# IBEX_NRANKS over udp on its host's veth, shm between the ranks of a host), ibex_sumsrv on
# each server host (--device its veth). Runs ring, then sumsrv with each server count of
# --servers, --repeat times interleaved, f32 sum; prints per size the median out-of-place
# busbw (GB/s, nccl-tests' formula) with its range and the cost model's prediction (the
# predicted time ibex_allreduce_perf prints, as busbw) for sumsrv and for ring, then the
# measured and predicted ratios sumsrv / ring (above 1: sumsrv is faster) and BytePS's own
# model of that ratio for n workers on links of their own, (n^2 + kn - 2k) / n^2.
# Needs root and iproute2.
#
# usage: bench/collectives/sumsrv_hosts.sh [--build DIR] [--hosts 3] [--per_host 1] [--servers "1 2"] [--rate 1gbit]
#                                          [--burst 1mb] [--min 4M] [--max 16M] [--iters 5] [--repeat 3] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
HOSTS=3
PER_HOST=1
SERVERS="1 2"
RATE=1gbit
BURST=1mb
MIN=4M
MAX=16M
ITERS=5
REPEAT=3
OUT=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options sumsrv_hosts.sh 2,16 build hosts per_host servers rate burst min max iters repeat out -- "$@"
[[ $(id -u) == 0 ]] || { echo "sumsrv_hosts.sh: needs root (network namespaces, tc)" >&2; exit 2; }
PERF=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
SRV=$BUILD/tools/ibex_sumsrv/ibex_sumsrv
[[ -x $PERF && -x $SRV ]] || { echo "sumsrv_hosts.sh: build $PERF and $SRV first" >&2; exit 2; }
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_sumsrv_hosts.XXXXXX)
mkdir -p "$OUT"

WORKERS=$((HOSTS * PER_HOST))
maxk=0
for k in $SERVERS; do ((k > maxk)) && maxk=$k; done
ID=$$
NET=10.78.$((ID % 200 + 20))
BR=sbr$ID
ALL=$((HOSTS + maxk)) # worker hosts first, then servers
ns() { echo "sns${ID}_$1"; }
dev() { echo "sv${ID}_$1"; }
pids=()
source bench/collectives/hosts.sh
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    shaped_hosts_down "$BR" "sns${ID}_" "$ALL"
}
trap cleanup EXIT INT TERM
shaped_hosts_up "$BR" "sns${ID}_" "sb${ID}_" "sv${ID}_" "$ALL" "$NET" "$RATE" "$BURST"
servers=()
for ((s = 0; s < maxk; s++)); do
    h=$((HOSTS + s))
    ip netns exec "$(ns $h)" "$SRV" --listen "$NET.$((h + 1)):18600" --device "udp:$(dev $h)" --threads 1 \
        >"$OUT/server$s.log" 2>&1 &
    pids+=($!)
    servers+=("$NET.$((h + 1)):18600")
done
sleep 0.5

# run TAG ALGO K: one run of all ranks; rank 0's table in $OUT/TAG.txt.
run() {
    local tag=$1 algo=$2 k=$3 list rank_pids=() r h ok=0
    list=$(IFS=,; echo "${servers[*]:0:$k}")
    for ((r = 0; r < WORKERS; r++)); do
        h=$((r / PER_HOST))
        ip netns exec "$(ns $h)" env IBEX_RANK=$r IBEX_NRANKS="$WORKERS" IBEX_ROOT_ADDR="$NET.1:$((29500 + ID % 1000))" \
            IBEX_SUMSRV="$list" timeout 600 "$PERF" -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w 1 -d float -o sum \
            --algo "$algo" --device "udp:$(dev $h):$((4791 + r % PER_HOST))" >"$OUT/$tag.r$r.txt" 2>"$OUT/$tag.r$r.err" &
        rank_pids+=($!)
    done
    for p in "${rank_pids[@]}"; do wait "$p" || ok=1; done
    cp "$OUT/$tag.r0.txt" "$OUT/$tag.txt"
    return $ok
}

echo "# $(date -u '+%F %T UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $HOSTS hosts x $PER_HOST ranks, servers ${SERVERS// /,}, links $RATE (burst $BURST); raw output in $OUT"
for ((rep = 1; rep <= REPEAT; rep++)); do
    run "ring_$rep" ring 0 || echo "sumsrv_hosts.sh: ring_$rep failed (see $OUT/ring_$rep.r*.err)" >&2
    for k in $SERVERS; do
        run "k${k}_$rep" sumsrv "$k" || echo "sumsrv_hosts.sh: k${k}_$rep failed (see $OUT/k${k}_$rep.r*.err)" >&2
    done
done
stats() { # TAG SIZE -> "median min-max" of the out-of-place busbw (GB/s, from the time) over the repeats
    for f in "$OUT/$1"_*.txt; do
        awk -v s="$2" -v n="$WORKERS" '!/^#/ && $1 == s { print s / ($6 * 1e3) * 2 * (n - 1) / n }' "$f"
    done | sort -g |
        awk '{ v[NR] = $1 } END { if (!NR) { print "- -"; exit } m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                  printf "%.3f %.3f-%.3f", m, v[1], v[NR] }'
}
predicted() { # TAG SIZE -> the first run's predicted time, as busbw (GB/s)
    awk -v s="$2" -v n="$WORKERS" '/^# Predicted/ { for (i = 6; i <= NF; i++) { split($i, p, ":"); if (p[1] == s) t = p[2] } }
        END { printf "%.3f", (t > 0 ? s / (t * 1e3) * 2 * (n - 1) / n : 0) }' "$OUT/$1_1.txt"
}
sizes=$(awk '!/^#/ && NF >= 13 { print $1 }' "$OUT/ring_1.txt")
for k in $SERVERS; do
    echo "# $HOSTS hosts x $PER_HOST ranks, $k servers: size; busbw GB/s median (range) and predicted, sumsrv then ring;"
    echo "#   sumsrv / ring measured, predicted; BytePS's model"
    for size in $sizes; do
        read -r sm sr <<<"$(stats "k$k" "$size")"
        read -r rm rr <<<"$(stats ring "$size")"
        sp=$(predicted "k${k}" "$size")
        rp=$(predicted ring "$size")
        awk -v s="$size" -v sm="$sm" -v sr="$sr" -v rm="$rm" -v rr="$rr" -v sp="$sp" -v rp="$rp" -v n="$WORKERS" -v k="$k" \
            'BEGIN { printf "%9d  %6s (%s) %6.3f  %6s (%s) %6.3f  %.2f  %.2f  %.2f\n", s, sm, sr, sp, rm, rr, rp,
                     sm / rm, (rp > 0 ? sp / rp : 0), (n*n + k*n - 2*k) / (n*n) }'
        done
done
