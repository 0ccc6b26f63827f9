#!/usr/bin/env bash
# The summation service against ring on one host: ibex_allreduce_perf -np N over udp:lo
# (IBEX_SHM=0: workers and servers on the same transport) with IBEX_ALGO=ring and with
# IBEX_ALGO=sumsrv and 1 or 2 ibex_sumsrv servers (started here, --threads 1), in turn,
# --repeat times, f32 sum, 1 MiB to 16 MiB. Prints per rank count, server count and size
# the median out-of-place busbw (GB/s, from the time) with the range and the cost model's
# prediction (ibex_allreduce_perf's predicted time) for sumsrv and ring, and the measured
# and predicted ratios sumsrv / ring.
# BytePS's model predicts n^2 / (n^2 + kn - 2k) of ring's time where every link is its own;
# here all ranks and servers share the machine's cores and its loopback.
#
# usage: bench/collectives/sumsrv.sh [--build DIR] [--ranks "3 4"] [--servers "1 2"] [--iters 20] [--repeat 3] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${IBEX_BUILD_DIR:-build}
RANKS="3 4"
SERVERS="1 2"
ITERS=20
REPEAT=3
OUT=
source bench/collectives/options.sh # after the cd to the top of the tree
bench_options sumsrv.sh 2,10 build ranks servers iters repeat out -- "$@"
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/ibex_sumsrv_bench.XXXXXX)
mkdir -p "$OUT"
TOOL=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
SRV=$BUILD/tools/ibex_sumsrv/ibex_sumsrv
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"

pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
maxk=0
for k in $SERVERS; do ((k > maxk)) && maxk=$k; done
list=()
for s in $(seq 1 "$maxk"); do
    rm -f "$OUT/port$s"
    "$SRV" --listen 127.0.0.1:0 --threads 1 --port-file "$OUT/port$s" >"$OUT/server$s.log" 2>&1 &
    pids+=($!)
done
for s in $(seq 1 "$maxk"); do
    for _ in $(seq 1 100); do [[ -s $OUT/port$s ]] && break; sleep 0.05; done
    list+=("127.0.0.1:$(cat "$OUT/port$s")")
done

run() { # name servers ranks rep
    local servers=$2
    IBEX_SHM=0 IBEX_SUMSRV=$servers IBEX_ALGO=$1 timeout 300 "$TOOL" -np "$3" -b 1M -e 16M -f 4 \
        -n "$ITERS" -w 3 --device udp:lo >"$OUT/np$3_$1_k$5_$4.txt" 2>&1 || { cat "$OUT/np$3_$1_k$5_$4.txt"; exit 1; }
}
for n in $RANKS; do
    for rep in $(seq 1 "$REPEAT"); do
        run ring "" "$n" "$rep" 0
        for k in $SERVERS; do
            run sumsrv "$(IFS=,; echo "${list[*]:0:$k}")" "$n" "$rep" "$k"
        done
    done
    for k in $SERVERS; do
        echo "# $n ranks, $k servers: size; busbw GB/s median (range) and predicted, sumsrv then ring;"
        echo "#   sumsrv / ring measured, predicted; BytePS's model"
        for size in 1048576 4194304 16777216; do
            stats() { # median and range of the out-of-place busbw (GB/s, from the time) at this size
                for f in "$OUT/np${n}_$1"_*.txt; do
                    awk -v s="$size" -v n="$n" '!/^#/ && $1 == s { print s / ($6 * 1e3) * 2 * (n - 1) / n }' "$f"
                done | sort -g |
                    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                              printf "%.2f %.2f-%.2f", m, v[1], v[NR] }'
            }
            predicted() { # the first run's predicted time at this size, as busbw
                awk -v s="$size" -v n="$n" '/^# Predicted/ { for (i = 6; i <= NF; i++) { split($i, p, ":"); if (p[1] == s) t = p[2] } }
                    END { printf "%.2f", (t > 0 ? s / (t * 1e3) * 2 * (n - 1) / n : 0) }' "$OUT/np${n}_$1_1.txt"
            }
            read -r sm sr <<<"$(stats "sumsrv_k$k")"
            read -r rm rr <<<"$(stats ring_k0)"
            sp=$(predicted "sumsrv_k$k")
            rp=$(predicted ring_k0)
            awk -v s="$size" -v sm="$sm" -v sr="$sr" -v rm="$rm" -v rr="$rr" -v sp="$sp" -v rp="$rp" -v n="$n" -v k="$k" \
                'BEGIN { printf "%9d  %6s (%s) %6.2f  %6s (%s) %6.2f  %.2f  %.2f  %.2f\n", s, sm, sr, sp, rm, rr, rp,
                         sm / rm, (rp > 0 ? sp / rp : 0), (n*n + k*n - 2*k) / (n*n) }'
        done
    done
done
echo "# raw tables in $OUT"
