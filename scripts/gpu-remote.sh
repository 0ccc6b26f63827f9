#!/usr/bin/env bash
# Runs on a bare CUDA host, in a copy of the source tree, with a folder made by
# scripts/gpu-bundle.sh beside it: puts the bundle's build tree where its test files expect
# it, builds the Python package against the host's own torch (in the background), runs
# scripts/gpu-check.sh and then the Python tests on CUDA tensors. Logs go to $LOGS.
# Usage: scripts/gpu-remote.sh BUNDLE   (env: LOGS, default /tmp/gpu-logs; GPU_CHECK_* as
# scripts/gpu-check.sh; GPU_REMOTE_PY=0 skips the Python part; GPU_REMOTE_PY_TESTS names its
# test modules, default torch_backend_test ddp_agree_test)
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=$(readlink -f "${1:?usage: $0 BUNDLE}")
logs=${LOGS:-/tmp/gpu-logs}
mkdir -p "$logs"
build_dir=$(cat "$bundle/build_dir")
src_dir=$(dirname "$build_dir")
# the test files and compiled-in paths name the tree this build was configured in
if [[ $(readlink -f .) != "$(readlink -f "$src_dir" 2>/dev/null)" ]]; then
    mkdir -p "$src_dir"
    for e in * .ci; do [[ -e $src_dir/$e || ! -e $e ]] || ln -s "$PWD/$e" "$src_dir/$e"; done
fi
[[ -e $build_dir ]] || ln -s "$bundle/build" "$build_dir"
ln -sf "$bundle"/build/libibex.so* "$bundle/prefix/lib/"
export LD_LIBRARY_PATH=$bundle/lib:$bundle/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"

py_pid=
if [[ ${GPU_REMOTE_PY:-1} != 0 ]]; then
    (cd python && IBEX_PREFIX=$bundle/prefix timeout 400 python3 setup.py build_ext --inplace) \
        >"$logs/pybuild.log" 2>&1 &
    py_pid=$!
fi

IBEX_BUILD_DIR=$build_dir bash scripts/gpu-check.sh 2>&1 | tee "$logs/gpu-check.log"
rc=${PIPESTATUS[0]}

if [[ -n $py_pid ]]; then
    if wait "$py_pid"; then
        echo "== python tests on torch $(python3 -c 'import torch; print(torch.__version__)')"
        py_tests=${GPU_REMOTE_PY_TESTS:-torch_backend_test ddp_agree_test}
        preload=
        [[ -e $bundle/lib/segv-trace.so ]] && preload=$bundle/lib/segv-trace.so
        (cd tests/python && LD_PRELOAD=$preload PYTHONFAULTHANDLER=1 PYTHONPATH=$OLDPWD/python \
            timeout "${GPU_REMOTE_PY_TIMEOUT:-240}" python3 -m unittest -v $py_tests 2>&1) |
            tee "$logs/python.log" | tail -25
        [[ ${PIPESTATUS[0]} -eq 0 ]] || rc=1
        # name the frames of the extensions built here (libibex's resolve where it was built)
        grep -o '[^ ]*/ibex/_[^ (]*\.so(+0x[0-9a-f]*)' "$logs/python.log" | sort | uniq -c | sort -rn |
            head -40 | while read -r count frame; do
                object=${frame%%(*}; offset=${frame##*(+}; offset=${offset%)}
                echo "$count $frame $(addr2line -f -C -i -e "$object" "$offset" | tr '\n' ' ')"
            done >"$logs/python-frames.txt" 2>&1
    else
        echo "== the python package did not build; the end of its log:"
        tail -30 "$logs/pybuild.log"
        rc=1
    fi
fi
exit "$rc"
