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
released=$(awk '/^IBEX_0\.1 \{/{b=1; next} b && /local:/{exit} b && /ibex_/{gsub(/[ ;]/, ""); print}' "$map")
[[ -n $released ]] || fail "no names listed in IBEX_0.1 of $map"
for name in $released; do
    grep -qx "$name@@IBEX_0.1" <<<"$exports" || fail "$name is not exported in IBEX_0.1"
done
echo "abi: $(wc -l <<<"$exports") exports, $(wc -w <<<"$released") of them released in IBEX_0.1, all in place"
