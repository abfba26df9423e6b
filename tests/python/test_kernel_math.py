"""The fast math paths of the kernels, against PyTorch's CPU results.

- host plugin (in this process): the vector math of Note [Vector math]
  (SLEEF AVX-512/AVX2, erf as PyTorch's), the vectorizable accumulations of
  sum/mean/softmax/layer norm, and the column sums of a reduction over the
  leading dims: every size around the vector width (the padded tail), the
  IEEE special values, rows with NaN and all -inf, and long rows whose sums
  must stay accurate;
- the generated tier (a fresh process per backend: host's C dialect with the
  operators routed to it, and opencl): the float erf formula and pow's
  scalar-exponent cases (Note [Fast paths of the generator's math]), the
  one-exp softmax, the C dialect's vector math (glibc's libmvec: Note [Vector
  math in generated C]), and the reductions and row operators of Note
  [Reduction strategies].

Tolerances: against CPU's float64 result, 1e-6 absolute / 1.3e-6 relative
(float32's assert_close defaults): SLEEF's functions are 1-ULP, and the erf
formula's error bound is 1.5e-7 absolute (gelu: times |x| / 2).
Sums of 10^5 float32 values get PyTorch's own reduction tolerance scaled by
the length (rtol 1e-5).
"""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND, NEEDS_OPENCL_PLUGIN, check_ok

if BACKEND != "host":
    pytest.skip("host plugin kernels (the default backend of the suite)", allow_module_level=True)

DEV = torch.device("flagos")
SIZES = [1, 7, 8, 9, 15, 16, 17, 33, 1000, 4099]
SPECIALS = [
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    1e-40,
    -1e-40,
    88.5,
    -88.5,
    100.0,
    -100.0,
    3.5,
    -3.5,
]


def sample(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * 3
    k = min(n, len(SPECIALS))
    x[:k] = torch.tensor(SPECIALS[:k])
    return x


UNARY = {
    "exp": torch.exp,
    "log": lambda x: torch.log(x.abs()),
    "tanh": torch.tanh,
    "erf": torch.erf,
    "sin": torch.sin,
    "cos": torch.cos,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_cpu(name, n):
    fn = UNARY[name]
    x = sample(n, seed=n)
    # The reference is CPU in float64: CPU's own float32 gelu is further from
    # it (8.8e-7 at x = -3.46, AVX-512 erf) than ours (3.8e-7), and gives NaN
    # at +inf where the formula gives +inf. The log case takes |x|.
    got, want = fn(x.to(DEV)).cpu(), fn(x.double()).float()
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1.3e-6, equal_nan=True)


def test_exp_over_the_whole_float_range():
    # Note [Inline exp] (backends/host/kernels/vecmath_avx512.cpp): its own
    # polynomial, so every region is checked against float64 rounded to
    # float: overflow to inf past 88.72, denormal results below -87.3, 0
    # past -103.97, and the specials. Within 2 ULP of the rounded result,
    # as SLEEF's 1-ULP exp and CPU's are.
    x = torch.cat(
        [
            torch.linspace(-110.0, 95.0, 1_000_001),
            torch.tensor([88.72283, 88.722839, 88.72284, -87.33654, -103.97207, -103.9721]),
        ]
    )
    got = torch.exp(x.to(DEV)).cpu()
    want = torch.exp(x.double()).float()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    assert torch.equal(got == 0, want == 0)
    finite = torch.isfinite(want) & (want != 0)
    spacing = (torch.nextafter(want.abs(), torch.tensor(math.inf)) - want.abs()).double()
    ulps = ((got.double() - want.double()).abs() / spacing)[finite]
    assert ulps.max().item() <= 2.0, ulps.max().item()
    specials = torch.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0])
    torch.testing.assert_close(
        torch.exp(specials.to(DEV)).cpu(), torch.exp(specials), equal_nan=True, atol=0, rtol=0
    )


@pytest.mark.parametrize("n", [7, 16, 4099])
@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu"])
def test_activation_backward_matches_cpu(name, n):
    fn = UNARY[name]
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3
    g = torch.randn(n, generator=torch.Generator().manual_seed(n + 1))
    xc = x.clone().requires_grad_()
    fn(xc).backward(g)
    xd = x.to(DEV).requires_grad_()
    fn(xd).backward(g.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, atol=1e-6, rtol=1.3e-6)


def test_strided_input_takes_the_scalar_path_correctly():
    x = torch.randn(64, 33) * 3
    got = torch.erf(x.to(DEV).t()).cpu()  # inner stride != 1
    torch.testing.assert_close(got, torch.erf(x.t()), atol=1e-6, rtol=1.3e-6)


@pytest.mark.parametrize("cols", [1, 7, 16, 17, 1000])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_rows_match_cpu(cols, log):
    fn = torch.log_softmax if log else torch.softmax
    x = torch.randn(6, cols, generator=torch.Generator().manual_seed(cols)) * 5
    x[1, 0] = math.nan  # a NaN row is all NaN
    x[2, :] = -math.inf  # an all -inf row: NaN, as CPU
    if cols > 1:
        x[3, -1] = math.inf
        x[4, 1] = -math.inf
    got = fn(x.to(DEV), -1).cpu()
    torch.testing.assert_close(got, fn(x, -1), atol=1e-6, rtol=1.3e-6, equal_nan=True)


@pytest.mark.parametrize(
    "shape,dims",
    [
        ((4096, 33), (0,)),  # column sums: the accumulator-row path
        ((3, 500, 17), (1,)),  # a middle dim
        ((5, 7, 9), (0, 1)),  # a leading block
        ((33, 100_000), (1,)),  # long rows: the vector row sum
        ((100_000,), (0,)),
        ((257, 129), (1,)),
        ((2, 3, 4), (0, 2)),  # not one block: the general walk
    ],
)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sums_match_cpu(shape, dims, op):
    x = torch.rand(shape, generator=torch.Generator().manual_seed(1)) + 0.5
    for keepdim in (False, True):
        got = getattr(x.to(DEV), op)(dims, keepdim=keepdim).cpu()
        want = getattr(x.double(), op)(dims, keepdim=keepdim).float()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_column_sum_propagates_nan_and_inf():
    x = torch.randn(64, 40)
    x[5, 3] = math.nan
    x[7, 4] = math.inf
    got = x.to(DEV).sum(0).cpu()
    torch.testing.assert_close(got, x.sum(0), equal_nan=True, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("n", [7, 64, 1000])
def test_layer_norm_matches_cpu(affine, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(12, n, generator=g) * 4 + 3
    w = torch.randn(n, generator=g) if affine else None
    b = torch.randn(n, generator=g) if affine else None
    got = F.layer_norm(
        x.to(DEV), (n,), None if w is None else w.to(DEV), None if b is None else b.to(DEV)
    ).cpu()
    torch.testing.assert_close(got, F.layer_norm(x, (n,), w, b), atol=1e-5, rtol=1e-5)


# --- the generated tier ------------------------------------------------------

GENERATED = r"""
import json, math, torch, flagos_torchfl as ft
import torch.nn.functional as F
ft.initialize(BACKEND)
dev = torch.device("flagos")
g = torch.Generator().manual_seed(0)
x = torch.randn(4099, generator=g) * 3
x[:6] = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-3])
pos = x.abs() + 0.25
cases = {
    "erf": (torch.erf, x),
    "gelu": (F.gelu, x),
    "exp": (torch.exp, x),
    "log": (torch.log, pos),
    "tanh": (torch.tanh, x),
    "sigmoid": (torch.sigmoid, x),
    "silu": (F.silu, x),
    "softmax": (lambda t: torch.softmax(t.reshape(1, -1), -1), x.nan_to_num(0.0, 50.0, -50.0)),
}
for e in (2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 2.5, 1.0):
    cases[f"pow{e}"] = ((lambda t, e=e: torch.pow(t, e)), pos)
worst = {}
for name, (fn, t) in cases.items():
    got, want = fn(t.to(dev)).cpu(), fn(t.double()).float()  # float64 CPU: see above
    both = ~(got.isnan() & want.isnan())
    diff = (got - want).abs()[both & want.isfinite()]
    tol = 1e-6 + 1.3e-6 * want.abs()[both & want.isfinite()]
    inf = want.isinf()
    worst[name] = {
        "excess": float((diff - tol).max()),
        "nan_mismatch": int((got.isnan() != want.isnan()).sum()),
        "inf_mismatch": int((got[inf] != want[inf]).sum()),
    }
worst["_tiers"] = {op: row for op, row in ft.op_stats().items() if row.get("generated", 0)}
print(json.dumps(worst))
"""

ROUTES = {
    f"FLAGOS_OP_{op}": "generated"
    for op in ("ERF", "GELU", "SOFTMAX", "POW_SCALAR", "EXP", "LOG", "TANH", "SIGMOID", "SILU")
}


def check_generated(out: str) -> None:
    worst = json.loads(out.strip().splitlines()[-1])
    tiers = worst.pop("_tiers")
    for op in ("aten::erf", "aten::gelu", "aten::_softmax", "aten::pow.Tensor_Scalar"):
        assert tiers.get(op, {}).get("generated", 0) > 0, (op, tiers)
    for name, w in worst.items():
        assert w["excess"] <= 0, (name, w)
        assert w["nan_mismatch"] == 0 and w["inf_mismatch"] == 0, (name, w)


def test_generated_math_on_host_c_dialect(run_python):
    check_generated(check_ok(run_python(GENERATED.replace("BACKEND", '"host"'), **ROUTES)))


@NEEDS_OPENCL_PLUGIN
def test_generated_math_on_opencl(run_python):
    check_generated(check_ok(run_python(GENERATED.replace("BACKEND", '"opencl"'), timeout=600)))


# --- generated reductions and row operators (Note [Reduction strategies]) ----
# Every row length around the OpenCL segment (32 items) and group (256), rows
# that fill a group's segments or not, a huge row, a full reduction, column
# sums, NaN / inf rows, float16 / bfloat16 / float64 and integer sums, the
# backwards through autograd; against CPU in float64, cast to the dtype.
# Which strategy ran is read from kernel_cache_stats()["reduce_launches"].

REDUCTIONS = r"""
import json, math, torch, flagos_torchfl as ft
ft.initialize(BACKEND)
dev = torch.device("flagos")
g = torch.Generator().manual_seed(0)
bad = {}
def check(name, got, want, rtol, atol):
    try:
        torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        bad[name] = str(e)[:300]
def rows(n, cols, dtype=torch.float32, scale=3.0):
    x = torch.randn(n, cols, generator=g, dtype=torch.float64) * scale
    return x.to(dtype)
TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12),
       torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 1e-2)}
for cols in (1, 7, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1000, 4099):
    for n in (1, 3, 8, 10):
        x = rows(n, cols)
        if cols > 2 and n > 2:
            x[0, cols // 2] = math.nan
            x[1, :] = -math.inf
            x[2, -1] = math.inf
        for op in ("sum", "mean", "amax", "amin"):
            want = getattr(x.double(), op)(-1).float()
            check(f"{op} {n}x{cols}", getattr(x.to(dev), op)(-1), want, *TOL[torch.float32])
        for fn in (torch.softmax, torch.log_softmax):
            want = fn(x.double(), -1).float()
            check(f"{fn.__name__} {n}x{cols}", fn(x.to(dev), -1), want, 1.3e-6, 1e-6)
for dtype in (torch.float16, torch.bfloat16, torch.float64):
    x = rows(10, 1000, dtype)
    check(f"sum {dtype}", x.to(dev).sum(-1), x.double().sum(-1).to(dtype), *TOL[dtype])
    check(f"softmax {dtype}", torch.softmax(x.to(dev), -1),
          torch.softmax(x.double(), -1).to(dtype), *TOL[dtype])
for dtype in (torch.int32, torch.int64, torch.bool):
    x = torch.randint(-1000, 1000, (10, 1000), generator=g).to(dtype)
    check(f"sum {dtype}", x.to(dev).sum(-1), x.sum(-1), 0, 0)
# A huge row, a full reduction, column sums and a middle dim.
x = rows(2, 300007)
check("sum huge row", x.to(dev).sum(-1), x.double().sum(-1).float(), 1e-5, 1e-4)
x = rows(37, 29)
check("sum all", x.to(dev).sum(), x.double().sum().float(), 1e-5, 1e-5)
for shape in ((4096, 33), (9, 65), (1000, 1)):
    x = rows(*shape)
    x[0, 0] = math.nan
    check(f"sum(0) {shape}", x.to(dev).sum(0), x.double().sum(0).float(), 1e-5, 1e-5)
    check(f"amax(0) {shape}", x.to(dev).amax(0), x.double().amax(0).float(), 0, 0)
x = torch.randn(3, 500, 17, generator=g)
check("sum(1) middle", x.to(dev).sum(1), x.double().sum(1).float(), 1e-5, 1e-5)
# Backwards, and specialized kernels (a shape's 3rd call builds one).
for fn in (torch.softmax, torch.log_softmax):
    for cols in (65, 1000):
        x = rows(10, cols)
        w = torch.randn(10, cols, generator=g)
        for _ in range(4):
            xd = x.to(dev).requires_grad_()
            (fn(xd, -1) * w.to(dev)).sum().backward()
        ft.wait_for_specializations()
        xd = x.to(dev).requires_grad_()
        (fn(xd, -1) * w.to(dev)).sum().backward()
        xc = x.double().requires_grad_()
        (fn(xc, -1) * w.double()).sum().backward()
        check(f"{fn.__name__} backward {cols}", xd.grad, xc.grad.float(), 1e-5, 1e-5)
stats = ft.kernel_cache_stats()
print(json.dumps({"bad": bad, "reduce_launches": stats["reduce_launches"],
                  "specialized": stats["specialized_launches"]}))
"""

REDUCTION_ROUTES = {
    f"FLAGOS_OP_{op}": "generated"
    for op in ("SUM", "MEAN", "AMAX", "AMIN", "SOFTMAX", "LOG_SOFTMAX")
    + ("SOFTMAX_BACKWARD", "LOG_SOFTMAX_BACKWARD")
}


def run_reductions(run_python, backend: str) -> dict:
    out = check_ok(
        run_python(REDUCTIONS.replace("BACKEND", repr(backend)), timeout=900, **REDUCTION_ROUTES)
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["bad"] == {}, result["bad"]
    assert result["specialized"] > 0, result
    return result["reduce_launches"]


def test_generated_reductions_on_host_c_dialect(run_python):
    # "c": rows walked by vector loops, columns in blocks; no work-groups.
    launches = run_reductions(run_python, "host")
    assert launches["rows"] > 0 and launches["columns"] > 0, launches
    assert launches["group"] == 0, launches


@NEEDS_OPENCL_PLUGIN
def test_generated_reductions_on_opencl(run_python):
    # OpenCL: contiguous rows of 64 or more take a work-group segment each,
    # column sums neighbouring items, short rows an item each.
    launches = run_reductions(run_python, "opencl")
    assert launches["group"] > 0 and launches["columns"] > 0 and launches["rows"] > 0, launches


@pytest.mark.parametrize(
    "shape,k,s,p,d,ceil",
    [
        ((2, 3, 17, 19), 3, 2, 1, 1, False),
        ((2, 3, 17, 19), 3, 2, 1, 1, True),
        ((1, 2, 9, 9), 2, 1, 0, 2, False),
        ((1, 1, 8, 8), 3, 3, 1, 1, True),
    ],
)
def test_max_pool2d_values_and_indices_match_cpu(shape, k, s, p, d, ceil):
    # The windows are clipped once a row (pool.cpp): the same maxima and the
    # same indices as CPU, NaN (the last in a window wins) and windows of
    # -inf (the window's first element) included.
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(k))
    x[0, 0, 2, 3] = x[0, 0, 2, 5] = math.nan
    x[0, 0, 4, 4] = -math.inf
    x[-1, -1, :4, :4] = -math.inf
    want, want_i = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    got, got_i = F.max_pool2d(x.to(DEV), k, s, p, d, ceil_mode=ceil, return_indices=True)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, atol=0, rtol=0)
    assert torch.equal(got_i.cpu(), want_i)
