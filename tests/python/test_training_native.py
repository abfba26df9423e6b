"""Training on the flagos (host) device with no host fallback: a ResNet-style
CNN and a small transformer train a few steps, their losses track the CPU's,
and op_stats() shows zero calls on the "fallback" tier. Also single-op checks
of the native training kernels against CPU (conv, pooling, nll_loss, norm
backwards, embedding backward).

The models live in benchmarks/models.py (shared with the benchmarks).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import flagos_torchfl as ft
import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from models import ResNet, Transformer, cnn_loss, lm_loss  # noqa: E402


def _native_ids() -> set[str]:
    try:
        return set(torch.ops.flagos._catalog_native_ids())
    except (AttributeError, RuntimeError):
        return set()


NATIVE = _native_ids()
# Kernels the training loops need; the backwards with an output_mask
# (Note [Kernels with an output_mask] in backends/host/kernels/kernels.h)
# included.
NEEDED = {
    "convolution_direct",
    "convolution_backward_direct",
    "batch_norm_backward",
    "layer_norm_backward",
    "max_pool2d",
    "max_pool2d_backward",
    "nll_loss",
    "nll_loss_backward",
    "embedding_dense_backward",
}
pytestmark = pytest.mark.skipif(
    not NEEDED <= NATIVE,
    reason="the core was built without the operator catalog or the host plugin lacks the training "
    "kernels (rebuild with -DFLAGOS_ENABLE_CATALOG=ON)",
)


def _fallbacks() -> dict[str, int]:
    return {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}


def _train(model, inputs, loss_fn, opt_cls, steps, **opt_kw):
    ref, dev = copy.deepcopy(model), copy.deepcopy(model).to("flagos")
    o_ref, o_dev = opt_cls(ref.parameters(), **opt_kw), opt_cls(dev.parameters(), **opt_kw)
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
    return losses, _fallbacks(), ref, dev


@pytest.mark.parametrize(
    "opt,dtype", [("sgd", torch.float32), ("adam", torch.float32), ("sgd", torch.float64)]
)
def test_cnn_trains_natively(opt, dtype):
    # Batch norm over 4 samples amplifies float32 rounding step by step; in
    # float64 the losses agree to ~1e-11, which pins the kernels down.
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32, 32, dtype=dtype), torch.randint(0, 10, (4,))
    cls, kw = (
        (torch.optim.SGD, {"lr": 0.01, "momentum": 0.9})
        if opt == "sgd"
        else (torch.optim.Adam, {"lr": 1e-3})
    )
    steps = 3 if dtype == torch.float32 else 5
    losses, fallbacks, ref, dev = _train(
        ResNet(width=8).to(dtype), (x, y), cnn_loss, cls, steps, **kw
    )
    assert fallbacks == {}, fallbacks
    rel = 1e-3 if dtype == torch.float32 else 1e-9
    for cpu, fl in losses:
        assert fl == pytest.approx(cpu, rel=rel, abs=rel), losses
    # Eval mode: batch norm with running stats still takes the host tier
    # (norm.cpp: ATen's CPU kernel returns empty saved stats), nothing else.
    ft.reset_op_stats()
    ref.eval(), dev.eval()
    with torch.no_grad():
        tol = 1e-2 if dtype == torch.float32 else 1e-8
        torch.testing.assert_close(dev(x.to("flagos")).cpu(), ref(x), rtol=tol, atol=tol)
    assert set(_fallbacks()) <= {"aten::native_batch_norm"}, _fallbacks()


@pytest.mark.parametrize("sdpa", [False, True], ids=["matmul_softmax", "sdpa"])
def test_transformer_trains_natively(sdpa):
    torch.manual_seed(0)
    idx, tgt = torch.randint(0, 256, (4, 32)), torch.randint(0, 256, (4, 32))
    losses, fallbacks, _, _ = _train(
        Transformer(sdpa=sdpa), (idx, tgt), lm_loss, torch.optim.AdamW, 4, lr=1e-3
    )
    assert fallbacks == {}, fallbacks
    for cpu, fl in losses:
        assert fl == pytest.approx(cpu, rel=1e-4, abs=1e-5), losses
    assert losses[-1][1] < losses[0][1]


def _check(fn, *args, rtol=1e-4, atol=1e-5, allowed=frozenset()):
    """fn on CPU and on flagos (inputs requiring grad get gradients compared too)."""
    cpu = [
        a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a
        for a in args
    ]
    dev = [
        a.detach().to("flagos").requires_grad_(a.requires_grad) if torch.is_tensor(a) else a
        for a in args
    ]
    ft.reset_op_stats()
    out_c, out_d = fn(*cpu), fn(*dev)
    torch.testing.assert_close(out_d.cpu(), out_c, rtol=rtol, atol=atol)
    if out_c.requires_grad:
        g = torch.randn_like(out_c)
        out_c.backward(g)
        out_d.backward(g.to("flagos"))
        for a, b in zip(cpu, dev, strict=True):
            if torch.is_tensor(a) and a.requires_grad:
                torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=rtol, atol=atol)
    assert set(_fallbacks()) <= set(allowed), _fallbacks()


@pytest.mark.parametrize(
    "stride,padding,dilation,groups,bias",
    [
        (1, 1, 1, 1, False),
        (2, 3, 1, 1, True),
        (1, 0, 1, 1, True),
        (2, 0, 1, 1, False),
        (1, 2, 2, 2, True),
        (1, 1, 1, 8, False),
    ],
)
def test_conv2d(stride, padding, dilation, groups, bias):
    torch.manual_seed(0)
    k = 1 if padding == 0 else 3
    x = torch.randn(2, 8, 11, 9, requires_grad=True)
    w = torch.randn(16, 8 // groups, k, k, requires_grad=True)
    b = torch.randn(16, requires_grad=True) if bias else None
    _check(
        lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups),
        x,
        w,
        b,
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.parametrize("k,s,p,ceil", [(3, 2, 1, False), (2, 2, 0, True), (3, 1, 0, False)])
def test_max_pool2d(k, s, p, ceil):
    x = torch.randn(2, 3, 10, 9, requires_grad=True)
    _check(lambda x: F.max_pool2d(x, k, s, p, ceil_mode=ceil), x)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (4, 4)])
def test_adaptive_avg_pool2d(size):
    x = torch.randn(2, 3, 10, 9, requires_grad=True)
    _check(lambda x: F.adaptive_avg_pool2d(x, size), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy(reduction, weighted):
    x = torch.randn(6, 5, requires_grad=True)
    y = torch.tensor([0, 4, 2, -100, 1, 3])
    w = torch.rand(5) if weighted else None
    # (label smoothing with class weights gathers and masked_selects: not here)
    smoothing = 0.0 if weighted else 0.1
    _check(
        lambda x, w: F.cross_entropy(
            x, y.to(x.device), w, reduction=reduction, label_smoothing=smoothing
        ),
        x,
        w,
    )


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm(training):
    x = torch.randn(4, 3, 5, 5, requires_grad=True)
    w, b = torch.rand(3, requires_grad=True), torch.randn(3, requires_grad=True)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    allowed = set() if training else {"aten::native_batch_norm"}  # eval: host tier (norm.cpp)
    _check(
        lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training),
        x,
        w,
        b,
        rm,
        rv,
        allowed=allowed,
    )


def test_layer_norm_and_embedding():
    x = torch.randn(3, 7, 16, requires_grad=True)
    w, b = torch.rand(16, requires_grad=True), torch.randn(16, requires_grad=True)
    _check(lambda x, w, b: F.layer_norm(x, (16,), w, b), x, w, b)
    emb = torch.randn(10, 4, requires_grad=True)
    idx = torch.tensor([[1, 2, 2], [0, 9, 1]])
    _check(lambda e: F.embedding(idx.to(e.device), e, padding_idx=0), emb)
