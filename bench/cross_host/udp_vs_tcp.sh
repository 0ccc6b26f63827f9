#!/usr/bin/env bash
# Across hosts: two network namespaces on a bridge (veth pairs, no shaping), created here and
# removed on exit. At each netdev MTU (1500 and 9000 by default), REPS runs each of
#   iperf3 TCP, one stream, namespace A -> B
#   ibex_write_bw over udp:<veth>, 64 KiB RDMA WRITEs, 1 QP, A -> B (polling, and -e)
#   ibex_write_bw over the DPDK port on the same veths, for each PMD in DPDK_PMDS
#     (dpdk:af_xdp:<veth>, dpdk:af_packet:<veth>; the tools' TCP exchange shares the veth)
# alternated run by run, then the median and spread of each, the ratio ibex / iperf3, and
# each DPDK port's ratio to iperf3 and to the udp port (issue 21: af_xdp >= 1.5x udp).
#
#   bench/cross_host/udp_vs_tcp.sh [BUILD_DIR]          (root: ip netns)
# env: MTUS ("1500 9000"), REPS (3), SECONDS_BW (5), SIZE (65536),
#      VETH_GRO (1: `ethtool -K <veth> gro on` inside each namespace; 0, the default: leave it off),
#      IBEX_ENV (extra VAR=value words for both ibex sides, e.g. "IBEX_UDP_GSO=0"),
#      DPDK_PMDS ("af_xdp af_packet"; "" skips the DPDK port), ALLREDUCE (1; 0 skips it)
# Then an allreduce of 2 hosts x 1 rank (ibex_allreduce_perf, 1-16 MiB) over the udp port
# and each DPDK port beside torch.distributed's gloo on the same namespaces.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-${IBEX_BUILD_DIR:-$here/../../build}}
mtus=${MTUS:-"1500 9000"}
reps=${REPS:-3}
secs=${SECONDS_BW:-5}
size=${SIZE:-65536}
veth_gro=${VETH_GRO:-0}
bw=$build/tools/ibex_write_bw/ibex_write_bw
[[ -x $bw ]] || { echo "udp_vs_tcp: no $bw (build first)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "udp_vs_tcp: needs root (network namespaces)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "udp_vs_tcp: needs iperf3" >&2; exit 1; }

id=$$
ns_a=ibexxa$id ns_b=ibexxb$id br=ibexxbr$id
va=xa$id vb=xb$id pa=xpa$id pb=xpb$id # inner ends (in the namespaces), bridge ends
net=10.214.$((id % 200 + 20))
ip_a=$net.1 ip_b=$net.2
tmp=$(mktemp -d /tmp/ibex_xhost.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip link del "$pa" 2>/dev/null || true
    ip link del "$pb" 2>/dev/null || true
    ip netns del "$ns_a" 2>/dev/null || true
    ip netns del "$ns_b" 2>/dev/null || true
    ip link del "$br" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

ip link add "$br" type bridge
ip link set "$br" up
for h in a b; do
    ns=ns_$h inner=v$h outer=p$h addr=ip_$h
    ip netns add "${!ns}"
    ip link add "${!outer}" type veth peer name "${!inner}"
    ip link set "${!inner}" netns "${!ns}"
    ip link set "${!outer}" master "$br" up
    ip -n "${!ns}" addr add "${!addr}/24" dev "${!inner}"
    ip -n "${!ns}" link set "${!inner}" up
    ip -n "${!ns}" link set lo up
done

set_mtu() {
    ip link set "$br" mtu "$1" 2>/dev/null || true
    ip link set "$pa" mtu "$1"
    ip link set "$pb" mtu "$1"
    ip -n "$ns_a" link set "$va" mtu "$1"
    ip -n "$ns_b" link set "$vb" mtu "$1"
    if [[ $veth_gro == 1 ]] && command -v ethtool >/dev/null; then
        ip netns exec "$ns_a" ethtool -K "$va" gro on >/dev/null
        ip netns exec "$ns_b" ethtool -K "$vb" gro on >/dev/null
    fi
}

port=$((20000 + RANDOM % 20000))

tcp_run() {
    local p=$((port++))
    ip netns exec "$ns_b" timeout 60 iperf3 -s -1 -B "$ip_b" -p "$p" >/dev/null 2>&1 &
    local srv=$!
    pids+=("$srv")
    sleep 0.5
    local r
    r=$(ip netns exec "$ns_a" timeout 60 iperf3 -c "$ip_b" -p "$p" -t "$secs" -J 2>/dev/null |
        awk '/"sum_received"/ { t = 1 } t && /"bits_per_second"/ { gsub(/[^0-9.e+]/, "", $2); printf "%.2f", $2 / 1e9; exit }')
    wait "$srv" || true
    echo "${r:-0}"
}

# ibex_run [-e]: over the udp port; PORT=dpdk:<pmd> ibex_run: over that DPDK port.
ibex_run() {
    local p=$((port++)) extra=("$@") kind=${PORT:-udp} dev_a dev_b
    dev_a="$kind:$va" dev_b="$kind:$vb"
    [[ $kind == dpdk:* ]] && dev_a="$kind:$va,ip=$ip_a/24" dev_b="$kind:$vb,ip=$ip_b/24"
    # shellcheck disable=SC2086
    ip netns exec "$ns_b" env ${IBEX_ENV:-} timeout 90 "$bw" -d "$dev_b" -s "$size" -D "$secs" --report_gbits -p "$p" \
        "${extra[@]}" >"$tmp/server.out" 2>&1 &
    local srv=$!
    pids+=("$srv")
    sleep 0.5
    local r
    # shellcheck disable=SC2086
    r=$(ip netns exec "$ns_a" env ${IBEX_ENV:-} IBEX_PERFTEST_COUNTERS=1 timeout 90 "$bw" -d "$dev_a" -s "$size" -D "$secs" \
        --report_gbits -p "$p" "${extra[@]}" "$ip_b" 2>&1 | tee "$tmp/client.out" |
        awk '/BW average\[Gb\/sec\]/ { t = 1; next } t && NF == 5 { print $4; exit }')
    wait "$srv" || true
    echo "${r:-0}"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR) print lo "-" hi; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.2f", a / b }'; }

echo "== across hosts: 2 namespaces on a bridge, $(nproc) cores, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   $reps runs of ${secs} s each, ${size}-byte messages, veth GRO $([[ $veth_gro == 1 ]] && echo on || echo off)${IBEX_ENV:+, $IBEX_ENV}"
printf '%-6s %-22s %-22s %-22s %s\n' MTU "iperf3 TCP Gb/s" "ibex udp Gb/s" "ibex udp -e Gb/s" "ibex/TCP, ibex -e/TCP (per run)"
for mtu in $mtus; do
    set_mtu "$mtu"
    tcp=() ibex=() ibex_e=() r1=() r2=()
    for _ in $(seq "$reps"); do
        t=$(tcp_run)
        i=$(ibex_run)
        e=$(ibex_run -e)
        tcp+=("$t") ibex+=("$i") ibex_e+=("$e") r1+=("$(ratio "$i" "$t")") r2+=("$(ratio "$e" "$t")")
    done
    tm=$(printf '%s\n' "${tcp[@]}" | median) ts=$(printf '%s\n' "${tcp[@]}" | spread)
    im=$(printf '%s\n' "${ibex[@]}" | median) is=$(printf '%s\n' "${ibex[@]}" | spread)
    em=$(printf '%s\n' "${ibex_e[@]}" | median) es=$(printf '%s\n' "${ibex_e[@]}" | spread)
    printf '%-6s %-22s %-22s %-22s %s, %s (%s; %s)\n' "$mtu" "$tm ($ts)" "$im ($is)" "$em ($es)" \
        "$(ratio "$im" "$tm")" "$(ratio "$em" "$tm")" "${r1[*]}" "${r2[*]}"
    for pmd in ${DPDK_PMDS-af_xdp af_packet}; do
        d=() rd=()
        for k in $(seq "$reps"); do
            v=$(PORT=dpdk:$pmd ibex_run)
            [[ $k == 1 && $v == 0 ]] && { echo "       dpdk:$pmd did not run:"; tail -3 "$tmp/client.out" | sed 's/^/         /'; }
            d+=("$v") rd+=("$(ratio "$v" "${ibex[$((k - 1))]}")")
        done
        dm=$(printf '%s
' "${d[@]}" | median) ds=$(printf '%s
' "${d[@]}" | spread)
        printf '%-6s %-22s %s
' "" "dpdk:$pmd $dm ($ds)" \
            "dpdk/TCP $(ratio "$dm" "$tm"), dpdk/udp $(ratio "$dm" "$im") (per run, against that run's udp: ${rd[*]})"
    done
done
echo "last ibex client counters:"
sed -n '/counters/,$p' "$tmp/client.out" | head -40

# ---- allreduce, 2 hosts x 1 rank
perf=$build/tools/ibex_allreduce_perf/ibex_allreduce_perf
py=
for c in "${PYTHON:-python3}" /usr/bin/python3; do
    if "$c" -c 'import torch.distributed' 2>/dev/null; then py=$c; break; fi
done
if [[ ${ALLREDUCE:-1} == 1 && -x $perf && -n $py ]]; then
    # ibex_ar FILE [PMD]: rank 0's table (size, out-of-place busbw) into FILE; over the udp
    # port, or over dpdk:PMD on the same veths.
    ibex_ar() {
        local p=$((port++)) pids=() r ns dev addr
        for r in 0 1; do
            ns=$ns_a dev=udp:$va addr=$ip_a
            [[ $r == 1 ]] && ns=$ns_b dev=udp:$vb addr=$ip_b
            [[ -n ${2:-} ]] && dev="dpdk:$2:${dev#udp:},ip=$addr/24"
            ip netns exec "$ns" env ${IBEX_ENV:-} IBEX_RANK=$r IBEX_NRANKS=2 IBEX_ROOT_ADDR="$ip_a:$p" timeout 300 "$perf" \
                -b 1M -e 16M -f 2 -n 5 -w 1 -d float -o sum --device "$dev" >"$tmp/ar$r.out" 2>&1 &
            pids+=($!)
        done
        for r in "${pids[@]}"; do wait "$r" || true; done
        awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $1, $8 }' "$tmp/ar0.out" >"$1"
    }
    gloo_ar() {
        local p=$((port++)) pids=() r ns dev
        for r in 0 1; do
            ns=$ns_a dev=$va
            [[ $r == 1 ]] && ns=$ns_b dev=$vb
            ip netns exec "$ns" env GLOO_SOCKET_IFNAME="$dev" timeout 300 "$py" "$here/gloo_allreduce.py" $r 2 "$ip_a" "$p" \
                >"$tmp/g$r.out" 2>&1 &
            pids+=($!)
        done
        for r in "${pids[@]}"; do wait "$r" || true; done
        awk '{ print $1, $3 }' "$tmp/g0.out" >"$1"
    }
    echo
    echo "allreduce f32 sum, 2 hosts x 1 rank, busbw GB/s: median (spread) of $reps alternated runs"
    pmds=(${DPDK_PMDS-af_xdp af_packet})
    printf '%-6s %-10s %-20s %-20s %-9s' MTU bytes "ibex udp" "gloo" "ibex/gloo"
    for pmd in "${pmds[@]}"; do printf ' %-20s %-9s' "ibex dpdk:$pmd" "/gloo"; done
    printf '\n'
    for mtu in $mtus; do
        set_mtu "$mtu"
        for k in $(seq "$reps"); do
            ibex_ar "$tmp/ibex_ar.$k"
            gloo_ar "$tmp/gloo_ar.$k"
            for pmd in "${pmds[@]}"; do ibex_ar "$tmp/dpdk_${pmd}_ar.$k" "$pmd"; done
        done
        for bytes in $(awk '{ print $1 }' "$tmp/ibex_ar.1"); do
            iv=$(cat "$tmp"/ibex_ar.* | awk -v b="$bytes" '$1 == b { print $2 }')
            gv=$(cat "$tmp"/gloo_ar.* | awk -v b="$bytes" '$1 == b { print $2 }')
            im=$(median <<<"$iv") is=$(spread <<<"$iv") gm=$(median <<<"$gv") gs=$(spread <<<"$gv")
            printf '%-6s %-10s %-20s %-20s %-9s' "$mtu" "$bytes" "$im ($is)" "$gm ($gs)" "$(ratio "$im" "$gm")"
            for pmd in "${pmds[@]}"; do
                dv=$(cat "$tmp"/dpdk_"${pmd}"_ar.* | awk -v b="$bytes" '$1 == b { print $2 }')
                if [[ -z $dv ]]; then printf ' %-20s %-9s' "did not run" "-"; continue; fi
                dm=$(median <<<"$dv") ds=$(spread <<<"$dv")
                printf ' %-20s %-9s' "$dm ($ds)" "$(ratio "$dm" "$gm")"
            done
            printf '\n'
        done
        rm -f "$tmp"/dpdk_*_ar.*
        rm -f "$tmp"/ibex_ar.* "$tmp"/gloo_ar.*
    done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
