"""Operators whose output size depends on the data (Note [Data-dependent
output sizes], csrc/dispatch/tiers/decomposition/data_dependent.cpp):
nonzero and masked_select, and what reaches them (argwhere, x[mask],
index_put_ with a mask), compared with CPU on the device they run on, with
op_stats() showing that none of them took the host fallback."""

from __future__ import annotations

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"


def same(on_device, on_cpu):
    assert on_device.device.type == DEV
    torch.testing.assert_close(on_device.cpu(), on_cpu, rtol=0, atol=0, equal_nan=True)


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def no_fallback(overloads):
    import flagos_torchfl as ft

    stats = ft.op_stats()
    for name in overloads:
        assert stats.get(name, {}).get("fallback", 0) == 0, (name, stats.get(name))
        assert stats.get(name, {}).get("decomposition", 0) > 0, (name, stats.get(name))


def sources():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, 6, generator=g)
    x[x.abs() < 0.7] = 0
    x[0, 0, 0] = float("nan")  # NaN is not zero
    x[1, 1, 1] = -0.0  # -0.0 is
    return {
        "float 3-d": x,
        "bool 2-d": torch.rand(7, 9, generator=g) > 0.5,
        "int64 1-d": torch.randint(-2, 3, (1000,), generator=g),
        "uint8 strided": torch.randint(0, 2, (6, 8), generator=g, dtype=torch.uint8).t(),
        "float16": torch.randint(0, 2, (33,), generator=g).to(torch.float16),
        "0-d nonzero": torch.tensor(3.0),
        "0-d zero": torch.tensor(0),
        "empty": torch.zeros(0, 3),
        "all zero": torch.zeros(5, 5),
    }


@pytest.mark.parametrize("name", list(sources()))
def test_nonzero_and_argwhere_are_cpus(name):
    import flagos_torchfl as ft

    x = sources()[name]
    ft.reset_op_stats()
    same(torch.nonzero(x.to(DEV)), torch.nonzero(x))
    same(torch.argwhere(x.to(DEV)), torch.argwhere(x))
    for d, c in zip(
        torch.nonzero(x.to(DEV), as_tuple=True), torch.nonzero(x, as_tuple=True), strict=True
    ):
        same(d, c)
    no_fallback(["aten::nonzero"])


def test_nonzero_out_resizes_its_out():
    x = sources()["float 3-d"]
    out = torch.empty(2, 2, dtype=torch.long, device=DEV)
    torch.nonzero(x.to(DEV), out=out)
    same(out, torch.nonzero(x))


@pytest.mark.parametrize(
    "shapes", [((4, 5), (4, 5)), ((4, 5), (5,)), ((4, 1), (1, 5)), ((3,), (2, 3)), ((0, 2), (2,))]
)
def test_masked_select_broadcasts_as_on_cpu(shapes):
    import flagos_torchfl as ft

    g = torch.Generator().manual_seed(1)
    x = torch.randn(shapes[0], generator=g)
    mask = torch.rand(shapes[1], generator=g) > 0.4
    ft.reset_op_stats()
    same(torch.masked_select(x.to(DEV), mask.to(DEV)), torch.masked_select(x, mask))
    no_fallback(["aten::masked_select"])
    out = torch.empty(1, device=DEV)
    torch.masked_select(x.to(DEV), mask.to(DEV), out=out)
    same(out, torch.masked_select(x, mask))


def test_boolean_mask_indexing_runs_on_the_device():
    import flagos_torchfl as ft

    g = torch.Generator().manual_seed(2)
    x = torch.randn(8, 16, generator=g)
    mask = x[:, 0] > 0
    ft.reset_op_stats()
    same(x.to(DEV)[mask.to(DEV)], x[mask])
    y, y_dev = x.clone(), x.to(DEV)
    y[x > 1] = 0
    y_dev[y_dev > 1] = 0
    same(y_dev, y)
    no_fallback(["aten::nonzero"])


def test_a_mask_that_is_not_bool_is_cpus_error():
    x = torch.randn(3)
    with pytest.raises(RuntimeError) as on_cpu:
        torch.masked_select(x, torch.ones(3, dtype=torch.uint8))
    with pytest.raises(RuntimeError) as on_device:
        torch.masked_select(x.to(DEV), torch.ones(3, dtype=torch.uint8, device=DEV))
    assert str(on_cpu.value).splitlines()[0] in str(on_device.value)


@pytest.mark.parametrize("name", list(sources()))
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique_and_unique_consecutive_are_cpus(name, inverse, counts):
    import flagos_torchfl as ft

    x = sources()[name]
    ft.reset_op_stats()
    for fn in (torch.unique, torch.unique_consecutive):
        got = fn(x.to(DEV), return_inverse=inverse, return_counts=counts)
        want = fn(x, return_inverse=inverse, return_counts=counts)
        for g, w in zip(as_tuple(got), as_tuple(want), strict=True):
            same(g, w)
    no_fallback(["aten::_unique2", "aten::unique_consecutive"])


def test_unique_keeps_the_first_of_equal_zeros_and_each_nan():
    x = torch.tensor([0.0, -0.0, float("nan"), 1.0, float("nan"), -0.0])
    for sorted_ in (False, True):
        got = torch.unique(x.to(DEV), sorted=sorted_, return_counts=True)
        want = torch.unique(x, sorted=sorted_, return_counts=True)
        for g, w in zip(got, want, strict=True):
            same(g, w)
    got = torch.unique_consecutive(x.to(DEV), return_counts=True)
    for g, w in zip(got, torch.unique_consecutive(x, return_counts=True), strict=True):
        same(g, w)


def test_unique_along_a_dim_takes_the_host_tier_with_cpus_result():
    x = torch.tensor([[1, 2], [1, 2], [3, 4]])
    same(torch.unique(x.to(DEV), dim=0), torch.unique(x, dim=0))
    same(torch.unique_consecutive(x.to(DEV), dim=0), torch.unique_consecutive(x, dim=0))
