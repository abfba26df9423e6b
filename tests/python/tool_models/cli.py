"""Run `python -m flagos_torchfl ...` (or a snippet ending in the CLI) in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from conftest import REPO, clean_env

MODELS = Path(__file__).resolve().parent
MLP = str(MODELS / "mlp.py")
SPECIAL = str(MODELS / "special.py")
TIERS = {"native", "core", "generated", "decomposition", "fallback"}


def run_cli(*args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """`python -m flagos_torchfl ARGS` with FLAGOS_* cleared (plus `env`); output captured."""
    return subprocess.run(
        [sys.executable, "-m", "flagos_torchfl", *args],
        env=clean_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0", **env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def run_cli_after(setup: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run `setup` (Python, after the host backend is up), then the CLI in the same process:
    how the tests inject a wrong kernel (torch.library) before `validate` runs."""
    code = (
        "import sys, torch, flagos_torchfl as ft\n"
        "ft.initialize('host')\n"
        + textwrap.dedent(setup)
        + "\nfrom flagos_torchfl.__main__ import main\n"
        + f"sys.exit(main({list(args)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env=clean_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0"),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def explain(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-3000:]}"
