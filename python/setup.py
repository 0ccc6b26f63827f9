"""Builds the ibex package against an installed libibex.

    pip install ./python                       # libibex found by pkg-config (ibex.pc)
    IBEX_PREFIX=/opt/ibex pip install ./python # or under a prefix

The PyTorch backend extension is built when torch is importable (IBEX_PYTHON_TORCH=0 skips
it). The sources include their headers from the repository root, so build from a
checkout (pip builds in place)."""

import os
import shlex
import subprocess

import pybind11
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def libibex():
    """(include dirs, library dirs) of the installed libibex."""
    prefix = os.environ.get("IBEX_PREFIX")
    if prefix:
        libdirs = [d for d in (os.path.join(prefix, "lib"), os.path.join(prefix, "lib64"),
                               os.path.join(prefix, "lib", "x86_64-linux-gnu"))
                   if os.path.isdir(d)]
        return [os.path.join(prefix, "include")], libdirs
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags-only-I", "ibex"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs-only-L", "ibex"], text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("ibex python package: libibex not found (pkg-config ibex failed: "
                         f"{e}); install ibex or set IBEX_PREFIX") from e
    return ([f[2:] for f in shlex.split(cflags) if f.startswith("-I")],
            [f[2:] for f in shlex.split(libs) if f.startswith("-L")])


incs, libdirs = libibex()
# Some toolchains link their C++ runtime statically into a shared object (the gcc under
# /opt on the CUDA host does). Its symbols then stay exported, and libibex, loaded as this
# extension's dependency, binds to that copy instead of libstdc++.so: its first
# `istream >> int` crashed there. --exclude-libs keeps every static archive's symbols
# private to the extension.
private_runtime = ["-Wl,--exclude-libs,ALL"]
common = dict(include_dirs=[REPO, pybind11.get_include()] + incs, library_dirs=libdirs,
              runtime_library_dirs=libdirs, libraries=["ibex"], language="c++",
              extra_link_args=private_runtime)
# The backend hands torch's own objects (Store, Work) across pybind11, so it must be built
# with the pybind11 that torch was built with (its headers ship in torch's include dirs,
# which CppExtension adds); another pybind11 keeps its types apart and refuses them.
torch_common = dict(common, include_dirs=[REPO] + incs)
extensions = [Extension("ibex._core", ["csrc/common.cpp", "csrc/core.cpp", "csrc/verbs.cpp"],
                        extra_compile_args=["-std=c++20", "-fvisibility=hidden"], **common)]
cmdclass = {}

torch = None
if os.environ.get("IBEX_PYTHON_TORCH", "1") != "0":
    try:
        import torch
        from torch.utils.cpp_extension import BuildExtension, CppExtension
    except ImportError:
        torch = None
if torch is not None:
    # torch's headers ask for C++17 up to 2.11 and for C++20 from 2.12 on
    major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    cxx_std = "-std=c++20" if (major, minor) >= (2, 12) else "-std=c++17"
    sources = ["csrc/torch/" + f for f in ("backend.cpp", "batches.cpp", "rendezvous.cpp", "tensors.cpp")]
    extensions.append(CppExtension("ibex._torch_backend", sources,
                                   extra_compile_args=[cxx_std], **torch_common))
    cmdclass["build_ext"] = BuildExtension.with_options(no_python_abi_suffix=False)

setup(ext_modules=extensions, cmdclass=cmdclass)
