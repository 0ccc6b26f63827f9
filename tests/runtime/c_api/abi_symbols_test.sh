#!/usr/bin/env bash
# The ABI of libibex.so as the version script promises it: only ibex_ names are
# exported, every exported name has a version, and the names released in IBEX_0.1
# (listed by name in cmake/libibex.map) are still there and still in that block.
set -euo pipefail
lib=$1 map=$2
fail() { echo "abi: $*" >&2; exit 1; }
exports=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^IBEX_/ {print $3}')
[[ -n $exports ]] || fail "no symbols exported by $lib"
while read -r sym; do
    name=${sym%%@*}
    [[ $name == ibex_* ]] || fail "exported symbol outside the ibex_ prefix: $sym"
    [[ $sym == *@@IBEX_* ]] || fail "exported symbol without a version: $sym"
done <<<"$exports"
# Every function a public header declares is exported: a call added to a header but not
# to the version script is hidden by its "local: *" and fails only at a user's link.
headers=$(dirname "$map")/../runtime/include/ibex
declared=$(cat "$headers"/*.h | tr '\n' ' ' | grep -oE 'IBEX_API[^;(]*[^a-z0-9_]ibex_[a-z0-9_]+ *\(' |
           grep -oE 'ibex_[a-z0-9_]+ *\($' | tr -d ' (' | sort -u)
[[ -n $declared ]] || fail "no IBEX_API declarations found in $headers"
for name in $declared; do
    grep -q "^$name@@IBEX_" <<<"$exports" || fail "$name is declared IBEX_API but not exported (add it to $map)"
done
total=0
for block in IBEX_0.1 IBEX_0.2 IBEX_0.3 IBEX_0.4 IBEX_0.5 IBEX_0.6 IBEX_0.7 IBEX_0.8 IBEX_0.9 IBEX_0.10; do
    released=$(awk -v b="^${block//./\\.} \\{" '$0 ~ b {on=1; next} on && /^}/ {exit} on && /local:/ {exit} on && /^ *ibex_[a-z0-9_]+;/ {gsub(/[ ;]/, ""); print}' "$map")
    [[ -n $released ]] || fail "no names listed in $block of $map"
    for name in $released; do
        grep -qx "$name@@$block" <<<"$exports" || fail "$name is not exported in $block"
    done
    total=$((total + $(wc -w <<<"$released")))
done
echo "abi: $(wc -l <<<"$exports") exports, $total of them in the named blocks IBEX_0.1 to IBEX_0.10, all in place"
