"""The operators of a stock training step on the device, never on the host
(issue 31): half-precision GEMMs (autocast's, Trainer bf16/fp16), gradient
clipping's linalg_vector_norm, and the fused Adam/AdamW (Trainer's default
optimizer), each compared with CPU and counted by tier.

On host the half GEMMs are the plugin's own kernel (Note [Half GEMMs on the
host]); on a backend whose GEMM takes float only (opencl) the half-GEMM
composite runs the float GEMM on the device. Either way: no fallback.
"""

from __future__ import annotations

import flagos_torchfl as ft
import pytest
import torch
from conftest import BACKEND, CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"
HALF = [torch.bfloat16, torch.float16]


def tiers(name: str) -> dict[str, int]:
    return ft.op_stats().get(name, {})


def assert_no_fallback() -> None:
    fallbacks = {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}
    assert not fallbacks, fallbacks


@pytest.fixture(autouse=True)
def fresh_stats():
    ft.reset_op_stats()
    yield


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_half_gemms_match_cpu_without_fallback(dtype):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(33, 17, generator=g).to(dtype), torch.randn(17, 9, generator=g).to(dtype)
    bias = torch.randn(9, generator=g).to(dtype)
    x, y = torch.randn(3, 5, 7, generator=g).to(dtype), torch.randn(3, 7, 4, generator=g).to(dtype)
    z = torch.randn(3, 5, 4, generator=g).to(dtype)
    cases = [
        (torch.mm, (a, b), {}),
        (torch.mm, (a.t(), a), {}),  # a transposed operand
        (torch.addmm, (bias, a, b), {"beta": 0.5, "alpha": 2.0}),
        (torch.bmm, (x, y), {}),
        (torch.baddbmm, (z, x, y), {"beta": 0.25, "alpha": 1.5}),
        (torch.nn.functional.linear, (a, b.t(), bias), {}),
    ]
    for fn, args, kwargs in cases:
        expected = fn(*args, **kwargs)
        actual = fn(*(t.to(DEV) for t in args), **kwargs)
        assert actual.dtype == dtype and actual.device.type == DEV
        # CPU: float multiply-adds rounded once; so do both device paths.
        torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0, msg=fn.__name__)
    in_place = bias.to(DEV).expand(33, 9).contiguous()
    in_place.addmm_(a.to(DEV), b.to(DEV))
    torch.testing.assert_close(
        in_place.cpu(), torch.addmm(bias.expand(33, 9), a, b), atol=0, rtol=0
    )
    assert_no_fallback()
    mm = tiers("aten::mm")
    if BACKEND == "host":
        assert set(mm) == {"native"}, mm  # the host plugin's own half GEMM
    else:
        assert mm.get("native", 0) + mm.get("decomposition", 0) > 0, mm


def test_half_gemm_backward_under_autocast():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    x = torch.randn(4, 8)
    grads = []
    for device in ("cpu", DEV):
        m = [p.detach().clone().to(device).requires_grad_() for p in model.parameters()]
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            h = torch.nn.functional.linear(x.to(device), m[0], m[1])
            out = torch.nn.functional.linear(torch.nn.functional.gelu(h), m[2], m[3])
        out.float().pow(2).sum().backward()
        grads.append([p.grad.cpu() for p in m])
    for on_dev, on_cpu in zip(grads[1], grads[0], strict=True):
        # bf16 activations: GELU in bf16 may round differently by one ulp.
        torch.testing.assert_close(on_dev, on_cpu, atol=2e-2, rtol=2e-2)
    assert_no_fallback()


@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, float("inf"), float("-inf")])
def test_vector_norm_matches_cpu(ord):
    x = torch.randn(6, 7, generator=torch.Generator().manual_seed(1))
    for dim in (None, (1,), (0, 1), -1):
        for keepdim in (False, True):
            expected = torch.linalg.vector_norm(x, ord, dim, keepdim)
            actual = torch.linalg.vector_norm(x.to(DEV), ord, dim, keepdim)
            torch.testing.assert_close(actual.cpu(), expected)
    out = torch.empty((), device=DEV)
    torch.linalg.vector_norm(x.to(DEV), ord, out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.vector_norm(x, ord))
    half = x.bfloat16()
    torch.testing.assert_close(
        torch.linalg.vector_norm(half.to(DEV), ord).cpu(), torch.linalg.vector_norm(half, ord)
    )
    assert_no_fallback()
    assert tiers("aten::linalg_vector_norm").get("decomposition"), ft.op_stats()


def test_clip_grad_norm_matches_cpu():
    torch.manual_seed(2)
    params = [torch.randn(5, 3), torch.randn(7)]
    norms, clipped = [], []
    for device in ("cpu", DEV):
        ps = [p.clone().to(device).requires_grad_() for p in params]
        for p in ps:
            p.grad = (p.detach() * 3).clone()
        norms.append(torch.nn.utils.clip_grad_norm_(ps, 1.0).cpu())
        clipped.append([p.grad.cpu() for p in ps])
    torch.testing.assert_close(norms[1], norms[0])
    for a, b in zip(clipped[1], clipped[0], strict=True):
        torch.testing.assert_close(a, b)
    assert_no_fallback()


@pytest.mark.parametrize("optimizer", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("maximize", [False, True])
def test_fused_adam_matches_cpu(optimizer, amsgrad, maximize):
    torch.manual_seed(3)
    start = [torch.randn(4, 3), torch.randn(5)]
    results = []
    for device in ("cpu", DEV):
        ps = [p.clone().to(device).requires_grad_() for p in start]
        opt = optimizer(
            ps, lr=1e-2, weight_decay=0.1, amsgrad=amsgrad, maximize=maximize, fused=True
        )
        for step in range(3):
            g = torch.Generator().manual_seed(step)
            for p in ps:
                p.grad = torch.randn(p.shape, generator=g).to(device)
            opt.step()
        state = [opt.state[p] for p in ps]
        results.append([p.detach().cpu() for p in ps] + [s["exp_avg_sq"].cpu() for s in state])
    for on_dev, on_cpu in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(on_dev, on_cpu)
    assert_no_fallback()
    name = "aten::_fused_adamw_" if optimizer is torch.optim.AdamW else "aten::_fused_adam_"
    assert tiers(name).get("decomposition") == 3, ft.op_stats()


def test_fused_adam_with_a_grad_scaler_skips_inf_steps():
    torch.manual_seed(4)
    start = torch.randn(6)
    results = []
    for device in ("cpu", DEV):
        p = start.clone().to(device).requires_grad_()
        opt = torch.optim.AdamW([p], lr=1e-2, fused=True)
        scale = torch.tensor(4.0, device=device)
        for found in (0.0, 1.0, 0.0):  # the middle step had an inf: skipped
            p.grad = torch.full((6,), 2.0, device=device) * scale
            opt.step()  # plain step first: state set up
            p.grad = torch.full((6,), 2.0, device=device) * scale
            torch._fused_adamw_(
                [p.detach()],
                [p.grad],
                [opt.state[p]["exp_avg"]],
                [opt.state[p]["exp_avg_sq"]],
                [],
                [opt.state[p]["step"]],
                lr=1e-2,
                beta1=0.9,
                beta2=0.999,
                weight_decay=0.0,
                eps=1e-8,
                amsgrad=False,
                maximize=False,
                grad_scale=scale,
                found_inf=torch.tensor(found, device=device),
            )
        results.append((p.detach().cpu(), p.grad.cpu()))
    torch.testing.assert_close(results[1][0], results[0][0])
    torch.testing.assert_close(results[1][1], results[0][1])  # unscaled in place, as ATen
    assert_no_fallback()
