#!/usr/bin/env bash
# 4-to-1 incast through ibex_switch, with and without DCQCN: per-port time series and
# per-flow DCQCN rates as CSV, a summary CSV, and a PNG per run (queue depth and per-flow
# throughput over time) plotted with gnuplot.
#   bench/incast/run_incast.sh [BUILD_DIR] [OUT_DIR]
# Env: RATE (Mbit/s, default 200), DURATION (s, default 5), SENDERS (default 4).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
out=${2:-$PWD/incast-out}
rate=${RATE:-200}
secs=${DURATION:-5}
senders=${SENDERS:-4}
sw=$build/tools/ibex_switch/ibex_switch
[[ -x $sw ]] || { echo "no $sw: build the ibex_switch target first" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"

# The paper's time knobs stretched 20x for a software fabric (congestion/README.md).
scaled=(IBEX_DCQCN_rpg_time_reset=1100 IBEX_DCQCN_dce_tcp_rtt=1100 IBEX_DCQCN_min_time_between_cnps=1000
        IBEX_DCQCN_rpg_ai_rate=5 IBEX_DCQCN_rpg_hai_rate=50)

echo "run,utilisation,jain_last_half,queue_p99_kb,queue_max_kb,queue_p90_last_half_kb,queue_p99_last_half_kb,drops,drops_last_half,marks,cnps,retransmitted" > "$out/summary.csv"
for mode in paper off; do
    log=$out/$mode.log
    env "${scaled[@]}" IBEX_INCAST_RATES="$out/$mode-rates.csv" \
        "$sw" --incast "$senders" --dcqcn "$mode" --rate "$rate" --duration "$secs" \
        --csv "$out/$mode-switch.csv" | tee "$log"
    grep '^csv,' "$log" | cut -d, -f2- >> "$out/summary.csv"

    # Per-flow throughput at the bottleneck (port 0) over 20 ms bins, in Mbit/s, and the
    # queue depth at the end of each bin.
    awk -F, -v n="$senders" -v bin=20000 'NR > 1 && $2 == 0 {
        if (!have) { t0 = $1; for (i = 1; i <= n; ++i) prev[i] = $(7 + i); have = 1; next }
        if ($1 - t0 >= bin) {
            printf "%.3f,%.1f", $1 / 1e6, $3 / 1024
            for (i = 1; i <= n; ++i) { printf ",%.1f", ($(7 + i) - prev[i]) * 8 / ($1 - t0); prev[i] = $(7 + i) }
            printf "\n"; t0 = $1
        } }' "$out/$mode-switch.csv" > "$out/$mode-flows.csv"
    plot="plot '$out/$mode-flows.csv' using 1:2 with lines lw 2 lc rgb 'black' title 'queue (KiB)' axes x1y2"
    for i in $(seq 1 "$senders"); do
        plot+=", '$out/$mode-flows.csv' using 1:(\$$((i + 2))) with lines title 'flow $((i - 1)) (Mbit/s)'"
    done
    gnuplot <<GP
set terminal pngcairo size 1000,500 noenhanced
set output '$out/incast-$mode.png'
set datafile separator ','
set title '4:1 incast through ibex_switch, ${rate} Mbit/s bottleneck, DCQCN $mode'
set xlabel 'time (s)'
set ylabel 'throughput at the bottleneck (Mbit/s, 20 ms bins)'
set y2label 'queue depth (KiB)'
set y2tics
set ytics nomirror
set key outside right
$plot
GP
done
echo "summary: $out/summary.csv"
column -s, -t < "$out/summary.csv"
ls "$out"/*.png
