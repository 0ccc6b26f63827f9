#!/usr/bin/env bash
# ibex_sim at scale (tools/ibex_sim/README.md has the figures):
#   scale    one 256 MiB ring allreduce on a 100 Gbit/s leaf-spine, 64 .. 1024 hosts:
#            run time, events, events/s (median of REPS runs and their spread) -> scale.csv
#   incast   16-to-1 on a 100 Gbit/s star, DCQCN paper vs off (PFC on both) -> incast_*/
#            (full CSVs, not kept in git), incast_queue.png, incast_rates_paper.png
#   compare  ring vs rhd vs tree for 64/256/1024 hosts at 1 MiB, 64 MiB, 1 GiB beside
#            allreduce/selector's cost model on the same fabric -> compare.csv
#            (1 GiB runs use 64 KiB segments and 1 MiB slices: see the README)
#   bigraph  EFLOPS's BiGraph allreduce vs ring and plain rhd on a 100 Gbit/s BiGraph,
#            and ring and rhd on a leaf-spine with the same number of switch ports, at
#            64/256/1024 hosts (4/8/16 hosts per switch, so 8/16/32 switches per layer) and
#            1 MiB, 16 MiB, 256 MiB (256 MiB: 64 KiB segments, 1 MiB slices) -> bigraph.csv
#            (deepest switch queue and pause frames show the contention)
#
#   bench/sim/run_sim_bench.sh [scale|incast|compare|bigraph|all] [BUILD_DIR] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-all}
build=${2:-$here/../../build}
out=${3:-$here}
reps=${REPS:-3}
sim=$build/tools/ibex_sim/ibex_sim
[[ -x $sim ]] || { echo "no $sim: build ibex_sim first" >&2; exit 1; }
mkdir -p "$out"

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -g | awk 'NR==1{lo=$1} {hi=$1} END {if (NR) print lo "-" hi; else print "nan"}'; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

scale() {
    echo "hosts,events,wall_s_median,wall_s_spread,events_per_s_median,sim_time_s,busbw_gbps" > "$out/scale.csv"
    for n in ${HOSTS:-64 128 256 512 1024}; do
        local walls=() rates=() json=
        for ((i = 0; i < reps; i++)); do
            json=$("$sim" --topology leaf-spine --hosts "$n" --link-gbps 100 --collective ring --bytes 256M \
                   --json --no-progress)
            walls+=("$(field "['wall_s']" <<<"$json")")
            rates+=("$(field "['events_per_s']" <<<"$json")")
        done
        printf '%s,%s,%s,%s,%s,%s,%s\n' "$n" "$(field "['events']" <<<"$json")" \
            "$(printf '%s\n' "${walls[@]}" | median)" "$(printf '%s\n' "${walls[@]}" | spread)" \
            "$(printf '%s\n' "${rates[@]}" | median)" "$(field "['sim_time_s']" <<<"$json")" \
            "$(field "['busbw_gbps']" <<<"$json")" | tee -a "$out/scale.csv"
    done
}

incast() {
    for dc in paper off; do
        "$sim" --topology star --hosts 17 --link-gbps 100 --flows incast:16:16M --dcqcn "$dc" \
            --sample-us 2 --out "$out/incast_$dc" --no-progress --json | tee "$out/incast_$dc.json"
    done
    [[ -f $out/incast_paper/rates.png ]] && cp "$out/incast_paper/rates.png" "$out/incast_rates_paper.png"
    if command -v gnuplot >/dev/null; then
        gnuplot <<GP
set datafile separator ','
set terminal pngcairo size 1000,600
set output '$out/incast_queue.png'
set title '16-to-1 incast, 100 Gbit/s star, 16 MiB each: the receiver port''s queue'
set xlabel 'time (us)'; set ylabel 'queue (KB)'; set grid; set key top right
plot '$out/incast_paper/queues.csv' every ::1 using (\$2==0 && \$3==0 ? \$1 : 1/0):(\$4/1024) with lines title 'DCQCN paper', \
     '$out/incast_off/queues.csv' every ::1 using (\$2==0 && \$3==0 ? \$1 : 1/0):(\$4/1024) with lines title 'DCQCN off (PFC)'
GP
    fi
}

compare() {
    echo "hosts,bytes,algo,sim_s,model_s,model_choice,busbw_gbps,wall_s" > "$out/compare.csv"
    for n in ${HOSTS:-64 256 1024}; do
        for bytes in 1M 64M 1G; do
            local extra=()
            [[ $bytes == 1G ]] && extra=(--mtu 65536 --slice 1M)
            for algo in ring rhd tree; do
                local json
                json=$("$sim" --topology leaf-spine --hosts "$n" --link-gbps 100 --collective "$algo" \
                       --bytes "$bytes" "${extra[@]}" --json --no-progress)
                printf '%s,%s,%s,%s,%s,%s,%s,%s\n' "$n" "$bytes" "$algo" "$(field "['collective_time_s']" <<<"$json")" \
                    "$(field "['model_s']['$algo']" <<<"$json")" "$(field "['model_choice']" <<<"$json")" \
                    "$(field "['busbw_gbps']" <<<"$json")" "$(field "['wall_s']" <<<"$json")" | tee -a "$out/compare.csv"
            done
        done
    done
}

# A BiGraph of S switches per layer with H hosts each has 2S(S + H) switch ports; a
# leaf-spine of H-host leaves without oversubscription has 3N. They match at S = 2H, the
# shapes used here (and the shapes where BiGraph's mapping is contention-free: H <= S).
bigraph() {
    echo "hosts,hosts_per_switch,bytes,topology,algo,sim_s,busbw_gbps,max_queue_bytes,pause_frames,wall_s" > "$out/bigraph.csv"
    local per
    for n in ${HOSTS:-64 256 1024}; do
        case $n in 64) per=4 ;; 256) per=8 ;; 1024) per=16 ;; *) echo "hosts $n: no shape" >&2; return 1 ;; esac
        for bytes in ${BYTES:-1M 16M 256M}; do
            local extra=()
            [[ $bytes == 256M ]] && extra=(--mtu 65536 --slice 1M)
            for run in bigraph:ring bigraph:rhd bigraph:bigraph leaf-spine:ring leaf-spine:rhd; do
                local topo=${run%%:*} algo=${run#*:} json
                json=$("$sim" --topology "$topo" --hosts "$n" --hosts-per-leaf "$per" --link-gbps 100 --collective "$algo" \
                       --bytes "$bytes" "${extra[@]}" --json --no-progress)
                printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$n" "$per" "$bytes" "$topo" "$algo" \
                    "$(field "['collective_time_s']" <<<"$json")" "$(field "['busbw_gbps']" <<<"$json")" \
                    "$(field "['max_queue_bytes']" <<<"$json")" "$(field "['pause_frames']" <<<"$json")" \
                    "$(field "['wall_s']" <<<"$json")" | tee -a "$out/bigraph.csv"
            done
        done
    done
}

case $what in
scale) scale ;;
incast) incast ;;
compare) compare ;;
bigraph) bigraph ;;
all) scale; incast; compare; bigraph ;;
*) echo "usage: $0 [scale|incast|compare|bigraph|all] [BUILD_DIR] [OUT_DIR]" >&2; exit 2 ;;
esac
