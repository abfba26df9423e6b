"""The opencl plugin's native nll_loss / nll_loss2d kernels and backwards
(Note [Native nll_loss on OpenCL] in backends/opencl/kernels/loss.cpp).

One fresh interpreter on the opencl backend runs every case against CPU:
forward (both outputs of the direct aten call, and F.nll_loss) and backward
(autograd and the direct aten call) for each reduction, with and without
class weights, ignore_index, 1-D inputs, nll_loss2d, float32 and float64.
op_stats() must show the native tier for them; out-of-range targets must
raise CPU's exact error (the kernel hands such calls to the host tier) and
leave the device usable; declined calls (bfloat16) still match CPU.
"""

from __future__ import annotations

import json

import pytest
from conftest import NEEDS_OPENCL_PLUGIN, check_ok, python_subprocess

pytestmark = NEEDS_OPENCL_PLUGIN

CHECKS = r"""
import json, torch, flagos_torchfl as ft
ft.initialize("opencl")
F, aten, dev = torch.nn.functional, torch.ops.aten, torch.device("flagos")
torch.manual_seed(0)
bad = {}

def on(t, d):
    return t.to(d) if isinstance(t, torch.Tensor) else t

def close(name, got, want, tol):
    try:
        got = [g.cpu() for g in got] if isinstance(got, (tuple, list)) else [got.cpu()]
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True)
    except AssertionError as e:
        bad[name] = str(e)[:400]

def tol_of(dt):
    return 1e-5 if dt == torch.float32 else 1e-12

def case(name, x, t, w, reduction, ignore=-100, two_d=False, grad=True):
    red = ("none", "mean", "sum").index(reduction)
    fwd = aten.nll_loss2d_forward if two_d else aten.nll_loss_forward
    bwd = aten.nll_loss2d_backward if two_d else aten.nll_loss_backward
    tol = tol_of(x.dtype)
    args = (x, t, w, red, ignore)
    want = fwd(*args)
    close(name + "/aten_forward", fwd(*[on(a, dev) for a in args]), want, tol)
    gy = torch.randn_like(want[0])
    bargs = (gy, x, t, w, red, ignore, want[1])
    try:
        want_grad = bwd(*bargs)
    except RuntimeError as e:  # CPU wants a contiguous self here
        want_grad = e
    if isinstance(want_grad, Exception):
        # CPU's kernel only takes a contiguous self; flagos may raise the
        # same or compute what CPU computes for a contiguous copy.
        try:
            got = bwd(*[on(a, dev) for a in bargs])
            want_grad = bwd(gy, x.contiguous(), t, w, red, ignore, want[1])
            close(name + "/aten_backward", got, want_grad, tol)
        except RuntimeError as e:
            if str(e).splitlines()[0] != str(want_grad).splitlines()[0]:
                bad[name + "/aten_backward"] = f"{e} != {want_grad}"
    else:
        close(name + "/aten_backward", bwd(*[on(a, dev) for a in bargs]), want_grad, tol)
    if not grad:  # CPU's backward wants a contiguous self
        return
    # autograd through F.nll_loss
    xc, xf = x.clone().requires_grad_(), x.to(dev).requires_grad_()
    lc = F.nll_loss(xc, t, weight=w, reduction=reduction, ignore_index=ignore)
    lf = F.nll_loss(xf, on(t, dev), weight=on(w, dev), reduction=reduction, ignore_index=ignore)
    close(name + "/forward", lf, lc, tol)
    lc.backward(gy)
    lf.backward(gy.to(dev))
    close(name + "/grad", xf.grad, xc.grad, tol)

ft.reset_op_stats()
for dt in (torch.float32, torch.float64):
    d = str(dt).split(".")[1]
    x = torch.randn(7, 5, dtype=dt).log_softmax(1)
    t = torch.tensor([1, 0, 4, 2, 2, 3, 1])
    w = torch.rand(5, dtype=dt) + 0.1
    big = torch.randn(300, 10, dtype=dt)  # more rows than one work-group
    tbig = torch.randint(0, 10, (300,))
    tbig[::7] = -100
    for r in ("none", "mean", "sum"):
        for wn, ww in (("", None), ("_weight", w)):
            case(f"{d}_{r}{wn}", x, t, ww, r)
            case(f"{d}_{r}{wn}_ignore", x, t, ww, r, ignore=2)
            case(f"{d}_{r}{wn}_all_ignored", x, torch.full((7,), 3), ww, r, ignore=3)
            case(f"{d}_{r}{wn}_unbatched", x[0], torch.tensor(4), ww, r)
            case(f"{d}_{r}{wn}_unbatched_ignored", x[0], torch.tensor(4), ww, r, ignore=4)
            case(f"{d}_{r}{wn}_transposed", x.t().contiguous().t(), t, ww, r, grad=False)
            x4, t3 = torch.randn(2, 5, 3, 4, dtype=dt), torch.randint(0, 5, (2, 3, 4))
            t3[0, 1, 2] = -100
            case(f"{d}_{r}{wn}_2d", x4, t3, ww, r, two_d=True)
            case(f"{d}_{r}{wn}_2d_channels_last",
                 x4.to(memory_format=torch.channels_last), t3, ww, r, two_d=True, grad=False)
        case(f"{d}_{r}_big", big, tbig, None, r)
    xs = torch.randn(32, 10, dtype=dt)
    ys = torch.randint(0, 10, (32,))
    for r in ("none", "mean", "sum"):
        case(f"{d}_{r}_cross_entropy_nll", xs.log_softmax(1), ys, None, r)
    # cross_entropy end to end: log_softmax + nll_loss and their backwards
    xc, xf = xs.clone().requires_grad_(), xs.to(dev).requires_grad_()
    lc, lf = F.cross_entropy(xc, ys), F.cross_entropy(xf, ys.to(dev))
    lc.backward()
    lf.backward()
    close(f"{d}_cross_entropy", (lf, xf.grad), (lc, xc.grad), tol_of(dt))
served = ft.op_stats()

# Out-of-range targets: CPU's exception type and message, then more calls.
ft.reset_op_stats()
errors = {}
cases = {
    "2d_input": lambda d: F.nll_loss(torch.randn(4, 10).to(d), torch.tensor([1, 2, 12, 3]).to(d)),
    "2d_input_none": lambda d: F.nll_loss(torch.randn(4, 10).to(d), torch.tensor([1, 2, 12, 3]).to(d), reduction="none"),
    "negative": lambda d: F.nll_loss(torch.randn(4, 10).to(d), torch.tensor([1, -3, 0, 0]).to(d)),
    "1d_input": lambda d: F.nll_loss(torch.randn(10).to(d), torch.tensor(12).to(d)),
    "nll2d": lambda d: F.nll_loss(torch.randn(2, 3, 4, 4).to(d), torch.full((2, 4, 4), 5).to(d)),
    "backward_direct": lambda d: aten.nll_loss_backward(torch.tensor(1.0).to(d), torch.randn(3, 4).to(d), torch.tensor([0, 9, 1]).to(d), None, 1, -100, torch.tensor(3.0).to(d)),
}
for name, fn in cases.items():
    got = []
    for d in ("cpu", dev):
        try:
            fn(d)
            got.append(None)
        except Exception as e:
            got.append([type(e).__name__, str(e).splitlines()[0]])
    errors[name] = got
after_errors = ft.op_stats()
ft.reset_op_stats()
x, t = torch.randn(6, 4, dtype=torch.float64), torch.tensor([0, 3, 1, 1, 2, 0])
case("after_errors", x, t, None, "mean")
after_stats = ft.op_stats()

# Declined (bfloat16): a later tier serves it, still CPU's result.
ft.reset_op_stats()
xb = torch.randn(6, 4).to(torch.bfloat16)
close("bfloat16_declined", F.nll_loss(xb.to(dev), t.to(dev)), F.nll_loss(xb, t), 1e-2)
declined = ft.op_stats()
print(json.dumps({"bad": bad, "served": served, "errors": errors, "after_errors": after_errors,
                  "after": after_stats, "declined": declined}))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    probe = python_subprocess("import flagos_torchfl as ft; ft.initialize('opencl')")
    if probe.returncode != 0:
        pytest.skip(f"opencl backend unavailable: {probe.stderr.strip()[-300:]}")
    proc = python_subprocess(
        CHECKS, timeout=900, FLAGOS_CACHE_DIR=str(tmp_path_factory.mktemp("cache"))
    )
    return json.loads(check_ok(proc).strip().splitlines()[-1])


def tiers(stats, op):
    return stats.get(op, {})


def test_results_match_cpu(results):
    assert results["bad"] == {}, results["bad"]


@pytest.mark.parametrize(
    "op",
    [
        "aten::nll_loss_forward",
        "aten::nll_loss_backward",
        "aten::nll_loss2d_forward",
        "aten::nll_loss2d_backward",
    ],
)
def test_native_tier_served(results, op):
    served = tiers(results["served"], op)
    assert served.get("native", 0) > 0, served
    assert set(served) == {"native"}, served


def test_out_of_range_targets_raise_cpu_errors(results):
    for name, (cpu, flagos) in results["errors"].items():
        assert cpu is not None and cpu[0] == "IndexError", (name, cpu)
        if name != "backward_direct":
            assert flagos == cpu, (name, cpu, flagos)
    # The core's range check raised CPU's error at the call, before any tier
    # (Note [Index bounds]): nothing ran, on the device or on the host.
    fwd = tiers(results["after_errors"], "aten::nll_loss_forward")
    assert fwd == {}, fwd


def test_backward_out_of_range_target_is_an_error(results):
    # Only reachable by calling the aten op directly: never a silent result.
    assert results["errors"]["backward_direct"][1] is not None


def test_backward_out_of_range_target_raises_cpu_error(results):
    # The kernel returns FLAGOS_ERROR_FALLBACK: the core runs the call on the
    # host, whose CPU kernel raises CPU's error.
    cpu, flagos = results["errors"]["backward_direct"]
    assert flagos == cpu


def test_calls_after_errors_run_native(results):
    assert tiers(results["after"], "aten::nll_loss_forward") == {"native": 2}
    assert tiers(results["after"], "aten::nll_loss_backward") == {"native": 2}


def test_declined_dtype_matches_cpu_elsewhere(results):
    # bfloat16: the kernel and the composite decline, the host tier runs it
    # (its result is compared with CPU's in test_results_match_cpu).
    fwd = tiers(results["declined"], "aten::nll_loss_forward")
    assert fwd and not fwd.get("native"), fwd
