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
total=0
for block in IBEX_0.1 IBEX_0.2 IBEX_0.3; do
    released=$(awk -v b="^${block//./\\.} \\{" '$0 ~ b {on=1; next} on && /^}/ {exit} on && /local:/ {exit} on && /^ *ibex_[a-z0-9_]+;/ {gsub(/[ ;]/, ""); print}' "$map")
    [[ -n $released ]] || fail "no names listed in $block of $map"
    for name in $released; do
        grep -qx "$name@@$block" <<<"$exports" || fail "$name is not exported in $block"
    done
    total=$((total + $(wc -w <<<"$released")))
done
echo "abi: $(wc -l <<<"$exports") exports, $total of them in the named blocks IBEX_0.1, IBEX_0.2 and IBEX_0.3, all in place"
