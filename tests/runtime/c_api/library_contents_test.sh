#!/usr/bin/env bash
# What libibex.so is made of: the library layers only. The daemon's tuning code
# (namespace ibex::tuning, tools/ibexd) is linked by ibexd alone, so frameworks that load
# libibex do not carry it. Reads the full symbol table (nm -C), not just the exports.
set -euo pipefail
lib=$1
fail() { echo "contents: $*" >&2; exit 1; }
syms=$(nm -C "$lib") || fail "nm cannot read $lib"
[[ -n $syms ]] || fail "$lib has no symbol table (stripped?): nothing to check"
grep -q 'ibex::soft::' <<<"$syms" || fail "no ibex::soft:: symbol: the symbol table is not what this test expects"
if leaked=$(grep -E 'ibex::tuning::' <<<"$syms" | head -5) && [[ -n $leaked ]]; then
    fail "ibexd's tuning code is in $lib:"$'\n'"$leaked"
fi
echo "contents: $(wc -l <<<"$syms") symbols, none from ibexd's tuning library"
