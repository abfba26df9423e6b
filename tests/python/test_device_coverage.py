"""Operators that left the host fallback (issue 34): generated pointwise
kernels (logaddexp2, xlog1py, entr, angle, round with decimals, zeta,
polygamma) and composites of device operators (var_mean, std_mean, norm,
nansum, aminmax, trace, vdot, linalg_cross, glu, prelu, log_sigmoid, flip
of every dim, padding, 1-D upsampling, nearest-exact upsampling, max unpooling, equal, count_nonzero,
isin, heaviside, median, nanmedian, kthvalue, mode, index_fill, index_copy, take,
conj_physical, put, masked_scatter, complex, polar, searchsorted (a sorter too),
bucketize, histc, nonzero_static, frexp, nextafter, cdist, pdist,
erfcx, log_ndtr, ndtri, multi_margin_loss, multilabel_margin_loss, _batch_norm_with_update,
histogram) and factories whose out= call names the device (eye, linspace, logspace).
Each is compared with CPU at its edge cases (infinities, NaN, signed
zeros, empty and 0-d tensors, integer types, out=, autograd), and
op_stats() must show that the call did not take the host fallback."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"
INF, NAN = math.inf, math.nan


def on_device(fn, *args, **kwargs):
    """fn on the device copies of args (tensors moved, the rest as they are)."""
    moved = [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]
    return fn(*moved, **kwargs)


def same(fn, *args, exact=True, overloads=(), **kwargs):
    """fn on the device gives CPU's result; none of @p overloads fell back."""
    import flagos_torchfl as ft

    ft.reset_op_stats()
    got, want = on_device(fn, *args, **kwargs), fn(*args, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        assert g.device.type == DEV
        tol = {"rtol": 0, "atol": 0} if exact else {}
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, **tol)
        if exact and w.is_floating_point():  # signed zeros too (a NaN's sign means nothing)
            numbers = ~torch.isnan(w)
            assert torch.equal(torch.signbit(g.cpu())[numbers], torch.signbit(w)[numbers])
    stats = ft.op_stats()
    for name in overloads:
        assert stats.get(name, {}).get("fallback", 0) == 0, (name, stats.get(name))


EDGES = torch.tensor([INF, -INF, NAN, 0.0, -0.0, 1.0, -2.5, 1e-30, 3e38, -7.0])


def test_logaddexp2_and_logaddexp_keep_equal_infinities():
    a = torch.tensor([INF, -INF, INF, -INF, 1.0, NAN, 0.0, -3.0])
    b = torch.tensor([INF, -INF, -INF, INF, 2.0, 1.0, 0.0, 40.0])
    same(torch.logaddexp2, a, b, exact=False, overloads=["aten::logaddexp2"])
    same(torch.logaddexp, a, b, exact=False)
    same(torch.logaddexp2, a.double(), b.double(), exact=False)


def test_xlog1py_entr_and_angle_at_their_edges():
    y = EDGES.flip(0)
    same(torch.special.xlog1py, EDGES, y, exact=False, overloads=["aten::special_xlog1py"])
    same(torch.special.entr, EDGES, exact=False, overloads=["aten::special_entr"])
    same(torch.angle, EDGES, overloads=["aten::angle"])
    same(torch.angle, EDGES.double())


@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16], ids=str)
def test_round_with_decimals_is_cpus(decimals, dtype):
    g = torch.Generator().manual_seed(decimals + 10)
    x = (torch.randn(200, generator=g) * 1000).to(dtype)
    x[:4] = torch.tensor([2.5, -0.5, 0.125, 1234.5678]).to(dtype)
    same(torch.round, x, decimals=decimals, overloads=["aten::round.decimals"])


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int64], ids=str)
def test_floating_only_operators_of_integers_are_cpus_error(dtype):
    x = torch.ones(3, dtype=dtype)
    for fn in (
        lambda t: torch.round(t, decimals=1),
        lambda t: torch.logaddexp(t, t),
        lambda t: torch.logaddexp2(t, t),
    ):
        with pytest.raises(NotImplementedError) as on_cpu:
            fn(x)
        with pytest.raises(NotImplementedError) as on_dev:
            fn(x.to(DEV))
        assert str(on_cpu.value).splitlines()[0] in str(on_dev.value)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"dim": 1}, {"dim": (0, 2), "keepdim": True}, {"dim": -1, "correction": 0}],
    ids=str,
)
def test_var_mean_and_std_mean_are_cpus(kwargs):
    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(3))
    for fn in (torch.var_mean, torch.std_mean):
        same(
            fn,
            x,
            exact=False,
            overloads=["aten::var_mean.correction", "aten::std_mean.correction"],
            **kwargs,
        )


def test_norm_nansum_aminmax_and_trace():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(5, 7, generator=g)
    x[1, 2] = NAN
    for p in (None, 1, 2, 3.5, INF, -INF, 0):
        same(
            torch.norm, x.nan_to_num(), p, (1,), exact=False, overloads=["aten::norm.ScalarOpt_dim"]
        )
    same(torch.nansum, x, exact=False, overloads=["aten::nansum"])
    same(torch.nansum, x, dim=1, keepdim=True, exact=False)
    same(torch.nansum, torch.randint(-5, 5, (4, 3), generator=g), dim=0)
    same(torch.nansum, x, dim=0, dtype=torch.float64, exact=False)
    for kwargs in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"keepdim": True}):
        same(torch.aminmax, x, overloads=["aten::aminmax"], **kwargs)
    same(torch.aminmax, torch.randint(-9, 9, (6, 2), generator=g), dim=1)
    same(torch.aminmax, torch.tensor(2.5))
    same(torch.trace, x.nan_to_num(), exact=False, overloads=["aten::trace"])
    same(torch.trace, torch.randint(-9, 9, (3, 5), generator=g))


def test_aminmax_of_an_empty_tensor_is_cpus_error():
    with pytest.raises(RuntimeError) as on_cpu:
        torch.aminmax(torch.zeros(0))
    with pytest.raises(RuntimeError) as on_dev:
        torch.aminmax(torch.zeros(0, device=DEV))
    assert str(on_cpu.value).splitlines()[0] in str(on_dev.value)


def test_vdot_and_linalg_cross():
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(9, generator=g), torch.randn(9, generator=g)
    same(torch.vdot, a, b, exact=False, overloads=["aten::vdot"])
    u, v = torch.randn(4, 3, 2, generator=g), torch.randn(1, 3, 2, generator=g)
    same(torch.linalg.cross, u, v, dim=1, exact=False, overloads=["aten::linalg_cross"])
    same(torch.linalg.cross, u.transpose(1, 2), v.transpose(1, 2), exact=False)
    ints = torch.randint(-4, 4, (5, 3), generator=g)
    same(torch.linalg.cross, ints, ints.flip(0))


def test_activations_and_their_gradients():
    import flagos_torchfl as ft

    g = torch.Generator().manual_seed(6)
    x = torch.randn(6, 8, generator=g, dtype=torch.float64)
    x[0, :3] = torch.tensor([INF, -INF, 0.0], dtype=torch.float64)
    weight = torch.rand(8, generator=g, dtype=torch.float64)
    cases = [
        (lambda t: torch.nn.functional.glu(t, 1), ["aten::glu"]),
        (lambda t: torch.nn.functional.glu(t, 0), ["aten::glu"]),
        (lambda t: torch.nn.functional.prelu(t, weight.to(t.device)), ["aten::_prelu_kernel"]),
        (torch.nn.functional.logsigmoid, ["aten::log_sigmoid_forward"]),
    ]
    for fn, overloads in cases:
        same(fn, x, exact=False, overloads=overloads)
        a = x.clone().nan_to_num(posinf=3.0, neginf=-3.0).requires_grad_()
        b = a.detach().to(DEV).requires_grad_()
        ft.reset_op_stats()
        fn(b).sum().backward()
        fn(a).sum().backward()
        torch.testing.assert_close(b.grad.cpu(), a.grad)
        assert ft.op_stats().get(overloads[0], {}).get("fallback", 0) == 0


def test_glu_of_an_odd_size_is_cpus_error():
    with pytest.raises(RuntimeError) as on_cpu:
        torch.nn.functional.glu(torch.zeros(3, 5), 1)
    with pytest.raises(RuntimeError) as on_dev:
        torch.nn.functional.glu(torch.zeros(3, 5, device=DEV), 1)
    assert str(on_cpu.value).splitlines()[0] in str(on_dev.value)


@pytest.mark.parametrize("dims", [(0, 1, 2), (), (2, 0, 1), (0,), (-1, 1)], ids=str)
def test_flip_of_every_dim_and_of_none(dims):
    x = torch.arange(60.0).view(3, 4, 5)
    same(torch.flip, x, dims, overloads=["aten::flip"])
    same(torch.flip, x.transpose(0, 2), dims)
    same(torch.flip, torch.arange(7), (0,))
    same(torch.flip, torch.tensor(3.0), ())


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize(
    "shape, pad",
    [
        ((2, 3, 9), (2, 3)),
        ((3, 9), (1, 0)),
        ((0, 3, 5), (1, 2)),
        ((2, 2, 6, 7), (1, 2, 3, 0)),
        ((2, 2, 6, 7), (-1, 2, 0, -2)),
        ((1, 2, 4, 5, 6), (1, 1, 2, 0, 3, 2)),
    ],
    ids=str,
)
def test_reflection_and_replication_padding_and_their_gradients(mode, shape, pad):
    import flagos_torchfl as ft

    x = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    same(torch.nn.functional.pad, x, pad, mode=mode)
    if x.numel() == 0:
        return
    a = x.clone().requires_grad_()
    b = x.to(DEV).requires_grad_()
    weight = torch.randn(torch.nn.functional.pad(x, pad, mode=mode).shape, dtype=torch.float64)
    ft.reset_op_stats()
    (torch.nn.functional.pad(b, pad, mode=mode) * weight.to(DEV)).sum().backward()
    (torch.nn.functional.pad(a, pad, mode=mode) * weight).sum().backward()
    torch.testing.assert_close(b.grad.cpu(), a.grad)
    assert not [k for k, v in ft.op_stats().items() if "pad" in k and v.get("fallback")]


def test_padding_errors_are_cpus():
    for mode, shape, pad in (("reflect", (1, 2, 3), (3, 0)), ("replicate", (1, 2, 3), (-2, -2))):
        with pytest.raises(RuntimeError) as on_cpu:
            torch.nn.functional.pad(torch.zeros(shape), pad, mode=mode)
        with pytest.raises(RuntimeError) as on_dev:
            torch.nn.functional.pad(torch.zeros(shape, device=DEV), pad, mode=mode)
        assert str(on_cpu.value).splitlines()[0] in str(on_dev.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 17, "mode": "nearest"},
        {"scale_factor": 2.5, "mode": "nearest"},
        {"size": 4, "mode": "nearest"},
        {"size": 17, "mode": "linear", "align_corners": False},
        {"size": 17, "mode": "linear", "align_corners": True},
        {"scale_factor": 0.6, "mode": "linear"},
    ],
    ids=str,
)
def test_one_dimensional_upsampling_and_its_gradient(kwargs):
    import flagos_torchfl as ft

    x = torch.randn(2, 3, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    same(torch.nn.functional.interpolate, x, exact=False, **kwargs)
    a, b = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    ft.reset_op_stats()
    torch.nn.functional.interpolate(b, **kwargs).pow(2).sum().backward()
    torch.nn.functional.interpolate(a, **kwargs).pow(2).sum().backward()
    torch.testing.assert_close(b.grad.cpu(), a.grad)
    assert not [k for k, v in ft.op_stats().items() if "upsample" in k and v.get("fallback")]


@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ((2, 3, 7), {"size": 12}),
        ((2, 3, 7), {"size": 4}),
        ((1, 2, 5), {"scale_factor": 1.7}),
        ((1, 1, 3), {"scale_factor": 3.0000001}),  # 1 / scale, rounded as CPU's float
        ((2, 1, 5, 6), {"size": (9, 4)}),
        ((1, 2, 4, 5), {"scale_factor": (2.3, 0.7)}),
        ((1, 1, 3, 4, 5), {"size": (5, 7, 2)}),
    ],
)
def test_nearest_exact_upsampling_and_its_gradient(shape, kwargs):
    """CPU's source index min(floorf((i + 0.5f) * scale), n - 1), each spatial
    dim an index_select; the gradient an index_add over the same sources."""
    import flagos_torchfl as ft
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.randn(shape, requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    ft.reset_op_stats()
    y = F.interpolate(x, mode="nearest-exact", **kwargs)
    yd = F.interpolate(xd, mode="nearest-exact", **kwargs)
    g = torch.randn_like(y)
    y.backward(g)
    yd.backward(g.to(DEV))
    assert torch.equal(yd.detach().cpu(), y)
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
    name = f"aten::_upsample_nearest_exact{len(shape) - 2}d"
    stats = ft.op_stats()
    for op in (name, name + "_backward"):
        assert stats[op].get("decomposition", 0) >= 1 and "fallback" not in stats[op], stats[op]


@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_max_unpool_puts_the_values_back_where_max_pool_found_them(spatial):
    g = torch.Generator().manual_seed(9)
    pool = getattr(torch.nn.functional, f"max_pool{spatial}d")
    unpool = getattr(torch.nn.functional, f"max_unpool{spatial}d")
    x = torch.randn((2, 3) + (8,) * spatial, generator=g)
    values, indices = pool(x, 2, stride=2, return_indices=True)
    same(unpool, values, indices, 2, stride=2)
    overlapping, where = pool(x, 3, stride=2, return_indices=True)
    same(unpool, overlapping, where, 3, stride=2, output_size=x.shape[2:])


def test_max_unpool_of_an_index_outside_the_output_is_cpus_error():
    values = torch.ones(1, 1, 2, 2)
    indices = torch.tensor([[[[0, 1], [2, 99]]]])
    with pytest.raises(RuntimeError) as on_cpu:
        torch.nn.functional.max_unpool2d(values, indices, 2)
    with pytest.raises(RuntimeError) as on_dev:
        torch.nn.functional.max_unpool2d(values.to(DEV), indices.to(DEV), 2)
    assert str(on_cpu.value).splitlines()[0] in str(on_dev.value)


def zeta_points(dtype):
    """(s, q) over zeta's domain: s near 1 and large, q small, large, negative
    (whole: poles; fractional with whole and fractional s), and NaN."""
    s = torch.tensor(
        [1.0, 1.0001, 1.5, 2.0, 3.0, 4.5, 7.0, 12.0, 30.0, 0.5, -2.0, 2.0, 3.0, 2.5, NAN]
    )
    q = torch.tensor(
        [1.0, 2.0, 0.1, 1e-3, 5.0, 0.75, 30.0, 1.0, 2.0, 1.0, 1.0, -3.0, -2.5, -2.5, 1.0]
    )
    g = torch.Generator().manual_seed(11)
    s = torch.cat([s, 1 + torch.rand(200, generator=g) * 20])
    q = torch.cat([q, torch.rand(200, generator=g) * 50 + 1e-3])
    return s.to(dtype), q.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_zeta_over_its_domain_is_cpus(dtype):
    s, q = zeta_points(dtype)
    # float64: Euler-Maclaurin and CPU's series agree to a few ulp; float32
    # computes in double as CPU does.
    tol = {"rtol": 1e-12, "atol": 0} if dtype == torch.float64 else {"rtol": 1e-6, "atol": 0}
    import flagos_torchfl as ft

    ft.reset_op_stats()
    got = torch.special.zeta(s.to(DEV), q.to(DEV)).cpu()
    torch.testing.assert_close(got, torch.special.zeta(s, q), equal_nan=True, **tol)
    assert ft.op_stats().get("aten::special_zeta", {}).get("fallback", 0) == 0


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_polygamma_over_its_domain_is_cpus(n, dtype):
    import flagos_torchfl as ft

    g = torch.Generator().manual_seed(n)
    x = torch.cat(
        [
            torch.tensor(
                [1.0, 0.5, 1e-3, 2.0, 10.0, 100.0, 1e4, -0.5, -1.5, -2.25, -3.0, 0.0, NAN]
            ),
            torch.rand(300, generator=g) * 40 - 10,
        ]
    ).to(dtype)
    tol = {"rtol": 1e-10, "atol": 0} if dtype == torch.float64 else {"rtol": 2e-5, "atol": 1e-6}
    ft.reset_op_stats()
    torch.testing.assert_close(
        torch.polygamma(n, x.to(DEV)).cpu(), torch.polygamma(n, x), equal_nan=True, **tol
    )
    assert ft.op_stats().get("aten::polygamma", {}).get("fallback", 0) == 0


def test_polygamma_of_a_negative_order_is_cpus_error():
    with pytest.raises(RuntimeError) as on_cpu:
        torch.polygamma(-1, torch.ones(2))
    with pytest.raises(RuntimeError) as on_dev:
        torch.polygamma(-1, torch.ones(2, device=DEV))
    assert str(on_cpu.value).splitlines()[0] in str(on_dev.value)


def test_factories_of_out_calls_on_the_device():
    import flagos_torchfl as ft

    ft.reset_op_stats()
    cases = [
        lambda d: torch.eye(3, 5, device=d),
        lambda d: torch.eye(4, device=d, dtype=torch.int32),
        lambda d: torch.eye(0, 2, device=d),
        lambda d: torch.linspace(-2.5, 7.25, 11, device=d),
        lambda d: torch.linspace(-3.7, 9.2, 6, device=d, dtype=torch.int64),  # ends truncated
        lambda d: torch.linspace(3, 9, 1, device=d),
        lambda d: torch.linspace(3, 9, 0, device=d),
        lambda d: torch.linspace(1, -1, 8, device=d, dtype=torch.float64),
        lambda d: torch.logspace(-2, 3, 9, base=2.0, device=d),
        lambda d: torch.logspace(-2, 3, 9, device=d, dtype=torch.float64),
    ]
    for case in cases:
        got, want = case(DEV), case("cpu")
        assert got.device.type == DEV
        # CPU's vectorized loop adds i * step to each vector's first point:
        # its float32 rounding differs from start + i * step in the last bits
        # (up to an ulp of the ends where the terms cancel).
        torch.testing.assert_close(got.cpu(), want, rtol=1.3e-6, atol=1e-6)
    stats = ft.op_stats()
    for name in ("aten::eye.m_out", "aten::linspace.out", "aten::logspace.out"):
        assert stats.get(name, {}).get("fallback", 0) == 0, (name, stats.get(name))
        assert stats.get(name, {}).get("decomposition", 0) > 0, (name, stats.get(name))
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.linspace(0, 1, -1, device=DEV)


def test_equal_count_nonzero_isin_and_heaviside():
    x = torch.tensor([[1.0, NAN, 0.0], [-0.0, 2.0, INF]])
    assert on_device(torch.equal, x, x.clone()) is torch.equal(x, x.clone())  # NaN: unequal
    i = torch.tensor([[3, 0, -1], [0, 0, 7]])
    assert on_device(torch.equal, i, i.clone()) is True
    assert on_device(torch.equal, i, i[:1]) is False
    assert on_device(torch.equal, i, i + 1) is False
    same(torch.count_nonzero, x, dim=1, overloads=["aten::count_nonzero.dim_IntList"])
    same(torch.count_nonzero, i, dim=(0, 1))
    same(torch.isin, i, torch.tensor([0, 7, 9]), overloads=["aten::isin.Tensor_Tensor"])
    same(torch.isin, i, torch.tensor([0, 7, 9]), invert=True)
    same(torch.isin, i, torch.tensor([], dtype=torch.long))
    values = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    same(torch.heaviside, x.reshape(-1), values, overloads=["aten::heaviside"])
    same(torch.heaviside, i.reshape(-1), torch.full((6,), 9))
    for a, b in ((x, i.double()), (x, x.to(torch.complex64))):
        with pytest.raises(RuntimeError) as cpu_error:
            torch.heaviside(a, b)
        with pytest.raises(RuntimeError, match=str(cpu_error.value).split(".")[0]):
            on_device(torch.heaviside, a, b)


def test_median_nanmedian_and_kthvalue_pick_cpus_element():
    torch.manual_seed(0)
    x = torch.randn(5, 7)
    x[1, 2] = NAN  # median: the row's first NaN; nanmedian: the others' median
    x[4, 0] = x[4, 6] = NAN
    names = ["aten::median", "aten::nanmedian", "aten::median.dim", "aten::nanmedian.dim"]
    same(torch.median, x, overloads=names[:1])
    same(torch.median, x[0], overloads=names[:1])
    same(torch.nanmedian, x, overloads=names[1:2])
    same(torch.median, x, dim=1, overloads=names[2:3])
    same(torch.median, x, dim=0, keepdim=True)
    same(torch.nanmedian, x, dim=1, overloads=names[3:])
    same(torch.median, torch.randint(-5, 5, (4, 6)), dim=-1)
    same(torch.median, torch.tensor(2.5), dim=0)
    same(torch.kthvalue, x[:, :6].nan_to_num(), 2, dim=1, overloads=["aten::kthvalue"])
    same(torch.kthvalue, torch.tensor(-1.5), 1)
    with pytest.raises(RuntimeError, match="selected number k out of range"):
        on_device(torch.kthvalue, x, 8, 1)
    with pytest.raises((RuntimeError, IndexError)):
        on_device(torch.median, torch.empty(0, 3), 0)


def test_mode_picks_cpus_value_and_index():
    """Note [The mode from runs of a sorted row]: the smallest of the most
    frequent values, and the last index of it (rows short enough that CPU's
    sort keeps equal values in order)."""
    torch.manual_seed(0)
    names = ["aten::mode"]
    x = torch.randint(-2, 3, (6, 9))
    same(torch.mode, x, 1, overloads=names)
    same(torch.mode, x, 0, keepdim=True, overloads=names)
    same(torch.mode, x.float().t(), -1, overloads=names)  # strided rows
    same(torch.mode, x.to(torch.int8), overloads=names)
    same(torch.mode, torch.tensor([[3.0, 1.0, 3.0, 1.0, -0.0, 0.0, 2.0]]), 1, overloads=names)
    same(torch.mode, torch.tensor([INF, -INF, INF, 5.0]).double(), 0, overloads=names)
    same(torch.mode, torch.tensor(4.5), 0, overloads=names)  # 0-d: itself, index 0
    same(torch.mode, torch.randn(3, 1), 1, overloads=names)  # rows of one
    # NaN has no rank: CPU's walk sees each NaN as a run of one (host tier).
    same(torch.mode, torch.tensor([[NAN, 1.0, NAN, 2.0, 2.0]]), 1)
    with pytest.raises((RuntimeError, IndexError)):
        on_device(torch.mode, torch.randn(2, 3), 2)


def test_index_fill_index_copy_and_take():
    torch.manual_seed(0)
    x = torch.randn(5, 7)
    index = torch.tensor([0, -1, 3])
    same(torch.index_fill, x, 1, index, 2.5, overloads=["aten::index_fill_.int_Scalar"])
    same(torch.index_fill, x, 0, torch.tensor([2]), torch.tensor(-1.0))
    same(torch.index_fill, torch.tensor(4.0), 0, torch.tensor([0]), 1.0)  # 0-d self
    same(
        torch.index_copy,
        x,
        1,
        torch.tensor([4, 0]),
        torch.ones(5, 2),
        overloads=["aten::index_copy"],
    )
    same(torch.index_copy, torch.tensor(4.0), 0, torch.tensor([0]), torch.tensor(-2.0))
    y = x.to(DEV)
    y.index_copy_(0, torch.tensor([1], device=DEV), torch.zeros(1, 7, device=DEV))
    assert torch.equal(y.cpu(), x.index_copy(0, torch.tensor([1]), torch.zeros(1, 7)))
    same(torch.take, x, torch.tensor([[0, -1], [7, 34]]), overloads=["aten::take"])
    same(torch.take, x, torch.tensor([], dtype=torch.long))
    for bad in (
        lambda d: torch.take(x.to(d), torch.tensor([35], device=d)),
        lambda d: x.to(d).index_fill(1, torch.tensor([7], device=d), 0.0),
        lambda d: x.to(d).index_copy(1, torch.tensor([-1], device=d), torch.ones(5, 1, device=d)),
    ):
        with pytest.raises((RuntimeError, IndexError)) as cpu_error:
            bad("cpu")
        with pytest.raises(type(cpu_error.value)):
            bad(DEV)


POLYNOMIALS = [
    f"{kind}_polynomial_{letter}"
    for kind, letters in (("chebyshev", "tuvw"), ("shifted_chebyshev", "tuvw"))
    for letter in letters
] + [
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
]


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_orthogonal_polynomials_over_x_and_degree(name, dtype):
    """x across [-1.5, 1.5] with the closed points (+-1, 0, 1/2) and NaN/inf;
    degrees negative, fractional, small, past the trigonometric thresholds,
    past Hermite's limit, NaN and inf. Above its threshold a Chebyshev value
    is cos(n acos(y)): one ulp of acos moves it by about n ulps of the angle,
    so float32 at n >= 150 is held to a bound that grows with n (a device's
    acos may round otherwise than CPU's); every other point to 1e-5."""
    import flagos_torchfl as ft

    fn = getattr(torch.special, name)
    x = torch.cat([torch.linspace(-1.5, 1.5, 61), torch.tensor([1.0, -1.0, 0.0, 0.5, NAN, INF])])
    n = torch.tensor([-2.0, -0.5, 0, 1, 2, 3, 5, 7, 9, 12, 20, 150, 600, NAN, INF])
    xs, ns = (t.to(dtype) for t in torch.meshgrid(x, n, indexing="ij"))
    ft.reset_op_stats()
    got = on_device(fn, xs, ns).cpu()
    assert ft.op_stats().get(f"aten::special_{name}", {}).get("fallback", 0) == 0
    want = fn(xs, ns)
    far = (
        (ns >= 150) & (xs.abs() < 1.5)
        if dtype == torch.float32
        else torch.zeros_like(xs, dtype=torch.bool)
    )
    torch.testing.assert_close(got[~far], want[~far], equal_nan=True, rtol=1e-4, atol=1e-5)
    # n ulps of an angle near pi (2.4e-7 each), with a factor 4 of margin
    # and the value's own size for the kinds that grow like n.
    bound = 1e-6 * ns[far] * (1 + want[far].abs())
    error = (got[far] - want[far]).abs()
    assert bool(((error <= bound) | (got[far].isnan() & want[far].isnan())).all()), error.max()
    # An integer degree tensor promotes as on CPU.
    same(fn, x[:8], torch.arange(8), exact=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_orthogonal_polynomials_of_16_bit_floats_are_cpus_error(dtype):
    x, n = torch.tensor([0.5, 0.25], dtype=dtype), torch.tensor([3.0, 2.0], dtype=dtype)
    with pytest.raises(NotImplementedError, match="chebyshev_polynomial_t_cpu"):
        torch.special.chebyshev_polynomial_t(x, n)
    with pytest.raises(NotImplementedError, match="chebyshev_polynomial_t_cpu"):
        on_device(torch.special.chebyshev_polynomial_t, x, n)


BESSEL = [
    "special.i0e",
    "special.i1",
    "special.i1e",
    "special.modified_bessel_i0",
    "special.modified_bessel_i1",
    "special.spherical_bessel_j0",
]


@pytest.mark.parametrize("name", BESSEL)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_bessel_functions_across_their_range(name, dtype):
    """x from -100 to 100 with the series/asymptotic switch at 20, signed
    zeros, tiny x, the float and double overflow points (88.7, 710: CPU's
    exp(x) * series overflows there, and so must the device's) and +-inf/NaN.
    16-bit floats are computed in float and rounded once, as on CPU; a
    subnormal half exactly between two neighbours may round to either (CPU's
    float result lies an ulp above the tie), hence one subnormal ulp."""
    import flagos_torchfl as ft

    fn = getattr(torch.special, name.split(".")[1])
    x = torch.cat(
        [
            torch.linspace(-100, 100, 2001),
            torch.tensor([0.0, -0.0, INF, -INF, NAN, 19.999, 20.0, 20.001, 1e-6]),
            torch.tensor([88.7, 89.5, 700.0, 710.0, -710.0, 0.3, -0.49, 0.5]),
        ]
    ).to(dtype)
    try:
        want = fn(x)
    except NotImplementedError as cpu_error:  # modified_bessel_*, spherical_bessel_j0 of half
        with pytest.raises(NotImplementedError, match=str(cpu_error).split(" ")[0]):
            on_device(fn, x)
        return
    ft.reset_op_stats()
    got = on_device(fn, x).cpu()
    aten = "aten::special_" + name.split(".")[1]
    assert ft.op_stats().get(aten, {}).get("fallback", 0) == 0, ft.op_stats().get(aten)
    tol = {torch.float32: (1e-5, 0), torch.float64: (1e-12, 0), torch.float16: (1e-3, 6e-8)}
    rtol, atol = tol[dtype]
    torch.testing.assert_close(got, want, equal_nan=True, rtol=rtol, atol=atol)
    numbers = ~want.isnan()
    assert torch.equal(torch.signbit(got)[numbers], torch.signbit(want)[numbers])


@pytest.mark.parametrize(
    "args", [(2, 1, 0.5), (2, -1, 0.5), (1, 2, 3.0), (INF, 2, 0.5), (3, 0, 100.0)]
)
def test_renorm_and_its_gradient(args):
    torch.manual_seed(0)
    x = torch.randn(5, 5, 5)
    same(torch.renorm, x, *args, exact=False, overloads=["aten::renorm"])
    xg, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    torch.renorm(xg, *args).pow(2).sum().backward()
    torch.renorm(xd, *args).pow(2).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xg.grad, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="non-positive-norm not supported"):
        on_device(torch.renorm, x, -1, 0, 1.0)


@pytest.mark.parametrize(
    "shape, groups, channels_last",
    [
        ((1, 4, 10, 10), 2, False),
        ((2, 6, 8, 8), 3, False),
        ((2, 8, 5, 5), 4, True),
        ((2, 6, 7), 3, False),
    ],
)
def test_channel_shuffle_keeps_cpus_values_and_memory_format(shape, groups, channels_last):
    x = torch.randn(shape)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    shuffle = torch.nn.functional.channel_shuffle
    same(shuffle, x, groups, overloads=["aten::channel_shuffle"])
    assert on_device(shuffle, x, groups).stride() == shuffle(x, groups).stride()
    with pytest.raises(RuntimeError, match="divisible by groups"):
        on_device(shuffle, x, 5)


def test_conj_physical_of_complex_and_real_tensors():
    g = torch.Generator().manual_seed(7)
    z = torch.complex(torch.randn(3, 5, generator=g), torch.tensor([0.0, -0.0, INF, NAN, 1.0]))
    over = ["aten::conj_physical.out", "aten::conj_physical_"]
    same(torch.conj_physical, z, overloads=over)
    same(torch.conj_physical, z.conj(), overloads=over)
    same(torch.conj_physical, z.t(), overloads=over)
    same(torch.conj_physical, z.to(torch.complex128)[:, ::2], overloads=over)
    same(lambda t: t.clone().conj_physical_(), z, overloads=over)
    same(torch.conj_physical, torch.tensor([1.5, -0.0]), overloads=over)
    same(lambda t: torch.conj_physical(t, out=torch.empty_like(t)), z, overloads=over)


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_with_negative_indices_and_strided_self(accumulate):
    g = torch.Generator().manual_seed(8)
    x = torch.randn(4, 5, generator=g)
    index = torch.tensor([[0, -1], [7, 3]])
    source = torch.randn(2, 2, generator=g)
    over = ["aten::put_"]
    same(lambda t, i, s: t.clone().put_(i, s, accumulate), x, index, source, overloads=over)
    same(lambda t, i, s: torch.put(t.t(), i, s, accumulate), x, index, source, overloads=over)
    same(lambda t, i, s: torch.put(t, i, s), x, index[:0], source[:0], overloads=over)
    ints = torch.arange(6).reshape(2, 3)
    same(
        lambda t, i, s: torch.put(t, i, s, accumulate),
        ints,
        torch.tensor([5, 5]),
        torch.tensor([1, 2]),
        overloads=over if accumulate else (),
    )  # duplicates: only summed


def test_put_errors_are_cpus():
    x = torch.zeros(3)
    for index, source in [
        (torch.tensor([3]), torch.ones(1)),
        (torch.tensor([0, 1]), torch.ones(3)),
    ]:
        with pytest.raises((RuntimeError, IndexError)) as cpu_error:
            x.clone().put_(index, source)
        with pytest.raises(type(cpu_error.value)) as device_error:
            x.to(DEV).put_(index.to(DEV), source.to(DEV))
        assert str(device_error.value) == str(cpu_error.value)


def test_masked_scatter_with_broadcast_masks():
    g = torch.Generator().manual_seed(9)
    x = torch.randn(4, 5, generator=g)
    source = torch.randn(30, generator=g)
    over = ["aten::masked_scatter_"]
    for mask in [
        torch.rand(4, 5, generator=g) > 0.5,
        torch.tensor([True, False, True, True, False]),
        torch.zeros(4, 5, dtype=torch.bool),
        torch.ones(4, 1, dtype=torch.bool),
    ]:
        same(torch.masked_scatter, x, mask, source, overloads=over)
        transposed = mask.t() if mask.dim() == 2 else mask[:4]
        same(
            lambda t, m, s: t.clone().masked_scatter_(m, s),
            x.t(),
            transposed,
            source,
            overloads=over,
        )
    with pytest.raises(RuntimeError) as cpu_error:
        x.masked_scatter(torch.ones(4, 5, dtype=torch.bool), torch.randn(2))
    with pytest.raises(RuntimeError) as device_error:
        x.to(DEV).masked_scatter(
            torch.ones(4, 5, dtype=torch.bool, device=DEV), torch.randn(2).to(DEV)
        )
    assert str(device_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_complex_and_polar_from_parts(dtype):
    g = torch.Generator().manual_seed(10)
    a = torch.randn(3, 4, generator=g, dtype=dtype)
    b = torch.tensor([0.0, -0.0, INF, NAN], dtype=dtype)
    same(torch.complex, a, b, overloads=["aten::complex.out"])
    same(torch.complex, a.t(), a[0:1].t(), overloads=["aten::complex.out"])
    # polar's sin/cos: CPU's libm and the device's may differ in the last bit.
    same(torch.polar, a.abs(), a, exact=False, overloads=["aten::polar.out"])
    same(
        lambda m, t: torch.polar(
            m,
            t,
            out=torch.empty(
                3,
                4,
                dtype=torch.complex64 if dtype == torch.float32 else torch.complex128,
                device=m.device,
            ),
        ),
        a.abs(),
        a,
        exact=False,
        overloads=["aten::polar.out"],
    )
    with pytest.raises(RuntimeError) as cpu_error:
        torch.complex(a, a.to(torch.float16))
    with pytest.raises(RuntimeError) as device_error:
        torch.complex(a.to(DEV), a.to(torch.float16).to(DEV))
    assert str(device_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=str)
def test_searchsorted_and_bucketize_count_as_the_binary_search_ends(dtype):
    """Note [Search by counting]: ties, both sides, NaN values, 1-D and
    batched rows, int32 results, out=; a sorter and a row with NaN take the
    host tier and still answer as CPU."""
    g = torch.Generator().manual_seed(11)
    seq = torch.sort(torch.randint(0, 10, (3, 8), generator=g)).values.to(dtype)
    values = torch.randint(-1, 11, (3, 5), generator=g).to(dtype)
    if dtype.is_floating_point:
        values[0, 0], values[1, 2] = NAN, INF
    over = ["aten::searchsorted.Tensor", "aten::bucketize.Tensor"]
    for kwargs in [{}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}]:
        same(lambda s, v, kw=kwargs: torch.searchsorted(s, v, **kw), seq, values, overloads=over)
        same(lambda s, v, kw=kwargs: torch.searchsorted(s, v, **kw), seq[1], values, overloads=over)
    for right in (False, True):
        same(lambda x, b, r=right: torch.bucketize(x, b, right=r), values, seq[0], overloads=over)
    same(
        lambda s, v: torch.searchsorted(
            s, v, out=torch.empty(0, dtype=torch.long, device=s.device)
        ),
        seq,
        values,
        overloads=["aten::searchsorted.Tensor_out"],
    )
    sorter = torch.argsort(seq.flip(-1), dim=-1)
    same(lambda s, v, o: torch.searchsorted(s, v, sorter=o), seq.flip(-1), values, sorter)
    if dtype.is_floating_point:
        with_nan = seq.clone()
        with_nan[:, -1] = NAN
        same(torch.searchsorted, with_nan, values)


def test_searchsorted_errors_are_cpus():
    seq, values = torch.arange(6.0).reshape(2, 3), torch.zeros(3, 2)
    for kwargs in [{}, {"right": True, "side": "left"}]:
        with pytest.raises(RuntimeError) as cpu_error:
            torch.searchsorted(seq, values, **kwargs)
        with pytest.raises(RuntimeError) as device_error:
            torch.searchsorted(seq.to(DEV), values.to(DEV), **kwargs)
        assert str(device_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_histc_bins_as_cpu(dtype):
    """Edges kept in the input's dtype, the maximum in the last bin, NaN and
    outliers nowhere, the data's range when min == max (widened by 1 for a
    constant input), out=; a range that is not finite is CPU's error."""
    g = torch.Generator().manual_seed(12)
    x = torch.randn(1000, generator=g, dtype=dtype)
    x[5] = 3.0
    with_nan = x.clone()
    with_nan[3] = NAN
    over = ["aten::histc", "aten::histc.out"]
    for t, args in [(x, (10,)), (with_nan, (7, -1, 1)), (x, (5, 0, 3)), (x, (4, 2, 2)),
                    (with_nan, (9, -2.5, 3)), (torch.full((5,), 2.0, dtype=dtype), (4,)),
                    (x[:0], (3,))]:  # fmt: skip
        same(lambda v, a=args: torch.histc(v, *a), t, overloads=over)
    same(lambda v: torch.histc(v, 6, out=torch.empty(0, dtype=dtype, device=v.device)), x,
         overloads=over)  # fmt: skip
    with pytest.raises(RuntimeError) as cpu_error:
        torch.histc(with_nan, 4)
    with pytest.raises(RuntimeError) as device_error:
        torch.histc(with_nan.to(DEV), 4)
    assert str(device_error.value) == str(cpu_error.value)


def test_nonzero_static_cuts_or_pads():
    z = torch.tensor([[0, 1, 0], [2, 0, 3]])
    for size in (0, 2, 3, 5):
        same(lambda t, s=size: torch.nonzero_static(t, size=s, fill_value=-7), z,
             overloads=["aten::nonzero_static"])  # fmt: skip
    same(lambda t: torch.nonzero_static(t, size=4), torch.zeros(3, dtype=torch.bool),
         overloads=["aten::nonzero_static"])  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_frexp_at_zeros_infinities_subnormals_and_powers_of_two(dtype):
    info = torch.finfo(dtype)
    tiny = info.smallest_normal
    x = torch.tensor(
        [
            0.0,
            -0.0,
            INF,
            -INF,
            NAN,
            1.0,
            -1.0,
            0.5,
            2.0,
            3.0,
            -0.75,
            1e-3,
            7e20,
            info.max,
            tiny,
            tiny / 8,
            -tiny / 1024,
            1 - info.eps / 2,
            2 - info.eps,
        ],  # fmt: skip
        dtype=dtype,
    )
    same(torch.frexp, x, overloads=["aten::frexp.Tensor_out", "aten::frexp.Tensor"])
    same(torch.frexp, x.reshape(1, -1)[:, ::2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_nextafter_steps_one_bit_toward_the_target(dtype):
    info = torch.finfo(dtype)
    x = torch.tensor([0.0, -0.0, 0.0, 1.0, 1.0, -1.0, 2.0, NAN, 1.0, INF, info.max, -info.max,
                      info.smallest_normal, 3.0], dtype=dtype)  # fmt: skip
    y = torch.tensor([1.0, -1.0, -0.0, 2.0, 0.0, -2.0, 2.0, 1.0, NAN, 0.0, INF, 0.0, 0.0, -INF],
                     dtype=dtype)  # fmt: skip
    same(torch.nextafter, x, y, overloads=["aten::nextafter"])
    same(torch.nextafter, x.reshape(-1, 1), y[:3])  # broadcast
    same(lambda a, b: a.clone().nextafter_(b), x, y)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, INF])
@pytest.mark.parametrize("mode", [None, "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
def test_cdist_every_norm_and_compute_mode(p, mode):
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(2, 30, 5, generator=g, dtype=torch.float64)  # > 25 rows: CPU's mm form
    x2 = torch.randn(1, 4, 5, generator=g, dtype=torch.float64)  # batch broadcast
    x2[0, 1] = x1[1, 3]  # a zero distance
    kwargs = {"compute_mode": mode} if mode else {}
    same(torch.cdist, x1, x2, p=p, exact=False, overloads=["aten::_cdist_forward"], **kwargs)
    same(torch.cdist, x1[0, :3].float(), x2[0].float(), p=p, exact=False, **kwargs)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 1.5, INF])
def test_pdist_of_row_pairs(p):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 3, generator=g)
    x[4] = x[1]
    same(torch.nn.functional.pdist, x, p=p, exact=False, overloads=["aten::_pdist_forward"])
    same(torch.nn.functional.pdist, x[:1], p=p, exact=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_erfcx_log_ndtr_and_ndtri_over_their_domains_and_tails(dtype):
    """Note [Normal distribution functions]: against CPU over the whole line,
    the continued fraction's start (x = 2), the overflow of erfcx below about
    -9.4 (float) / -26.6 (double), and ndtri's tails down to 1e-300."""
    x = torch.cat([torch.linspace(-30, 30, 601, dtype=torch.float64),
                   torch.tensor([1.999999, 2.0, 2.000001, 1e3, 1e10, 1e300, INF, -INF, NAN])])  # fmt: skip
    x = x.to(dtype)
    # float32: relative to the value, but below the normal range (log_ndtr of
    # x > 13 is -erfc(x/sqrt(2))/2, a subnormal) absolute: PoCL's float erfc
    # is not exact there.
    tight = (
        {"rtol": 2e-6, "atol": torch.finfo(torch.float32).tiny}
        if dtype == torch.float32
        else {"rtol": 1e-13, "atol": 0}
    )
    for fn in (torch.special.erfcx, torch.special.log_ndtr):
        got, want = on_device(fn, x).cpu(), fn(x)
        torch.testing.assert_close(got, want, equal_nan=True, **tight)
    p = torch.cat([torch.logspace(-300 if dtype == torch.float64 else -37, -1, 60, dtype=torch.float64),
                   torch.linspace(0.0, 1.0, 101, dtype=torch.float64),
                   1 - torch.logspace(-15, -1, 15, dtype=torch.float64),
                   torch.tensor([-0.5, 1.5, NAN], dtype=torch.float64)])  # fmt: skip
    p = p.to(dtype)
    got, want = on_device(torch.special.ndtri, p).cpu(), torch.special.ndtri(p)
    torch.testing.assert_close(got, want, equal_nan=True, **tight)
    same(torch.special.ndtri, p[:5], exact=False, overloads=["aten::special_ndtri"])


def test_searchsorted_with_a_sorter():
    g = torch.Generator().manual_seed(2)
    seq = torch.randn(3, 8, generator=g)
    sorter = seq.argsort(-1)
    values = torch.randn(3, 5, generator=g)
    for side in ("left", "right"):
        same(lambda s, v, o, side=side: torch.searchsorted(s, v, sorter=o, side=side), seq, values, sorter,
             overloads=["aten::searchsorted.Tensor"])  # fmt: skip
    same(lambda s, v, o: torch.searchsorted(s, v, sorter=o, out_int32=True), seq[0], values,
         sorter[0])  # fmt: skip


def test_batch_norm_with_update_updates_the_running_stats_as_cpu():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 3, 5, generator=g)
    weight, bias = torch.randn(3, generator=g), torch.randn(3, generator=g)
    stats = {}
    for device in ("cpu", DEV):
        mean, var = torch.zeros(3, device=device), torch.ones(3, device=device)
        out = torch.ops.aten._batch_norm_with_update(
            x.to(device), weight.to(device), bias.to(device), mean, var, 0.3, 1e-5
        )
        stats[device] = [t.cpu() for t in out] + [mean.cpu(), var.cpu()]
    for got, want in zip(stats[DEV], stats["cpu"], strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    g = torch.Generator().manual_seed(4)
    x, target = torch.randn(6, 4, generator=g), torch.tensor([0, 3, 1, 1, 2, 3])
    weight = torch.rand(4, generator=g)
    loss = torch.nn.functional.multi_margin_loss
    same(loss, x, target, p=p, margin=0.7, reduction=reduction, exact=False,
         overloads=["aten::multi_margin_loss"])  # fmt: skip
    same(lambda a, t, w: loss(a, t, p=p, weight=w, reduction=reduction), x, target, weight,
         exact=False)  # fmt: skip
    same(loss, x[0], target[1:2], p=p, reduction=reduction, exact=False)  # one row
    bad = target.clone()
    bad[2] = 4
    with pytest.raises(RuntimeError) as cpu:
        loss(x, bad, p=p)
    with pytest.raises(RuntimeError) as dev:
        loss(x.to(DEV), bad.to(DEV), p=p)
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_multilabel_margin_loss_forward(reduction):
    """Targets end at each row's first -1; duplicates count as listed."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 5, generator=g, dtype=torch.float64)
    target = torch.tensor([[3, 0, -1, 1, 2], [1, 1, 4, -1, -1], [-1, 2, 3, 0, 1], [0, 1, 2, 3, 4]])
    fwd = torch.ops.aten.multilabel_margin_loss_forward
    same(fwd, x, target, reduction, exact=False, overloads=["aten::multilabel_margin_loss_forward"])
    same(fwd, x[1], target[1], reduction, exact=False)
    same(fwd, x[0, 0], torch.tensor(0), reduction, exact=False)
    bad = target.clone()
    bad[3, 2] = 5  # listed and out of range: CPU's error
    with pytest.raises(RuntimeError) as cpu:
        fwd(x, bad, reduction)
    with pytest.raises(RuntimeError) as dev:
        fwd(x.to(DEV), bad.to(DEV), reduction)
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_histogram_puts_edge_values_where_cpu_does(dtype):
    """Note [Histogram bins as CPU finds them]: every OpInfo sample, values on
    and near the edges, ranges that leave values out, weights, density, one
    repeated value, empty input and given (uneven) edges."""
    from torch.testing._internal.common_methods_invocations import op_db

    op = next(o for o in op_db if o.name == "histogram")
    for s in op.sample_inputs("cpu", dtype):
        moved = {k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in s.kwargs.items()}
        args = [v.to(DEV) if isinstance(v, torch.Tensor) else v for v in s.args]
        got = torch.histogram(s.input.to(DEV), *args, **moved)
        want = torch.histogram(s.input, *s.args, **s.kwargs)
        for g_, w in zip(got, want, strict=True):
            torch.testing.assert_close(g_.cpu(), w, equal_nan=True)
    g = torch.Generator().manual_seed(6)
    x = torch.cat([torch.linspace(-1, 1, 21), torch.rand(50, generator=g) * 2 - 1]).to(dtype)
    w = torch.rand(71, generator=g, dtype=dtype)
    hist = torch.histogram
    same(hist, x, 7, exact=False, overloads=["aten::histogram.bin_ct"])
    same(lambda a, b: hist(a, 10, weight=b, density=True), x, w, exact=False)
    same(lambda a: hist(a, 5, range=(-0.5, 0.3)), x, exact=False)
    same(lambda a: hist(a, 4), torch.full((6,), 2.5, dtype=dtype), exact=False)
    same(lambda a: hist(a, 3), torch.empty(0, dtype=dtype), exact=False)
    edges = torch.tensor([-1.0, -0.2, 0.0, 0.05, 0.9], dtype=dtype)
    same(hist, x, edges, exact=False, overloads=["aten::histogram.bins_tensor"])
    same(lambda a, e, b: hist(a, e, weight=b, density=True), x, edges, w, exact=False)
    bad = x.clone()
    bad[3] = NAN
    with pytest.raises(RuntimeError) as cpu:
        hist(bad, 4)
    with pytest.raises(RuntimeError) as dev:
        hist(bad.to(DEV), 4)
    assert str(dev.value) == str(cpu.value)
