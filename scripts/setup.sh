#!/usr/bin/env bash
# Installs the Debian 12 packages ibex needs (only those missing; as root), then configures
# and builds everything with warnings as errors into $IBEX_BUILD_DIR (default: build/).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${IBEX_BUILD_DIR:-build}

PACKAGES=(
    build-essential cmake ninja-build pkg-config
    libgtest-dev libbenchmark-dev libisal-dev
    libibverbs-dev librdmacm-dev libdpdk-dev libnuma-dev libhwloc-dev hwloc
    clang-14 libclang-rt-14-dev          # libFuzzer runtime (only recommended by clang-14)
    tshark iperf3 ucx-utils openmpi-bin libopenmpi-dev
    iproute2 procps ethtool              # ethtool: tests/transport/soft/udp/netns_test (UDP segmentation off on a veth)
    gnuplot-nox                          # bench/incast, bench/loss and ibex_sim plots
    libbpf-dev                           # bench/loss: tc BPF random drop where netem is missing
    perftest                             # stock ib_*_bw/lat: flag spellings the ibex_* tools follow
    python3-dev pybind11-dev python3-pybind11 python3-numpy   # python/: the ibex package
    python3-torch libtorch-dev           # python/: the torch.distributed backend (torch 1.13)
    python3-venv python3-pip             # tests/python: pip install ./python into a venv
)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing packages (${missing[*]}); run as root to install them" >&2
        exit 1
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture: answer no, without a prompt.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake -S . -B "$BUILD" -G Ninja -DIBEX_WERROR=ON ${CMAKE_BUILD_TYPE:+-DCMAKE_BUILD_TYPE=$CMAKE_BUILD_TYPE}
cmake --build "$BUILD" -j "$(nproc)"
