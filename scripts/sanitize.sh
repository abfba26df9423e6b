#!/usr/bin/env bash
# The sanitizer run (issue 15): the core, the plugins and the C++ tests built
# with AddressSanitizer + UndefinedBehaviorSanitizer in build/asan, then
#   1. every C++ test (ctest), and
#   2. a Python smoke (scripts/sanitize_smoke.py: training steps, copies,
#      streams, the generated tier, a fork, exit) on host and opencl, with
#      the instrumented _C and plugins in a package copy under build/asan/pkg.
# Run before each release (docs/reliability.md); not part of the CI job. Any
# report fails the run.
#   SANITIZE_CORE=0 (default 1): instrument the plugins, the kernel
#   library and the C++ tests only; the smoke then loads the instrumented
#   plugins into the regular core (~8 min instead of ~40 on 2 cores).
# Usage: bash scripts/sanitize.sh [ctest|smoke|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
CORE=${SANITIZE_CORE:-1}
PYTHON=${PYTHON:-python3}
BUILD=build/asan$([[ $CORE == 1 ]] || echo -plugins)
PKG=$BUILD/pkg/flagos_torchfl
export CCACHE_BASEDIR=$PWD

SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# The core links torch's uninstrumented libraries: ASan must come first in
# the process (LD_PRELOAD for Python) and must not fail on their leaks;
# container overflow checks need every library instrumented, so they are off.
export ASAN_OPTIONS=detect_leaks=0:detect_container_overflow=0:abort_on_error=1:strict_init_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# The package's Python files, next to the instrumented _C and plugins.
rm -rf "$PKG" && mkdir -p "$PKG" && cp -r python/flagos_torchfl/. "$PKG/"
rm -f "$PKG"/plugins/*.so && find "$PKG" -name __pycache__ -prune -exec rm -rf {} +
[[ $CORE == 1 ]] && rm -f "$PKG"/_C*.so  # else the regular core, next to instrumented plugins
cmake -S . -B "$BUILD" -G Ninja -DPython3_EXECUTABLE="$(command -v "$PYTHON")" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLAGOS_BUILD_TESTS=ON -DFLAGOS_PY_OUTPUT_DIR="$PWD/$PKG" \
  -DFLAGOS_TEST_PLUGIN_DIR="$PWD/$BUILD/test_plugins" \
  -DFLAGOS_BUILD_CORE=$([[ $CORE == 1 ]] && echo ON || echo OFF) \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$BUILD" -j2

if [[ $WHAT == all || $WHAT == ctest ]]; then
  ctest --test-dir "$BUILD" --output-on-failure -j1
fi
if [[ $WHAT == all || $WHAT == smoke ]]; then
  PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
  for backend in host opencl; do
    echo "== python smoke on $backend"
    env LD_PRELOAD="$PRELOAD" PYTHONPATH="$PWD/$BUILD/pkg" TORCH_DEVICE_BACKEND_AUTOLOAD=0 \
      FLAGOS_CACHE_DIR="$PWD/$BUILD/kernel-cache" \
      "$PYTHON" scripts/sanitize_smoke.py "$backend"
  done
fi
echo "sanitize: no reports"
