#!/usr/bin/env bash
# A virtualenv with another torch release, flagos-torchfl built into it.
# Idempotent, and cached outside the clone, so that CI pays the multi-GB
# download once per machine:
#
#   bash scripts/torch_env.sh 2.15.0       # prints the venv's python on the last line
#
# Each release gets its own build folder (build/torch-<version>): a build
# folder holds one torch's generated catalog and objects. ccache (with
# CCACHE_BASEDIR at the clone) shares the torch-free objects (plugins,
# kernel generator) between the builds and across clones.
#
# Releases and their companions (the model zoo needs torchvision, which the
# registry has only up to torch 2.14):
#   2.11.0: the GPU machine's torch (its CUDA wheel brings NVRTC, cuBLASLt and
#           their headers: the cuda plugin builds in full)
#   2.14.1: torchvision 0.29.1, timm, transformers, accelerate, Lightning (the
#           model-zoo and frameworks environment)
#   2.15.0: transformers
#
# FLAGOS_ENV_PREPARE_ONLY=1 installs the packages and stops before the build:
# scripts/test.sh fetches every release's multi-GB wheels in the background
# while the main suite runs, and builds each one when its tests come.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=${1:?usage: torch_env.sh TORCH_VERSION}
case "$version" in
  2.14.1) extras=(torchvision==0.29.1 timm==1.0.31 transformers==5.24.0 accelerate==1.16.0
    lightning==2.6.6) ;;
  2.15.0) extras=(transformers==5.24.0) ;;
  *) extras=() ;;
esac
root=${FLAGOS_ENV_CACHE:-/var/cache/flagos-torchfl}
venv="$root/venv-torch-$version"
log() { printf '\n== torch %s: %s\n' "$version" "$*" >&2; }

mkdir -p "$root"
[ -x "$venv/bin/python" ] || { log "creating $venv"; python3 -m venv "$venv"; }
py="$venv/bin/python"
want=(torch=="$version" "${extras[@]}" pytest pytest-xdist expecttest numpy pyyaml "setuptools>=70.1")
# Installed already? (pip check-free: ask the packages themselves.)
if ! "$py" - "$version" "${extras[@]}" <<'PY' >/dev/null 2>&1; then
import sys
from importlib.metadata import version
want = {"torch": sys.argv[1], **dict(a.split("==") for a in sys.argv[2:])}
for name, v in want.items():
    assert version(name).split("+")[0] == v, name
import pytest, xdist, expecttest, numpy, yaml  # noqa: F401
PY
  log "installing ${want[*]}"
  # The machine's pip configuration may cap torch at the release on its disk;
  # this environment asks for an exact release from the registry instead.
  PIP_CONFIG_FILE=/dev/null "$py" -m pip install --disable-pip-version-check -q "${want[@]}" >&2
fi

if [ "${FLAGOS_ENV_PREPARE_ONLY:-0}" = 1 ]; then
  log "packages ready in $venv (build skipped: FLAGOS_ENV_PREPARE_ONLY=1)"
  echo "$py"
  exit 0
fi
log "building flagos-torchfl into $venv (build/torch-$version)"
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
FLAGOS_BUILD_DIR="build/torch-$version" FLAGOS_BUILD_TESTS=OFF \
  FLAGOS_BUILD_JOBS=${FLAGOS_BUILD_JOBS:-2} \
  "$py" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps . >&2
(cd / && "$py" -c 'import flagos_torchfl._C') || {
  echo "torch_env: flagos_torchfl._C does not import with torch $version" >&2
  exit 1
}
echo "$py"
