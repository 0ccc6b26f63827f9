#!/usr/bin/env bash
# The main job: loopback RDMA WRITE bandwidth, then latency, each between two processes
# (server and client) over the soft provider (RoCEv2 over UDP on udp:lo), all sizes
# 2 B .. 8 MiB, tables as perftest prints them. Extra arguments go to both tools. Then
# an allreduce between two forked ranks (ibex_allreduce_perf -np 2, f32 sum, 8 B .. 8 MiB)
# over the same provider, table as nccl-tests prints it.
# env: IBEX_BUILD_DIR (default build), MAIN_ITERS (iterations per size, default 200),
#      MAIN_PORT (TCP port of the key exchange, default 18515)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${IBEX_BUILD_DIR:-build}
ITERS=${MAIN_ITERS:-200}
PORT=${MAIN_PORT:-18515}
BW=$BUILD/tools/ibex_write_bw/ibex_write_bw
LAT=$BUILD/tools/ibex_write_lat/ibex_write_lat

SERVER=
LOG=$(mktemp /tmp/ibex_main_server.XXXXXX)
cleanup() {
    if [[ -n $SERVER ]]; then kill "$SERVER" 2>/dev/null || true; fi
    rm -f "$LOG"
}
trap cleanup EXIT INT TERM

# pair TOOL ARGS...: the server in the background (its output shown only if it fails),
# the client in front.
pair() {
    local tool=$1; shift
    echo
    echo "=== $(basename "$tool") $* : server and client on loopback (soft provider, udp:lo)"
    timeout 600 "$tool" "$@" -p "$PORT" >"$LOG" 2>&1 &
    SERVER=$!
    sleep 0.3
    local rc=0
    timeout 600 "$tool" "$@" -p "$PORT" 127.0.0.1 || rc=$?
    wait "$SERVER" || { rc=1; echo "--- server output:" >&2; cat "$LOG" >&2; }
    SERVER=
    return $rc
}

pair "$BW" -a -n "$ITERS" "$@"
pair "$LAT" -a -n "$ITERS" "$@"

ALLREDUCE=$BUILD/tools/ibex_allreduce_perf/ibex_allreduce_perf
echo
echo "=== ibex_allreduce_perf -np 2 -b 8 -e 8M -f 4 : two ranks forked on loopback (soft provider, udp:lo)"
timeout 300 "$ALLREDUCE" -np 2 -b 8 -e 8M -f 4 -n 20 -w 2 --device udp:lo
