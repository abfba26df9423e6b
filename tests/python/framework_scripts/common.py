"""Shared by the framework scripts: a tiny random-weight model, its data, the report.

Each script trains the same model on the same data; one run is the
reference (a single CPU process on the combined batch), the others run on
flagos under the cuda alias, as an unmodified CUDA script would. Each writes
a JSON report: its final parameters, its losses, and the host fallbacks
this process took (ft.op_stats()), for test_frameworks.py to compare.
"""

from __future__ import annotations

import json
import os
import sys

import torch

STEPS = 20
COMBINED_BATCH = 8
FEATURES = 16


class TinyNet(torch.nn.Module):
    """LayerNorm, two Linear layers and GELU: the transformer block's GEMM path in miniature."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(FEATURES)
        self.up = torch.nn.Linear(FEATURES, 32)
        self.down = torch.nn.Linear(32, 1)

    def forward(self, x, labels=None):
        out = self.down(torch.nn.functional.gelu(self.up(self.norm(x)))).squeeze(-1)
        if labels is None:
            return out
        loss = torch.nn.functional.mse_loss(out.float(), labels.float())
        return {"loss": loss, "logits": out}


def make_model() -> TinyNet:
    torch.manual_seed(1234)
    return TinyNet()


def make_data(n: int = STEPS * COMBINED_BATCH) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(99)
    x = torch.randn(n, FEATURES, generator=g)
    y = torch.randn(n, generator=g)
    return x, y


class Rows(torch.utils.data.Dataset):
    """The data as dicts, as transformers' Trainer takes them."""

    def __init__(self) -> None:
        self.x, self.y = make_data()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


def fallbacks() -> dict:
    """Host fallbacks this process took (empty without flagos)."""
    if "flagos_torchfl" not in sys.modules:
        return {}
    import flagos_torchfl as ft

    if not ft.is_initialized():
        return {}
    return {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}


def report(path: str, model: torch.nn.Module, rank: int, **extra) -> None:
    """Write this rank's report to path (".rank<N>" appended when rank > 0)."""
    params = {k: v.detach().float().cpu().tolist() for k, v in model.state_dict().items()}
    out = {"rank": rank, "params": params, "fallbacks": fallbacks(), **extra}
    if rank:
        path = f"{path}.rank{rank}"
    with open(path, "w") as f:
        json.dump(out, f)


def out_path() -> str:
    return os.environ["FRAMEWORK_REPORT"]
