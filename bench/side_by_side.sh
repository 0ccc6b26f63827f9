#!/usr/bin/env bash
# Side-by-side on loopback, in one go (a few minutes at most):
#   bandwidth, 64 KiB messages: ibex_write_bw (soft/udp)  vs  iperf3 (TCP)  and  ucx_perftest ucp_put_bw (UCX_TLS=tcp)
#   latency, 2 bytes:           ibex_write_lat (soft/udp) vs  ucx_perftest tag_lat (UCX_TLS=tcp)
# and the ratios ibex bw / iperf3 bw and ibex lat / ucx lat (issue 2 targets: >= 1.0 and <= 0.7).
# With DPDK built (bench/dpdk_raw/ibex_dpdk_raw present), the dpdk port over memif too:
#   bandwidth, 64 KiB, 4 KiB MTU, 1 and 4 QPs: ibex_write_bw (soft/dpdk memif) vs the raw memif
#   frame rate of ibex_dpdk_raw (same frame size, same run) and vs soft/udp above
#   the same frames with the least RoCE work per frame (ibex_dpdk_raw ... roce: each side
#   copies the payload once, between a 64 KiB region and the frame, with the ICRC computed
#   from the same loads): the bound of any software RoCEv2 endpoint on this path
#   (ibex_dpdk_raw runs its source and sink on two different CPUs; each harness mode runs
#   SIDE_HARNESS_RUNS times, default 5 of SIDE_HARNESS_SECONDS=1, and its best run is the
#   bound)
#   latency, 2 bytes: ibex_write_lat (soft/dpdk memif)
# (issue 21 target: >= 0.5 of raw memif at 1 and 4 QPs; issue 3: <= 3 us, >= 3x soft/udp).
# Issue 21's other targets on this host, when Open MPI is installed (SIDE_COLL=0 skips them):
#   soft/udp with 4 QPs and bidirectional (-b) against 1 QP one way
#   8-byte allreduce, 2 ranks, one at a time: ibex over udp:lo vs MPI_Allreduce over
#     Open MPI's TCP BTL on lo (bench/collectives/mpi_allreduce_bench.c)
#   2-rank allreduce busbw, 1-16 MiB: ibex over udp:lo and the dpdk port (memif) vs the same
#     MPI; ibex runs with IBEX_SHM=0, so the ranks' data crosses the transport measured
# Across hosts (namespaces on a bridge) is bench/cross_host/udp_vs_tcp.sh.
#
# usage: bench/side_by_side.sh [BUILD_DIR]      (default: $IBEX_BUILD_DIR, else build)
# env:   SIDE_SECONDS (bandwidth run length, default 5), SIDE_PORT (first TCP port, default 18600),
#        SIDE_LAT_ITERS (latency iterations, default 20000), SIDE_DPDK=0 (skip the dpdk runs),
#        SIDE_UDP=0 (skip the udp port and its TCP peers: the dpdk rows alone),
#        SIDE_COLL=0 (skip the allreduce rows), SIDE_COLL_ITERS (8-byte iterations, 20000),
#        SIDE_COLL_BUS_ITERS (timed iterations of each busbw size, 50)
# Latency figures are medians of half round trips (ibex t_typical, UCX 50th percentile);
# bandwidth in Gb/s (10^9 bits).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${1:-${IBEX_BUILD_DIR:-build}}
SECONDS_BW=${SIDE_SECONDS:-5}
PORT=${SIDE_PORT:-18600}
LAT_ITERS=${SIDE_LAT_ITERS:-20000}
BW=$BUILD/tools/ibex_write_bw/ibex_write_bw
LAT=$BUILD/tools/ibex_write_lat/ibex_write_lat
for t in "$BW" "$LAT"; do
    [[ -x $t ]] || { echo "side_by_side: $t not built (run scripts/setup.sh first)" >&2; exit 1; }
done

TMP=$(mktemp -d /tmp/ibex_side.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        if [[ -n $p ]]; then kill "$p" 2>/dev/null || true; fi
    done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

# server_then_client NAME SERVER_CMD... -- CLIENT_CMD...: runs both (each under a time
# limit), client output in $TMP/NAME.out. Fails if either side fails.
server_then_client() {
    local name=$1; shift
    local server=() client=()
    while [[ $1 != -- ]]; do server+=("$1"); shift; done
    shift
    client=("$@")
    timeout 120 "${server[@]}" >"$TMP/$name.server" 2>&1 &
    local spid=$!
    PIDS+=("$spid")
    sleep 0.5
    if ! timeout 120 "${client[@]}" >"$TMP/$name.out" 2>&1; then
        echo "side_by_side: $name client failed:" >&2
        cat "$TMP/$name.out" "$TMP/$name.server" >&2
        return 1
    fi
    wait "$spid" || { echo "side_by_side: $name server failed:" >&2; cat "$TMP/$name.server" >&2; return 1; }
}

have() { command -v "$1" >/dev/null 2>&1; }
# bw_of FILE: the average Gb/s of an ibex_write_bw table
bw_of() { awk '/BW average\[Gb\/sec\]/ { t = 1; next } t && NF == 5 { print $4; exit }' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

echo "== loopback side by side ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)); ${SECONDS_BW} s bandwidth runs"

IBEX_BW="" IBEX_BW4="" IBEX_BWB="" IBEX_LAT="" IPERF_BW="" UCX_BW="" UCX_LAT=""
if [[ ${SIDE_UDP:-1} != 0 ]]; then
# ---- ibex bandwidth: 64 KiB RDMA WRITEs for SECONDS_BW seconds, Gb/s average
server_then_client ibex_bw "$BW" -s 65536 -D "$SECONDS_BW" --report_gbits -p "$PORT" -- \
    "$BW" -s 65536 -D "$SECONDS_BW" --report_gbits -p "$PORT" 127.0.0.1
IBEX_BW=$(bw_of "$TMP/ibex_bw.out")
echo "ibex_write_bw   64 KiB  soft/udp        : ${IBEX_BW} Gb/s"
# The same with 4 QPs, and with both directions at once (-b: the sum of both).
server_then_client ibex_bw4 "$BW" -s 65536 -q 4 -D "$SECONDS_BW" --report_gbits -p $((PORT + 20)) -- \
    "$BW" -s 65536 -q 4 -D "$SECONDS_BW" --report_gbits -p $((PORT + 20)) 127.0.0.1
IBEX_BW4=$(bw_of "$TMP/ibex_bw4.out")
echo "ibex_write_bw   64 KiB  soft/udp        : ${IBEX_BW4} Gb/s (4 QPs)"
server_then_client ibex_bwb "$BW" -s 65536 -b -D "$SECONDS_BW" --report_gbits -p $((PORT + 21)) -- \
    "$BW" -s 65536 -b -D "$SECONDS_BW" --report_gbits -p $((PORT + 21)) 127.0.0.1
IBEX_BWB=$(bw_of "$TMP/ibex_bwb.out")
echo "ibex_write_bw   64 KiB  soft/udp        : ${IBEX_BWB} Gb/s (1 QP, both directions together)"

# ---- ibex latency: 2-byte ping-pong, median half round trip
server_then_client ibex_lat "$LAT" -s 2 -n "$LAT_ITERS" -p $((PORT + 1)) -- \
    "$LAT" -s 2 -n "$LAT_ITERS" -p $((PORT + 1)) 127.0.0.1
IBEX_LAT=$(awk '/t_typical/ { t = 1; next } t && NF == 9 { print $5; exit }' "$TMP/ibex_lat.out")
IBEX_LAT_AVG=$(awk '/t_typical/ { t = 1; next } t && NF == 9 { print $6; exit }' "$TMP/ibex_lat.out")
echo "ibex_write_lat  2 B     soft/udp        : ${IBEX_LAT} us typical (avg ${IBEX_LAT_AVG} us)"

# ---- iperf3: TCP loopback, one stream
if have iperf3; then
    server_then_client iperf3 iperf3 -s -1 -B 127.0.0.1 -p $((PORT + 2)) -- \
        iperf3 -c 127.0.0.1 -p $((PORT + 2)) -t "$SECONDS_BW" -J
    IPERF_BW=$(awk '/"sum_received"/ { t = 1 } t && /"bits_per_second"/ { gsub(/[^0-9.e+]/, "", $2); printf "%.2f", $2 / 1e9; exit }' "$TMP/iperf3.out")
    echo "iperf3          TCP     loopback        : ${IPERF_BW} Gb/s"
else
    echo "iperf3          not installed: skipped"
fi

# ---- ucx_perftest over TCP: put bandwidth (64 KiB) and tag latency (2 B)
if have ucx_perftest; then
    export UCX_TLS=tcp
    # MB/s in ucx_perftest is 2^20 bytes/s; "Final:" = iterations, latency typical/avg/overall, bw avg/overall, rate avg/overall.
    server_then_client ucx_bw ucx_perftest -p $((PORT + 3)) -- \
        ucx_perftest 127.0.0.1 -p $((PORT + 3)) -t ucp_put_bw -s 65536 -n 20000
    UCX_BW=$(awk '/^Final:/ { printf "%.2f", $7 * 1048576 * 8 / 1e9 }' "$TMP/ucx_bw.out")
    echo "ucx_perftest    64 KiB  ucp_put_bw tcp  : ${UCX_BW} Gb/s"
    server_then_client ucx_lat ucx_perftest -p $((PORT + 4)) -- \
        ucx_perftest 127.0.0.1 -p $((PORT + 4)) -t tag_lat -s 2 -n "$LAT_ITERS"
    UCX_LAT=$(awk '/^Final:/ { print $3 }' "$TMP/ucx_lat.out")
    UCX_LAT_AVG=$(awk '/^Final:/ { print $4 }' "$TMP/ucx_lat.out")
    echo "ucx_perftest    2 B     tag_lat tcp     : ${UCX_LAT} us typical (avg ${UCX_LAT_AVG} us)"
    unset UCX_TLS
else
    echo "ucx_perftest    not installed: skipped"
fi
fi # SIDE_UDP

# ---- dpdk port over memif: the two tools meet on a memif socket of this run (the first
# to open it serves). The raw rate uses frames as long as a 4 KiB-MTU RDMA WRITE MIDDLE
# (14 Ethernet + 20 IP + 8 UDP + 12 BTH + 4096 + 4 ICRC); its payload-equivalent rate is
# what ibex could reach at most.
RAW=$BUILD/bench/dpdk_raw/ibex_dpdk_raw
DPDK_BW1="" DPDK_BW4="" DPDK_LAT="" RAW_GBITS="" RAW_MPPS="" RAW_PAYLOAD="" ROCE_MPPS="" ROCE_PAYLOAD=""
# field NAME FILE: the value of NAME=... on the sink's line
field() { awk -v k="$1=" '/^sink/ { for (i = 1; i <= NF; ++i) if (index($i, k) == 1) { sub(k, "", $i); print $i } }' "$2"; }
if [[ ${SIDE_DPDK:-1} != 0 && -x $RAW ]]; then
    DEV="dpdk:memif:$TMP/memif.sock"
    for q in 1 4; do
        server_then_client "dpdk_bw$q" "$BW" -d "$DEV" -s 65536 -m 4096 -q "$q" -D "$SECONDS_BW" --report_gbits -p $((PORT + 5 + q)) -- \
            "$BW" -d "$DEV" -s 65536 -m 4096 -q "$q" -D "$SECONDS_BW" --report_gbits -p $((PORT + 5 + q)) 127.0.0.1
        v=$(awk '/BW average\[Gb\/sec\]/ { t = 1; next } t && NF == 5 { print $4; exit }' "$TMP/dpdk_bw$q.out")
        if [[ $q == 1 ]]; then DPDK_BW1=$v; else DPDK_BW4=$v; fi
        echo "ibex_write_bw   64 KiB  soft/dpdk memif : ${v} Gb/s ($q QP, 4 KiB MTU)"
    done
    server_then_client dpdk_lat "$LAT" -d "$DEV" -s 2 -n "$LAT_ITERS" -p $((PORT + 10)) -- \
        "$LAT" -d "$DEV" -s 2 -n "$LAT_ITERS" -p $((PORT + 10)) 127.0.0.1
    DPDK_LAT=$(awk '/t_typical/ { t = 1; next } t && NF == 9 { print $5; exit }' "$TMP/dpdk_lat.out")
    DPDK_LAT_AVG=$(awk '/t_typical/ { t = 1; next } t && NF == 9 { print $6; exit }' "$TMP/dpdk_lat.out")
    echo "ibex_write_lat  2 B     soft/dpdk memif : ${DPDK_LAT} us typical (avg ${DPDK_LAT_AVG} us)"
    # The harness's rates move several times over between runs on this VM (raw: 46 or 234
    # Gb/s in two runs of one hour; roce: 34 or 84) as the host changes modes, and a
    # single run taken in a slow spell then "bounds" a port measured in a fast one from
    # below. A limit is the most the path does: each mode runs SIDE_HARNESS_RUNS short
    # runs (default 5 of 1 s, SIDE_HARNESS_SECONDS), alternating with the other mode, and
    # the best run is the bound.
    RUNS=${SIDE_HARNESS_RUNS:-5}
    HSEC=${SIDE_HARNESS_SECONDS:-1}
    raw_all=() roce_all=()
    for ((k = 1; k <= RUNS; k++)); do
        server_then_client "dpdk_raw$k" "$RAW" sink "$TMP/raw$k.sock" "$HSEC" -- \
            "$RAW" source "$TMP/raw$k.sock" "$HSEC" 4154
        raw_all+=("$(field mpps "$TMP/dpdk_raw$k.server")")
        server_then_client "dpdk_roce$k" "$RAW" sink "$TMP/roce$k.sock" "$HSEC" 4154 roce -- \
            "$RAW" source "$TMP/roce$k.sock" "$HSEC" 4154 roce
        roce_all+=("$(field mpps "$TMP/dpdk_roce$k.server")")
        ROCE_BAD=$((${ROCE_BAD:-0} + $(field icrc_bad "$TMP/dpdk_roce$k.server")))
    done
    best_of() { printf '%s\n' "$@" | awk 'NF && ($1 + 0 > m + 0 || m == "") { m = $1 } END { print m }'; }
    RAW_MPPS=$(best_of "${raw_all[@]}")
    ROCE_MPPS=$(best_of "${roce_all[@]}")
    RAW_GBITS=$(awk -v m="$RAW_MPPS" 'BEGIN { if (m != "") printf "%.2f", m * 4154 * 8 / 1000 }')
    RAW_PAYLOAD=$(awk -v m="$RAW_MPPS" 'BEGIN { if (m != "") printf "%.2f", m * 4096 * 8 / 1000 }')
    ROCE_PAYLOAD=$(awk -v m="$ROCE_MPPS" 'BEGIN { if (m != "") printf "%.2f", m * 4096 * 8 / 1000 }')
    echo "ibex_dpdk_raw   4154 B  memif raw       : ${RAW_MPPS} Mpps = ${RAW_GBITS} Gb/s of frames, ${RAW_PAYLOAD} Gb/s of 4 KiB payload (best of ${RUNS}: ${raw_all[*]} Mpps; sink on CPU $(field cpu "$TMP/dpdk_raw1.server"))"
    echo "ibex_dpdk_raw   4154 B  memif+RoCE work : ${ROCE_MPPS} Mpps = ${ROCE_PAYLOAD} Gb/s of 4 KiB payload (best of ${RUNS}: ${roce_all[*]} Mpps; payload copied in and out with the ICRC; ${ROCE_BAD:-?} bad)"
elif [[ ${SIDE_DPDK:-1} != 0 ]]; then
    echo "soft/dpdk       not built (no DPDK): skipped"
fi

# ---- allreduce, 2 ranks on this host: ibex over the transports vs Open MPI's TCP BTL.
# Open MPI's tables: size count time algbw busbw #wrong; ibex's (nccl-tests'): out-of-place
# time in column 6, busbw in column 8.
AR8_IBEX="" AR8_MPI="" COLL_SIZES=""
declare -A BUSBW=()
AR=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
if [[ ${SIDE_COLL:-1} != 0 ]] && have mpicc && have mpirun && [[ -x $AR ]]; then
    mpicc -O2 -o "$TMP/mpi_allreduce_bench" bench/collectives/mpi_allreduce_bench.c
    MPI_TCP=(timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self --mca btl_tcp_if_include lo)
    CI_ITERS=${SIDE_COLL_ITERS:-20000}
    IBEX_SHM=0 timeout 300 "$AR" -np 2 -b 8 -e 8 -n "$CI_ITERS" -w 500 -d float -o sum --device udp:lo -z 1 >"$TMP/ar8_ibex.out" 2>&1 || true
    "${MPI_TCP[@]}" "$TMP/mpi_allreduce_bench" -b 8 -e 8 -n "$CI_ITERS" -w 500 >"$TMP/ar8_mpi.out" 2>&1 || true
    AR8_IBEX=$(awk '!/^#/ && NF >= 13 { print $6; exit }' "$TMP/ar8_ibex.out")
    AR8_MPI=$(awk '!/^#/ && NF >= 6 { print $3; exit }' "$TMP/ar8_mpi.out")
    echo "allreduce       8 B     2 ranks udp:lo  : ${AR8_IBEX} us  (Open MPI TCP: ${AR8_MPI} us; one at a time)"
    # busbw from 1 MiB; a warm-up (a first size pays one-time set-up, 25 ms on the dpdk
    # port, which 2 warm-up iterations leave in the table) and SIDE_COLL_BUS_ITERS timed
    # iterations (default 50: at 10, a 1 MiB row was 4 ms of timing, and Open MPI's moved
    # 2.1-4.3 GB/s from run to run, ibex's over memif 1.8-3.1; at 100, 2.6-3.5 and 3.2-3.7).
    COLL_SIZES="1048576 2097152 4194304 8388608 16777216"
    coll_devices=(udp:lo)
    [[ ${SIDE_DPDK:-1} != 0 && -x $RAW ]] && coll_devices+=(dpdk:memif)
    BUS_ITERS=${SIDE_COLL_BUS_ITERS:-50}
    common=(-np 2 -b 1M -e 16M -f 2 -n "$BUS_ITERS" -w 20 -d float -o sum)
    for dev in "${coll_devices[@]}"; do
        key=${dev%%:*}
        IBEX_SHM=0 timeout 300 "$AR" "${common[@]}" --device "$dev" >"$TMP/bus_$key.out" 2>&1 || true
        while read -r size bus; do BUSBW[$key,$size]=$bus; done < <(awk '!/^#/ && NF >= 13 { print $1, $8 }' "$TMP/bus_$key.out")
    done
    "${MPI_TCP[@]}" "$TMP/mpi_allreduce_bench" -b 1048576 -e 16777216 -f 2 -n "$BUS_ITERS" -w 20 >"$TMP/bus_mpi.out" 2>&1 || true
    while read -r size bus; do BUSBW[mpi,$size]=$bus; done < <(awk '!/^#/ && NF >= 6 { print $1, $5 }' "$TMP/bus_mpi.out")
    printf "allreduce busbw GB/s, 2 ranks: %10s %10s %10s %10s\n" bytes udp:lo dpdk:memif "MPI TCP"
    for size in $COLL_SIZES; do
        printf "                               %10s %10s %10s %10s\n" "$size" "${BUSBW[udp,$size]:--}" "${BUSBW[dpdk,$size]:--}" "${BUSBW[mpi,$size]:--}"
    done
elif [[ ${SIDE_COLL:-1} != 0 ]]; then
    echo "allreduce       skipped (needs mpicc, mpirun and ibex_allreduce_perf)"
fi
# ratios KEY: ibex busbw on that device over MPI's, per size, and the smallest of them
bus_ratios() {
    local out="" lo=""
    for size in $COLL_SIZES; do
        local r; r=$(ratio "${BUSBW[$1,$size]:-}" "${BUSBW[mpi,$size]:-}")
        out+=" $r"
        [[ $r != n/a ]] && lo=$(awk -v a="$r" -v b="$lo" 'BEGIN { print (b == "" || a + 0 < b + 0) ? a : b }')
    done
    echo "min ${lo:-n/a} (1-16 MiB:${out})"
}

echo "== ratios"
echo "ibex bw / iperf3 bw      : $(ratio "$IBEX_BW" "$IPERF_BW")   (target >= 1.0)"
echo "ibex bw / ucx put bw     : $(ratio "$IBEX_BW" "$UCX_BW")"
echo "ibex lat / ucx tag lat   : $(ratio "$IBEX_LAT" "$UCX_LAT")   (target <= 0.7)"
if [[ -n $IBEX_BW4$IBEX_BWB ]]; then
    echo "udp 4 QPs / 1 QP         : $(ratio "$IBEX_BW4" "$IBEX_BW")   (target >= 1.0)"
    echo "udp both ways / one way  : $(ratio "$IBEX_BWB" "$IBEX_BW")   (target >= 1.6 where two cores are free; $(nproc) cores here, for two processes)"
fi
if [[ -n $COLL_SIZES ]]; then
    echo "allreduce 8 B / MPI TCP  : $(ratio "$AR8_IBEX" "$AR8_MPI")   (target <= 0.7)"
    echo "busbw udp:lo / MPI TCP   : $(bus_ratios udp)   (target >= 1.0)"
    [[ -n ${BUSBW[dpdk,1048576]:-} ]] && echo "busbw memif / MPI TCP    : $(bus_ratios dpdk)   (target >= 1.5)"
fi
if [[ -n $DPDK_BW1 ]]; then
    best=$(awk -v a="$DPDK_BW1" -v b="$DPDK_BW4" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
    echo "dpdk bw / raw memif      : 1 QP $(ratio "$DPDK_BW1" "$RAW_PAYLOAD"), 4 QPs $(ratio "$DPDK_BW4" "$RAW_PAYLOAD")   (target >= 0.5)"
    echo "dpdk bw / RoCE-work bound: 1 QP $(ratio "$DPDK_BW1" "$ROCE_PAYLOAD"), 4 QPs $(ratio "$DPDK_BW4" "$ROCE_PAYLOAD")   (<= 1; RoCE-work bound / raw memif $(ratio "$ROCE_PAYLOAD" "$RAW_PAYLOAD"), <= 1)"
    # A bound below what it bounds: this host spent every harness run in a slower spell
    # (its cache-to-cache rate moves ~10x, sometimes for tens of seconds) than the port's.
    if awk -v b="$best" -v r="$RAW_PAYLOAD" -v c="$ROCE_PAYLOAD" 'BEGIN { exit !(b + 0 > r + 0 || b + 0 > c + 0) }'; then
        echo "  (a bound came out below the port: the harness ran in a slower spell of this host than the port did; rerun)"
    fi
    echo "dpdk lat (half RTT)      : ${DPDK_LAT} us   (target <= 3)"
    echo "dpdk bw / udp bw         : $(ratio "$best" "$IBEX_BW")   (target >= 3)"
fi
