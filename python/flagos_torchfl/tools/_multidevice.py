"""`validate --level 4`: DDP on N local processes through the fccl backend.

    level_multidevice(spec, nprocs=2, ...) -> {"criterion", "cases": [gradients, scaling]}

Starts `python -m torch.distributed.run --nproc-per-node=N -m
flagos_torchfl.tools._ddp_worker` (each rank: device flagos:<rank>,
FLAGOS_HOST_DEVICES=N so the host plugin shows N devices) and reads rank 0's
JSON. Two cases: the gradients of one DDP step equal one CPU process's on
the combined batch (Note [Level 4 shards] in _ddp_worker.py), and the
throughput scaling of N processes over one (reported; a failure only below
min_scaling). The worker processes load the model spec afresh: a file spec
(relative to the current folder) or a module importable on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(nprocs: int) -> dict[str, str]:
    env = config.environment()
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env["FLAGOS_HOST_DEVICES"] = str(nprocs)
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's own default, without its warning
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    return env


def _tail(text: str, lines: int = 12) -> str:
    kept = [line for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


def level_multidevice(
    spec: str,
    backend: str | None = None,
    nprocs: int = 2,
    steps: int = 20,
    warmup: int = 3,
    lr: float = 0.05,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    min_scaling: float = 0.0,
    timeout: float = 300.0,
    batch_dim: int = 0,
) -> dict[str, Any]:
    """Run the DDP check on `nprocs` processes; see the module docstring."""
    if nprocs < 2:
        raise ValueError(f"validate: level 4 needs at least 2 processes, not {nprocs}")
    criterion = (
        f"one DDP step on {nprocs} processes gives the gradients of one CPU process on the "
        f"combined batch (|d - c| <= {atol:g} + {rtol:g}*|c|); samples/s scaling reported"
        + (f", >= {min_scaling:g}x" if min_scaling else "")
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flagos_validate4_") as tmp:
        out = Path(tmp) / "result.json"
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc-per-node={nprocs}",
            "--master-addr=127.0.0.1",
            f"--master-port={_free_port()}",
            "-m",
            "flagos_torchfl.tools._ddp_worker",
            f"--model={spec}",
            f"--out={out}",
            f"--steps={steps}",
            f"--warmup={warmup}",
            f"--lr={lr}",
            f"--atol={atol}",
            f"--rtol={rtol}",
            f"--timeout={max(30.0, timeout / 2)}",
            f"--batch-dim={batch_dim}",
        ]
        if backend:
            command.append(f"--backend={backend}")
        try:
            proc = subprocess.run(
                command, env=_env(nprocs), capture_output=True, text=True, timeout=timeout
            )
            failure = None if proc.returncode == 0 else f"exit {proc.returncode}"
            output = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as err:
            failure = f"no result within {timeout:g} s (a hang?)"
            output = (err.stdout or b"").decode(errors="replace") + (err.stderr or b"").decode(
                errors="replace"
            )
        result = json.loads(out.read_text()) if out.is_file() else {}
    elapsed = time.perf_counter() - t0
    grads: dict[str, Any] = {"name": "gradients", "nprocs": nprocs, "time": elapsed}
    scaling: dict[str, Any] = {"name": "scaling", "nprocs": nprocs, "time": 0.0}
    if failure or "error" in result or "max_abs_diff" not in result:
        why = result.get("error") or f"{failure or 'no result'}: {_tail(output)}"
        message = f"DDP on {nprocs} processes failed: {why}"
        grads.update(ok=False, message=message)
        scaling.update(ok=False, message=message)
        return {"criterion": criterion, "cases": [grads, scaling]}
    grads.update(
        max_abs_diff=result["max_abs_diff"],
        max_abs_grad=result["max_abs_grad"],
        rank_spread=result["spread"],
        route=result.get("route"),
        atol=atol,
        rtol=rtol,
        ok=bool(result["grads_close"]) and result["spread"] == 0.0,
    )
    if not grads["ok"]:
        grads["message"] = (
            f"DDP gradients differ from one process on the combined batch: max abs diff "
            f"{result['max_abs_diff']:.3g} (atol {atol:g}, rtol {rtol:g}); spread between "
            f"ranks {result['spread']:.3g}"
        )
    scaling.update(
        single_samples_per_s=result["single_samples_per_s"],
        ddp_samples_per_s=result["ddp_samples_per_s"],
        scaling=result["scaling"],
        efficiency=result["efficiency"],
        steps=result["steps"],
        batch_per_rank=result["batch_per_rank"],
        batch_dim=batch_dim,
        min_scaling=min_scaling,
        ok=result["scaling"] >= min_scaling,
    )
    if not scaling["ok"]:
        scaling["message"] = (
            f"throughput scales {result['scaling']:.2f}x on {nprocs} processes, below "
            f"the required {min_scaling:g}x"
        )
    return {"criterion": criterion, "cases": [grads, scaling]}
