#!/usr/bin/env bash
# Set up (idempotent), then run every test: the C++ tests (ctest, in
# setup.py's CMake build folder), lint, and the Python tests. Runs all of
# them and exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PYTHON=${PYTHON:-$(command -v python3 || command -v python)}

failed=()
run() {
  printf '\n== test: %s\n' "$*"
  "$@" || failed+=("$*")
}
run ctest --test-dir build/cmake --output-on-failure -j2
run clang-format --dry-run -Werror $(git ls-files '*.c' '*.cpp' '*.h')
run "$PYTHON" -m ruff check python tests examples benchmarks
run "$PYTHON" -m ruff format --check python tests examples benchmarks
# Generated kernels persist in the build folder, not in the user's cache.
export FLAGOS_CACHE_DIR=${FLAGOS_CACHE_DIR:-$PWD/build/kernel-cache}
run "$PYTHON" -m pytest tests/python
# The second backend, a different SDK: the quick start, the OpInfo sweep and
# the model tests again on opencl (PoCL here), where generated kernels and
# CLBlast do the work.
if "$PYTHON" -c 'import flagos_torchfl as ft; ft.initialize("opencl")' >/dev/null 2>&1; then
  run env FLAGOS_BACKEND=opencl "$PYTHON" examples/quickstart.py
  run env FLAGOS_BACKEND=opencl "$PYTHON" -m pytest tests/python/test_opinfo_catalog.py \
    tests/python/test_training_any_backend.py tests/python/test_models.py
elif [ -n "${CI:-}" ]; then
  failed+=("opencl backend unavailable (PoCL is installed by scripts/setup.sh)")
fi

if [ ${#failed[@]} -gt 0 ]; then
  printf '\nFAILED:\n' >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
printf '\nall tests passed\n'
