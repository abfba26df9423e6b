#!/usr/bin/env bash
# Prepare a machine (Debian 12, as root or with sudo) to build, test and run
# flagos-torchfl, then build and install it from this checkout. Idempotent:
# each step is skipped when already done, so re-running is cheap (and needs
# no network once everything is in place).
#
#   bash scripts/setup.sh            PYTHON=/path/to/python bash scripts/setup.sh
#
# The project builds against the torch that is already installed; only when
# none is installed does this install torch 2.13.0 (the CPU build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-$(command -v python3 || command -v python || true)}
TORCH_VERSION=2.13.0
APT_PACKAGES=(ccache cmake ninja-build g++ libgtest-dev libopenblas-dev libdnnl-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev libsleef-dev libkissfft-dev
  clang-format)

log() { printf '\n== setup: %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
[ -n "$PYTHON" ] || missing+=(python3 python3-pip python3-dev)
for pkg in "${APT_PACKAGES[@]}"; do installed "$pkg" || missing+=("$pkg"); done
if [ -n "$PYTHON" ] && ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  missing+=(python3-pip python3-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
  log "system packages present"
fi
PYTHON=${PYTHON:-$(command -v python3)}
log "python: $PYTHON ($("$PYTHON" --version 2>&1))"

# Debian's own python refuses pip installs unless told (PEP 668); this
# script is meant for build machines and CI, where that is what we want.
if "$PYTHON" -c 'import sys, sysconfig, os; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
  export PIP_BREAK_SYSTEM_PACKAGES=1
fi
pip_install() { "$PYTHON" -m pip install --disable-pip-version-check "$@"; }

if "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
  log "torch $("$PYTHON" -c 'import torch; print(torch.__version__)') already installed (kept)"
else
  log "installing torch $TORCH_VERSION (CPU build)"
  pip_install "torch==$TORCH_VERSION"
fi

# --no-build-isolation builds with this environment's setuptools: it needs
# editable wheels (>= 64) and bdist_wheel (built in since 70.1).
if "$PYTHON" -c 'import setuptools.command.bdist_wheel' >/dev/null 2>&1; then
  log "setuptools $("$PYTHON" -c 'import setuptools; print(setuptools.__version__)') present"
else
  log "installing setuptools>=70.1"
  pip_install --upgrade "setuptools>=70.1"
fi

# pyyaml: the build generates the operator tables from ops/catalog.yaml.
# pytest-xdist: scripts/test.sh runs the Python tests in two processes.
if "$PYTHON" -c 'import pytest, xdist, expecttest, numpy, yaml' >/dev/null 2>&1 &&
  "$PYTHON" -m ruff --version >/dev/null 2>&1; then
  log "test tools present"
else
  log "installing build and test tools"
  pip_install pytest pytest-xdist expecttest numpy ruff pyyaml
fi

# The cuda plugin builds without a GPU, and the tests compile the generator's
# CUDA C for sm_90, with NVRTC's header and library (cmake/cuda_sdk.cmake):
# the nvidia-cuda-nvrtc wheel (a CUDA build of torch brings its own).
if "$PYTHON" -c 'import glob, importlib.util as u; s = u.find_spec("nvidia"); import sys; sys.exit(not (s and any(glob.glob(p + "/*/include/nvrtc.h") for p in s.submodule_search_locations)))' 2>/dev/null; then
  log "NVRTC present"
else
  log "installing nvidia-cuda-nvrtc (NVRTC: the cuda plugin's compiler, for its tests)"
  pip_install "nvidia-cuda-nvrtc==13.0.88"
fi

# Editable: CMake builds into build/cmake and puts _C*.so and plugins/ into
# python/flagos_torchfl/; a re-run only rebuilds what changed.
log "building and installing flagos-torchfl (pip install --no-build-isolation -e .)"
export FLAGOS_BUILD_JOBS=${FLAGOS_BUILD_JOBS:-2}
# Paths under the clone hash relative: another clone (CI's) reuses ccache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
pip_install --no-build-isolation --no-deps -e .
"$PYTHON" -c 'import flagos_torchfl._C' || {
  echo "setup: flagos_torchfl._C was built but does not import" >&2
  exit 1
}
log "done"
