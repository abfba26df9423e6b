#!/usr/bin/env bash
# The main job: set up (idempotent), then run the quick start on the flagos
# device and check it against CPU (examples/quickstart.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
PYTHON=${PYTHON:-$(command -v python3 || command -v python)}
exec "$PYTHON" examples/quickstart.py
