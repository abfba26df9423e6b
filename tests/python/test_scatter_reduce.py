"""Scatters that reduce on the device (Note [Scatter reductions as segmented
scans]): scatter_reduce with every reduction, with and without self,
index_reduce and the legacy scatter(reduce=), in place and functional,
float (NaN and infinities), integer types (their extremes) and 0-d
tensors, with many elements meeting in one destination and destinations
nobody reaches; each compared with CPU, and op_stats() must show no host
fallback. Out-of-range indices give CPU's error."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"
REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]
OVERLOADS = (
    "aten::scatter_reduce.two",
    "aten::scatter_reduce_.two",
    "aten::index_reduce",
    "aten::index_reduce_",
    "aten::scatter.reduce",
    "aten::scatter_.reduce",
    "aten::scatter.value_reduce",
)


def same(fn, *args, exact, **kwargs):
    """fn on the device gives CPU's result (exactly for integers and
    amax/amin; sums and means may add in another order); no host fallback."""
    import flagos_torchfl as ft

    ft.reset_op_stats()
    got = fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    want = fn(*args, **kwargs)
    assert got.device.type == DEV and got.dtype == want.dtype
    tol = {"rtol": 0, "atol": 0} if exact else {}
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)
    stats = ft.op_stats()
    fallbacks = {op: stats[op] for op in OVERLOADS if stats.get(op, {}).get("fallback")}
    assert not fallbacks, fallbacks


def operands(dtype, seed, n=40, rows=5, cols=3):
    """src (n, cols) scattered into self (rows, cols) along dim 0: many
    collisions per destination, and row rows-1 never reached."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        src = torch.randn(n, cols, generator=g, dtype=dtype)
        self = torch.randn(rows, cols, generator=g, dtype=dtype)
    else:
        src = torch.randint(-4, 5, (n, cols), generator=g, dtype=dtype)
        self = torch.randint(-4, 5, (rows, cols), generator=g, dtype=dtype)
    index = torch.randint(0, rows - 1, (n, cols), generator=g)
    return self, index, src


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_cpu(dtype, reduce, include_self):
    self, index, src = operands(dtype, seed=1)
    if reduce == "prod" and dtype.is_floating_point:
        src = 1 + src / 10  # products of 40 factors that stay finite
    exact = not dtype.is_floating_point or reduce in ("amax", "amin")
    same(torch.scatter_reduce, self, 0, index, src, reduce, include_self=include_self, exact=exact)
    # along the last dim, through the in-place overload
    same(
        lambda s, i, x: s.clone().scatter_reduce_(1, i, x, reduce, include_self=include_self),
        self.mT.contiguous(),
        index.mT.contiguous()[:, :20],
        src.mT.contiguous(),
        exact=exact,
    )


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_amax_and_amin_propagate_nan_and_meet_infinities(reduce):
    self = torch.tensor([0.0, math.nan, 1.0, 2.0])
    src = torch.tensor([math.inf, -math.inf, 3.0, math.nan, -1.0, 5.0])
    index = torch.tensor([0, 0, 1, 2, 2, 0])
    for include_self in (True, False):
        same(
            torch.scatter_reduce, self, 0, index, src, reduce, include_self=include_self, exact=True
        )


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64])
def test_integer_extremes_survive(dtype):
    info = torch.iinfo(dtype)
    self = torch.tensor([info.max, info.min, 0], dtype=dtype)
    src = torch.tensor([info.min, info.max, info.max, info.min], dtype=dtype)
    index = torch.tensor([0, 1, 2, 2])
    for reduce in ("amax", "amin"):
        for include_self in (True, False):
            same(
                torch.scatter_reduce, self, 0, index, src, reduce, include_self=include_self,
                exact=True,
            )  # fmt: skip


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    g = torch.Generator().manual_seed(2)
    self = torch.randn(4, 6, 2, generator=g)
    source = torch.randn(4, 9, 2, generator=g)
    index = torch.tensor([0, 5, 5, 2, 0, 5, 1, 2, 0])
    exact = reduce in ("amax", "amin")
    same(torch.index_reduce, self, 1, index, source, reduce, include_self=include_self, exact=exact)
    same(
        lambda s, i, x: s.clone().index_reduce_(0, i, x, reduce, include_self=include_self),
        torch.tensor(3.0),
        torch.tensor([0]),
        torch.tensor(-2.0),
        exact=exact,
    )


def test_legacy_scatter_with_reduce():
    self, index, src = operands(torch.float64, seed=3)
    for reduce in ("add", "multiply"):
        same(torch.scatter, self, 0, index, src, reduce=reduce, exact=False)
        same(torch.scatter, self, 0, index, 1.5, reduce=reduce, exact=False)


def test_out_of_range_indices_give_cpus_error():
    self, index, src = operands(torch.float32, seed=4)
    index[3, 1] = 5
    with pytest.raises(RuntimeError) as cpu:
        torch.scatter_reduce(self, 0, index, src, "amax")
    with pytest.raises(RuntimeError) as dev:
        torch.scatter_reduce(self.to(DEV), 0, index.to(DEV), src.to(DEV), "amax")
    assert str(dev.value) == str(cpu.value)
