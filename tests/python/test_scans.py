"""Scans along a dim (Note [Log-step scans], csrc/dispatch/tiers/decomposition/
scan.cpp): cumsum, cumprod, logcumsumexp, cummax and cummin on the device,
compared with CPU over ranks, dims, dtypes, NaN and infinities, out= and
in-place forms and autograd, with op_stats() showing that none of them took
the host fallback."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"


def no_fallback(overloads, called=True):
    """None of @p overloads took the host fallback; each ran as a composite
    when @p called (ATen answers 0-d and empty cummax itself)."""
    import flagos_torchfl as ft

    stats = ft.op_stats()
    for name in overloads:
        assert stats.get(name, {}).get("fallback", 0) == 0, (name, stats.get(name))
        if called:
            assert stats.get(name, {}).get("decomposition", 0) > 0, (name, stats.get(name))


def close(on_device, on_cpu, exact=False):
    assert on_device.device.type == DEV
    if exact:
        torch.testing.assert_close(on_device.cpu(), on_cpu, rtol=0, atol=0, equal_nan=True)
    else:  # sums and products regroup (Note [Log-step scans])
        torch.testing.assert_close(on_device.cpu(), on_cpu, equal_nan=True)


def inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 37, 5, generator=g)
    special = torch.tensor([1.0, float("nan"), 2.0, -math.inf, math.inf, 3.0, math.inf, 0.5])
    return {
        "3-d": (x, [0, 1, -1]),
        "0-d": (torch.tensor(1.5), [0, -1]),
        "empty": (torch.zeros(0, 4), [0, 1]),
        "special": (special, [0]),
        "ties": (torch.tensor([[2.0, 1.0, 2.0, 2.0, 0.0, 2.0]]), [1]),
        "int": (torch.randint(-3, 4, (5, 9), generator=g), [0, 1]),
        "half": (torch.rand(4, 65, generator=g).to(torch.float16) + 0.5, [1]),
        "strided": (x.transpose(0, 2), [0, 2]),
    }


@pytest.mark.parametrize("name", list(inputs()))
def test_cumulative_sums_and_products_are_cpus(name):
    import flagos_torchfl as ft

    x, dims = inputs()[name]
    ft.reset_op_stats()
    for dim in dims:
        close(torch.cumsum(x.to(DEV), dim), torch.cumsum(x, dim))
        close(torch.cumprod(x.to(DEV), dim), torch.cumprod(x, dim))
        if x.is_floating_point():
            close(torch.logcumsumexp(x.to(DEV), dim), torch.logcumsumexp(x, dim))
    no_fallback(["aten::cumsum", "aten::cumprod"])
    if x.is_floating_point():
        no_fallback(["aten::_logcumsumexp"])


@pytest.mark.parametrize("name", list(inputs()))
def test_cummax_and_cummin_are_cpus_to_the_index(name):
    import flagos_torchfl as ft

    x, dims = inputs()[name]
    ft.reset_op_stats()
    for dim in dims:
        for fn in (torch.cummax, torch.cummin):
            values, indices = fn(x.to(DEV), dim)
            want = fn(x, dim)
            close(values, want.values, exact=True)
            close(indices, want.indices, exact=True)
    no_fallback(
        ["aten::_cummax_helper", "aten::_cummin_helper"], called=x.dim() > 0 and x.numel() > 0
    )


def test_out_and_in_place_forms():
    x = torch.randn(6, 7)
    out = torch.empty(0, device=DEV)
    torch.cumprod(x.to(DEV), 1, out=out)
    close(out, torch.cumprod(x, 1))
    y = x.to(DEV)
    y.cumprod_(0)
    close(y, x.clone().cumprod_(0))
    torch.logcumsumexp(x.to(DEV), 0, out=out)
    close(out, torch.logcumsumexp(x, 0))
    values, indices = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.cummax(x.to(DEV), 1, out=(values, indices))
    close(values, torch.cummax(x, 1).values, exact=True)
    close(indices, torch.cummax(x, 1).indices, exact=True)


def test_cumprod_with_a_dtype_and_of_integers():
    x = torch.randint(1, 4, (3, 10))
    close(torch.cumprod(x.to(DEV), 1), torch.cumprod(x, 1), exact=True)
    close(
        torch.cumprod(x.to(DEV), 1, dtype=torch.float64), torch.cumprod(x, 1, dtype=torch.float64)
    )


def test_gradients_flow_through_the_scans():
    x = torch.rand(4, 9, dtype=torch.float64) + 0.5
    for fn in (
        lambda t: torch.cumprod(t, 1),
        lambda t: torch.logcumsumexp(t, 1),
        lambda t: torch.cummax(t, 1).values,
        lambda t: torch.cummin(t, 0).values,
    ):
        a = x.clone().requires_grad_()
        b = x.to(DEV).requires_grad_()
        fn(a).sum().backward()
        fn(b).sum().backward()
        close(b.grad, a.grad)
