"""Run a benchmark body in a fresh interpreter and read the JSON line it prints last.

Every configuration of a benchmark runs in its own process (the environment
selects backend, cache folder and policies); a failure ends the benchmark
with the child's stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run_json(code: str, *args: str, env: dict[str, str], what: str, timeout: float = 1800) -> dict:
    """`python -c code args...` under `env`; returns its last stdout line, parsed."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{what}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
