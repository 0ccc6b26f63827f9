#!/usr/bin/env bash
# `pip install ./python` against an installed libibex: installs the build into a prefix,
# builds the package from a copy of the sources in a venv (system site packages for
# pybind11 and torch; no index, no build isolation, so nothing is downloaded), then checks
# that the installed package imports, links the prefix's libibex, and runs a collective.
# Usage: pip_install_test.sh <build dir> <python> <source dir> [torch: 0|1]
set -euo pipefail
build=$1 python=$2 src=$3 with_torch=${4:-0}
tmp=$(mktemp -d /tmp/ibex_pip.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir -p "$tmp/src"
cp -r "$src/python" "$tmp/src/python"   # pip builds in place; keep the checkout clean
"$python" -m venv --system-site-packages "$tmp/venv"
# Linked as a toolchain that carries a static C++ runtime would link it (the CUDA host's
# gcc does): the runtime's symbols must stay inside the extension, or libibex binds to
# that copy (a crash there, at the first `istream >> int`).
PKG_CONFIG_PATH=$(dirname "$(find "$tmp/prefix" -name ibex.pc | head -n1)") \
IBEX_PYTHON_TORCH=$with_torch LDFLAGS="-static-libstdc++ -static-libgcc" \
  "$tmp/venv/bin/python" -m pip install --no-index --no-build-isolation -q "$tmp/src/python"
runtime=$("$python" -c 'import ctypes.util; print(ctypes.util.find_library("stdc++") or "")')
libstdcxx=$(ldconfig -p | awk -v n="$runtime" '$1 == n && $NF ~ /^\// && !found {print $NF; found = 1}')
[[ -n $libstdcxx ]] || { echo "pip_install_test: libstdc++.so not found by ldconfig" >&2; exit 1; }
nm -D --defined-only "$libstdcxx" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/runtime.syms"
for ext in "$tmp"/venv/lib/python3*/site-packages/ibex/_*.so; do
    # strong definitions only: a weak template instance is the same code wherever it binds
    leaked=$(nm -D --defined-only "$ext" | awk '$2 !~ /^[WVwvu]$/ {print $3}' | sort -u |
        comm -12 - "$tmp/runtime.syms")
    if [[ -n $leaked ]]; then
        echo "pip_install_test: $(basename "$ext") exports $(wc -l <<<"$leaked") symbols of the C++ runtime, e.g.:" >&2
        head -5 <<<"$leaked" >&2
        exit 1
    fi
done

cd "$tmp"   # away from any build/python on sys.path
"$tmp/venv/bin/python" - "$tmp" "$with_torch" <<'PY'
import multiprocessing as mp, sys
import numpy as np
import ibex
tmp, with_torch = sys.argv[1], sys.argv[2] == "1"
assert ibex.__file__.startswith(tmp + "/venv/"), ibex.__file__
maps = open("/proc/self/maps").read()
assert f"{tmp}/prefix/" in maps and "libibex.so" in maps, "libibex not loaded from the prefix"
uid = ibex.get_unique_id()
def rank(r, q):
    c = ibex.Comm(2, uid, r, device="udp:lo", timeout_ms=20000)
    a = np.full(8, r + 1.0); c.allreduce(a); c.destroy(); q.put(a.tolist())
ctx = mp.get_context("fork"); q = ctx.Queue()
ps = [ctx.Process(target=rank, args=(r, q)) for r in range(2)]
[p.start() for p in ps]
got = [q.get(timeout=60) for _ in ps]
[p.join(10) for p in ps]
assert got == [[3.0] * 8] * 2, got
if with_torch:
    import ibex.torch
    assert "IBEX" in __import__("torch").distributed.Backend._plugins
print("pip-installed ibex", ibex.__version__, "from", ibex.__file__, "works",
      "(with the torch backend)" if with_torch else "")
PY
