#!/usr/bin/env bash
# Goodput against injected loss: 64 KiB RDMA WRITE bandwidth of the soft RoCEv2 engine
# (ibex_write_bw, server and client processes on udp:lo, loss injected on both contexts'
# transmit paths with IBEX_FAULT_LOSS) in go-back-N and selective mode, beside TCP (iperf3
# between two network namespaces joined by a veth pair, random loss on both ends' egress:
# `tc netem loss` where the kernel has netem, else the tc BPF program drop.bpf.c).
# Median of REPS runs per point; writes goodput.csv and, with gnuplot, goodput.png.
#
#   bench/loss/run_sweep.sh [BUILD_DIR] [OUT_DIR]     (TCP part needs root: ip netns)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
out=${2:-$here}
losses=${LOSSES:-"0 0.01 0.1 1 3"} # percent
reps=${REPS:-3}
iters=${ITERS:-3000}
bw=$build/tools/ibex_write_bw/ibex_write_bw
[[ -x $bw ]] || { echo "no $bw: build ibex_write_bw first" >&2; exit 1; }
port=$((20000 + RANDOM % 20000))

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR) print lo "-" hi; else print "nan"}'; }

# One ibex run: prints the client's average bandwidth in Gb/s (0 if it failed).
ibex_run() {
    local mode=$1 loss=$2 p=$((port++))
    local frac; frac=$(awk -v l="$loss" 'BEGIN {print l / 100}')
    IBEX_RETRANSMIT=$mode IBEX_FAULT_LOSS=$frac timeout 120 "$bw" -d udp:lo -p "$p" -n "$iters" --report_gbits >/dev/null 2>&1 &
    local srv=$!
    sleep 0.3
    local r
    r=$(IBEX_RETRANSMIT=$mode IBEX_FAULT_LOSS=$frac timeout 120 "$bw" -d udp:lo -p "$p" -n "$iters" --report_gbits 127.0.0.1 2>/dev/null |
        awk '$1 == 65536 {print $4}')
    wait "$srv" || true
    echo "${r:-0}"
}

tcp_setup() {
    ip netns add ibexloss_a && ip netns add ibexloss_b || return 1
    ip link add ibexloss0 type veth peer name ibexloss1
    ip link set ibexloss0 netns ibexloss_a
    ip link set ibexloss1 netns ibexloss_b
    ip -n ibexloss_a addr add 10.213.0.1/24 dev ibexloss0
    ip -n ibexloss_b addr add 10.213.0.2/24 dev ibexloss1
    ip -n ibexloss_a link set ibexloss0 up
    ip -n ibexloss_b link set ibexloss1 up
    ip -n ibexloss_a link set lo up
    ip -n ibexloss_b link set lo up
}
tcp_teardown() { ip netns del ibexloss_a 2>/dev/null || true; ip netns del ibexloss_b 2>/dev/null || true; }

# Random loss of `loss` percent on both veth ends' egress: netem if the kernel has it,
# else drop.bpf.c (compiled per loss level) on a clsact egress hook.
set_loss() {
    local loss=$1 ns dev
    for ns in a b; do
        dev=ibexloss0; [[ $ns == b ]] && dev=ibexloss1
        ip netns exec ibexloss_$ns tc qdisc del dev $dev root 2>/dev/null || true
        ip netns exec ibexloss_$ns tc qdisc del dev $dev clsact 2>/dev/null || true
        if ip netns exec ibexloss_$ns tc qdisc replace dev $dev root netem loss "${loss}%" 2>/dev/null; then
            continue
        fi
        local ppm obj
        ppm=$(awk -v l="$loss" 'BEGIN {printf "%d", l * 10000}')
        obj=$tmp/drop_$ppm.o
        [[ -f $obj ]] || "$(command -v clang || command -v clang-14)" -O2 -target bpf -I/usr/include/$(uname -m)-linux-gnu -DLOSS_PPM="$ppm" \
            -c "$here/drop.bpf.c" -o "$obj"
        ip netns exec ibexloss_$ns tc qdisc add dev $dev clsact
        ip netns exec ibexloss_$ns tc filter add dev $dev egress bpf da obj "$obj" sec tc
    done
}

# One iperf3 run (5 s): Gb/s received.
tcp_run() {
    ip netns exec ibexloss_b iperf3 -s -1 -p 5299 >/dev/null 2>&1 &
    local srv=$!
    sleep 0.3
    local r
    r=$(ip netns exec ibexloss_a timeout 30 iperf3 -c 10.213.0.2 -p 5299 -t 5 -J 2>/dev/null |
        python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9, 3))' 2>/dev/null)
    wait "$srv" || true
    echo "${r:-0}"
}

csv=$out/goodput.csv
echo "transport,loss_percent,goodput_gbps_median,goodput_gbps_min,goodput_gbps_max,runs" >"$csv"
for mode in gbn selective; do
    for l in $losses; do
        vals=$(for _ in $(seq "$reps"); do ibex_run "$mode" "$l"; done)
        m=$(median <<<"$vals"); s=$(spread <<<"$vals")
        echo "ibex-$mode,$l,$m,${s%-*},${s#*-},$reps" | tee -a "$csv"
    done
done
if [[ ${SKIP_TCP:-0} != 1 && $(id -u) == 0 ]] && command -v iperf3 >/dev/null && tcp_setup; then
    tmp=$(mktemp -d)
    trap 'tcp_teardown; rm -rf "$tmp"' EXIT
    for l in $losses; do
        set_loss "$l"
        vals=$(for _ in $(seq "$reps"); do tcp_run; done)
        m=$(median <<<"$vals"); s=$(spread <<<"$vals")
        echo "tcp,$l,$m,${s%-*},${s#*-},$reps" | tee -a "$csv"
    done
else
    echo "TCP sweep skipped: needs root, iperf3, ip netns (and netem or clang for the loss)" >&2
fi
if command -v gnuplot >/dev/null; then
    gnuplot -e "csv='$csv'; png='$out/goodput.png'" "$here/goodput.gp"
fi
