"""Training on whichever backend the test process runs (conftest.BACKEND:
host, or opencl in CI's second pass): a ResNet-style CNN and a small
transformer train a few steps and their losses track the CPU's. Every
fallback is counted and printed. On the two backends this repository ships
(host, opencl) a training step must not touch the host: native, generated
and composite kernels (convolution as im2col + GEMM, norms, losses) cover
it. Another vendor's backend may lack kernels: then fallbacks are allowed.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import flagos_torchfl as ft
import pytest
import torch
from conftest import BACKEND, CORE_ERROR

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from models import ResNet, Transformer, cnn_loss, lm_loss  # noqa: E402

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")


def _train(model, inputs, loss_fn, steps, lr):
    ref, dev = copy.deepcopy(model), copy.deepcopy(model).to("flagos")
    o_ref = torch.optim.AdamW(ref.parameters(), lr=lr)
    o_dev = torch.optim.AdamW(dev.parameters(), lr=lr)
    ft.reset_op_stats()
    losses = []
    for _ in range(steps):
        pair = []
        for m, o, d in ((ref, o_ref, "cpu"), (dev, o_dev, "flagos")):
            o.zero_grad()
            loss = loss_fn(m, *[t.to(d) for t in inputs])
            loss.backward()
            o.step()
            pair.append(loss.item())
        losses.append(pair)
    tiers: dict[str, int] = {}
    for counts in ft.op_stats().values():
        for tier, n in counts.items():
            tiers[tier] = tiers.get(tier, 0) + n
    fallbacks = {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}
    print(f"[{BACKEND}] calls per tier: {tiers}; fallbacks: {fallbacks}")
    return losses, (tiers, fallbacks)


def _check_tiers(result):
    tiers, fallbacks = result
    assert tiers.get("native", 0) + tiers.get("generated", 0) > 0, tiers
    if BACKEND == "opencl":  # no native pointwise kernels: the generator runs them
        assert tiers.get("generated", 0) > 0, tiers
    if BACKEND in ("host", "opencl"):
        assert fallbacks == {}, fallbacks


def test_cnn_losses_track_cpu():
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 16, 16, dtype=torch.float64), torch.randint(0, 10, (4,))
    losses, tiers = _train(ResNet(width=4).double(), (x, y), cnn_loss, 3, 1e-3)
    for cpu, fl in losses:
        assert fl == pytest.approx(cpu, rel=1e-8, abs=1e-8), losses
    _check_tiers(tiers)


def test_transformer_losses_track_cpu():
    torch.manual_seed(0)
    idx, tgt = torch.randint(0, 256, (2, 16)), torch.randint(0, 256, (2, 16))
    losses, tiers = _train(Transformer(), (idx, tgt), lm_loss, 3, 1e-3)
    for cpu, fl in losses:
        assert fl == pytest.approx(cpu, rel=1e-4, abs=1e-5), losses
    assert losses[-1][1] < losses[0][1]
    _check_tiers(tiers)
