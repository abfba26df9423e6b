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
run "$PYTHON" -m pytest tests/python

if [ ${#failed[@]} -gt 0 ]; then
  printf '\nFAILED:\n' >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
printf '\nall tests passed\n'
