"""Shared by the device checks (scripts/device_check.sh): bring up flagos on the
cuda plugin *beside* torch's native CUDA in one process, move tensors between
them, time work the same way on both, and write results as JSON.

Every check compares flagos (our layer: the cuda plugin's cuBLASLt GEMMs and
NVRTC-compiled generated kernels) with native CUDA (torch's own kernels) on
the same GPU, in the same process (docs/architecture.md, "cuda").
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

FLAGOS = "flagos"
# The yardstick device: torch's own CUDA. FLAGOS_CHECK_NATIVE=cpu (with
# FLAGOS_DEVICE_BACKEND=host) runs the checks' logic on a machine without a
# GPU, to try the scripts before spending GPU time.
NATIVE = os.environ.get("FLAGOS_CHECK_NATIVE", "cuda")


def init() -> dict[str, Any]:
    """Initialize flagos on the cuda plugin without the alias (native `cuda` stays
    torch's own); returns backend_info()."""
    os.environ.setdefault("FLAGOS_ALIAS_CUDA", "0")
    import flagos_torchfl as ft

    if NATIVE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("native CUDA is not available: this check needs the GPU machine")
    ft.initialize(os.environ.get("FLAGOS_DEVICE_BACKEND", "cuda"))
    return ft.backend_info(verbose=False)


def to_flagos(x: Any) -> Any:
    """A native CUDA (or CPU) tensor's copy on flagos, through the host (the
    general path; flagos_torchfl.interop is the zero-copy one)."""
    if isinstance(x, torch.Tensor):
        y = x.detach().cpu().to(FLAGOS)
        return y.requires_grad_(x.requires_grad) if x.is_leaf and x.requires_grad else y
    return x


def to_cpu(x: Any) -> Any:
    return x.detach().cpu() if isinstance(x, torch.Tensor) else x


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == FLAGOS:
        torch.flagos.synchronize()


def timed(device: str, fn: Callable[[], Any], iters: int, warmup: int = 2) -> float:
    """Seconds per call of fn on `device`: wall clock around `iters` calls, the
    device synchronized before and after (the same method on both devices)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / iters


def best_of(device: str, fn: Callable[[], Any], iters: int, repeats: int = 3) -> float:
    """The fastest of `repeats` timed() runs (the least disturbed one)."""
    return min(timed(device, fn, iters, warmup=1 if r else 2) for r in range(repeats))


class Results:
    """A JSON file rewritten after every record, so a check cut short by its
    time limit still leaves what it measured."""

    def __init__(self, path: str | os.PathLike, meta: dict[str, Any]):
        self.path = Path(path)
        self.data: dict[str, Any] = {"meta": meta, "records": {}}
        self.flush()

    def add(self, key: str, value: Any) -> None:
        self.data["records"][key] = value
        self.flush()

    def flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True, default=str))
        tmp.replace(self.path)


def meta() -> dict[str, Any]:
    return {
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if NATIVE == "cuda" else NATIVE,
        "cuda": torch.version.cuda,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
