"""Composite kernels (Note [Composite kernels], csrc/dispatch/tiers/decomposition/):
convolution as im2col + GEMM, batch/layer norm, nll/mse losses and
embedding_dense_backward built from other catalog operators.

Each backend runs in a fresh interpreter: opencl takes the composites
because it has no kernel of its own for most of these operators; host has
native ones (and opencl for the nll losses), so FLAGOS_OP_<ID>=generated
routes past them. Forward results and
gradients (autograd through convolution_backward etc.) are compared with
CPU; op_stats() must show the composite ("decomposition") tier, and calls
a composite declines (3-D convolution, invalid arguments) must reach the
host tier and raise CPU's error.
"""

from __future__ import annotations

import json

import pytest
from conftest import CORE_ERROR, check_ok, python_subprocess

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")

COMPOSITE_OPS = (
    "convolution_direct",
    "convolution_backward_direct",
    "batch_norm",
    "batch_norm_legit",
    "batch_norm_legit_no_stats",
    "batch_norm_backward",
    "layer_norm",
    "layer_norm_backward",
    "nll_loss",
    "nll_loss_backward",
    "nll_loss2d",
    "nll_loss2d_backward",
    "mse_loss",
    "mse_loss_backward",
    "embedding_dense_backward",
    "binary_cross_entropy",
    "binary_cross_entropy_backward",
    "smooth_l1_loss",
    "smooth_l1_loss_backward",
    "huber_loss",
    "scatter_add",
    "roll",
    "var",
    "std",
    "addbmm",
    "clamp_tensor",
    "nan_to_num",
    "cumsum",
)
HOST_ROUTES = {f"FLAGOS_OP_{op.upper()}": "generated" for op in COMPOSITE_OPS}
# opencl has native nll kernels (backends/opencl/kernels/loss.cpp): routed
# past them too, so the composites stay tested there.
OPENCL_NATIVE = ("nll_loss", "nll_loss_backward", "nll_loss2d", "nll_loss2d_backward")
OPENCL_ROUTES = {f"FLAGOS_OP_{op.upper()}": "generated" for op in OPENCL_NATIVE}

CHECKS = r"""
import json, sys, torch, flagos_torchfl as ft
ft.initialize(sys.argv[1] if len(sys.argv) > 1 else BACKEND)
dev = torch.device("flagos")
F = torch.nn.functional
torch.manual_seed(0)
bad = {}

def on(t, d):
    if isinstance(t, torch.Tensor):
        u = t.detach().to(d)
        return u.requires_grad_(t.requires_grad) if t.is_floating_point() else u
    return t

def check(name, fn, *args, tol=1e-5):
    cpu = [on(a, "cpu") for a in args]
    fl = [on(a, dev) for a in args]
    want, got = fn(*cpu), fn(*fl)
    try:
        torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
        if not want.requires_grad:
            return
        grad = torch.randn_like(want)
        want.backward(grad)
        got.backward(grad.to(dev))
        for i, (a, b) in enumerate(zip(cpu, fl)):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=tol, atol=tol,
                                           msg=lambda m: f"grad {i}: {m}")
    except AssertionError as e:
        bad[name] = str(e)[:400]

def rg(*shape, dtype=torch.float64):
    return torch.randn(*shape, dtype=dtype).requires_grad_()

x = rg(2, 4, 9, 8)
check("conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1), x, rg(6, 4, 3, 3), rg(6))
check("conv2d_stride_dilation", lambda x, w: F.conv2d(x, w, stride=2, dilation=2, padding=(2, 1)),
      x, rg(6, 4, 3, 3))
check("conv2d_groups", lambda x, w: F.conv2d(x, w, groups=2, stride=(1, 2)), x, rg(6, 2, 3, 2))
check("conv2d_depthwise", lambda x, w: F.conv2d(x, w, groups=4, padding=1), x, rg(4, 1, 3, 3))
check("conv2d_channels_last", lambda x, w: F.conv2d(x, w),
      x.detach().to(memory_format=torch.channels_last).requires_grad_(), rg(6, 4, 3, 3))
check("conv2d_float32", lambda x, w: F.conv2d(x, w, padding=1),
      rg(2, 3, 7, 7, dtype=torch.float32), rg(5, 3, 3, 3, dtype=torch.float32), tol=1e-4)
check("conv1d", lambda x, w, b: F.conv1d(x, w, b, padding=2, stride=2), rg(3, 4, 11), rg(5, 4, 3), rg(5))
check("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
      x, rg(4, 3, 3, 3))
check("conv_transpose2d_groups", lambda x, w, b: F.conv_transpose2d(x, w, b, groups=2, dilation=2),
      x, rg(4, 2, 3, 3), rg(4))
check("conv2d_padding_valid", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding="valid"),
      rg(1, 4, 5, 5), rg(1, 4, 2, 3), rg(1))
# output_padding >= stride (allowed below the dilation): the full-grid path.
check("conv_transpose2d_output_padding_ge_stride",
      lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(3, 2), padding=(1, 2),
                                         output_padding=(2, 3), groups=2, dilation=(4, 4)),
      rg(2, 2, 4, 4), rg(2, 2, 4, 5), rg(4))
x3 = rg(2, 4, 5, 6, 7)
check("conv3d", lambda x, w, b: F.conv3d(x, w, b, padding=1), x3, rg(3, 4, 3, 2, 3), rg(3))
check("conv3d_stride_dilation_groups",
      lambda x, w: F.conv3d(x, w, stride=(2, 1, 3), dilation=(1, 2, 1), padding=(0, 2, 1), groups=2),
      x3, rg(6, 2, 2, 3, 2))
check("conv_transpose3d",
      lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 1), output_padding=(1, 0, 1)),
      x3, rg(4, 3, 3, 2, 3), rg(3))
check("conv_transpose3d_groups_dilation",
      lambda x, w: F.conv_transpose3d(x, w, stride=(1, 2, 1), dilation=(2, 1, 3), groups=2),
      x3, rg(4, 2, 2, 3, 2))
check("conv_transpose1d", lambda x, w: F.conv_transpose1d(x, w, stride=3), rg(2, 4, 6), rg(4, 2, 2))

rm, rv = torch.randn(3, dtype=torch.float64), torch.rand(3, dtype=torch.float64) + 0.5
stats = {"cpu": (rm.clone(), rv.clone()), "flagos": (rm.to(dev), rv.to(dev))}
bn = lambda training: lambda x, w, b: F.batch_norm(x, *stats[x.device.type], w, b, training=training)
check("batch_norm_train", bn(True), rg(4, 3, 5, 5), rg(3), rg(3))
try:
    torch.testing.assert_close(stats["flagos"][0].cpu(), stats["cpu"][0])
    torch.testing.assert_close(stats["flagos"][1].cpu(), stats["cpu"][1])
except AssertionError as e:
    bad["batch_norm_running_stats"] = str(e)[:400]
check("batch_norm_eval", bn(False), rg(4, 3, 5, 5), rg(3), rg(3))
check("batch_norm_no_affine_2d", lambda x: F.batch_norm(x, None, None, training=True), rg(6, 4))
# _native_batch_norm_legit (what export and compile decompose to): all three
# results, and the running statistics it updates in place.
legit_stats = {"cpu": (rm.clone(), rv.clone()), "flagos": (rm.to(dev), rv.to(dev))}
legit = torch.ops.aten._native_batch_norm_legit
for training in (True, False):
    for i in range(3):
        check(f"batch_norm_legit_{training}_{i}",
              lambda x, w, b: legit(x, w, b, *legit_stats[x.device.type], training, 0.1, 1e-5)[i],
              rg(4, 3, 5, 5), rg(3), rg(3))
try:
    for j in range(2):
        torch.testing.assert_close(legit_stats["flagos"][j].cpu(), legit_stats["cpu"][j])
except AssertionError as e:
    bad["batch_norm_legit_running_stats"] = str(e)[:400]
for i in range(3):
    check(f"batch_norm_legit_no_stats_{i}",
          lambda x, w: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, None, True, 0.1, 1e-5)[i],
          rg(4, 3, 5), rg(3))
check("layer_norm", lambda x, w, b: F.layer_norm(x, (5, 5), w, b), rg(4, 3, 5, 5), rg(5, 5), rg(5, 5))
check("layer_norm_no_affine", lambda x: F.layer_norm(x, (7,)), rg(3, 7))
check("layer_norm_empty_batch", lambda x: F.layer_norm(x, (3,)), rg(0, 3))
check("layer_norm_all_dims", lambda x: F.layer_norm(x, (2, 3)), rg(2, 3))

scores, target = rg(6, 5), torch.tensor([1, 0, -100, 4, 2, 3])
for red in ("none", "mean", "sum"):
    check(f"nll_{red}", lambda s, t: F.nll_loss(s, t, reduction=red), scores, target)
    check(f"nll_weight_{red}", lambda s, t, w: F.nll_loss(s, t, weight=w, reduction=red),
          scores, target, torch.rand(5, dtype=torch.float64))
    check(f"cross_entropy_{red}", lambda s, t: F.cross_entropy(s, t, reduction=red, ignore_index=2),
          scores, target.clamp(min=0))
    check(f"mse_{red}", lambda a, b: F.mse_loss(a, b, reduction=red), rg(3, 4), rg(3, 4))
for red in ("none", "mean", "sum"):
    probs = torch.rand(3, 4, dtype=torch.float64).clamp(0.05, 0.95).requires_grad_()
    labels = torch.randint(0, 2, (3, 4)).double()
    check(f"bce_{red}", lambda p, y: F.binary_cross_entropy(p, y, reduction=red), probs, labels)
    check(f"bce_weight_{red}", lambda p, y, w: F.binary_cross_entropy(p, y, w, reduction=red),
          probs, labels, torch.rand(3, 4, dtype=torch.float64))
    for beta in (0.5, 0.0):
        check(f"smooth_l1_{red}_{beta}",
              lambda a, b: F.smooth_l1_loss(a, b, reduction=red, beta=beta), rg(3, 4), rg(3, 4))
    check(f"huber_{red}", lambda a, b: F.huber_loss(a, b, reduction=red, delta=0.7), rg(3, 4),
          torch.randn(3, 4, dtype=torch.float64))
check("nll_unbatched", lambda s, t: F.nll_loss(s, t), rg(5), torch.tensor(3))
check("nll2d", lambda s, t: F.nll_loss(s, t), rg(2, 4, 3, 3), torch.randint(0, 4, (2, 3, 3)))
check("nll2d_none", lambda s, t: F.nll_loss(s, t, reduction="none"), rg(2, 4, 3, 3),
      torch.randint(0, 4, (2, 3, 3)))
check("embedding_padding_idx", lambda w, i: F.embedding(i, w, padding_idx=2), rg(10, 4),
      torch.tensor([[1, 2, 2], [0, 9, 1]]))

def idx(*shape, high):
    return torch.randint(0, high, shape)

base, src = rg(4, 5), rg(3, 5)
perm = torch.stack([torch.randperm(4)[:3] for _ in range(5)], 1)  # no duplicate targets
cols, rows = idx(4, 2, high=5), idx(3, 5, high=4)
check("scatter_src", lambda b, s, i: torch.scatter(b, 0, i, s), base, src, perm)
check("scatter_value", lambda b, i: torch.scatter(b, 1, i, 2.5), base, cols)
check("scatter_add", lambda b, s, i: torch.scatter_add(b, 0, i, s), base, src, rows)
check("index_add", lambda b, s, i: torch.index_add(b, 0, i, s, alpha=2), base, src,
      torch.tensor([3, 0, 3]))
check("roll_dims", lambda x: torch.roll(x, (1, -7), (0, -1)), rg(3, 4, 5))
check("roll_flat", lambda x: torch.roll(x, 5), rg(3, 4))
check("roll_zero", lambda x: torch.roll(x, 0, 0) * 1, rg(3, 4))
for red_dims, corr, keep in ((None, None, False), ((0, 2), 0, True), ((1,), 2.5, False)):
    check(f"var_{red_dims}_{corr}", lambda x: torch.var(x, red_dims, correction=corr, keepdim=keep),
          rg(3, 4, 5))
    check(f"std_{red_dims}_{corr}", lambda x: torch.std(x, red_dims, correction=corr, keepdim=keep),
          rg(3, 4, 5))
check("clamp_tensor_min_only", lambda x, lo: torch.clamp(x, min=lo), rg(3, 4), rg(4))
check("clamp_tensor_max_only", lambda x, hi: torch.clamp(x, max=hi), rg(3, 4), rg(3, 1))
check("clamp_tensor_in_place", lambda x, hi: torch.clamp_(x * 1, max=hi), rg(3, 4), rg(3, 4))
special = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), -2.0], dtype=torch.float64)
check("nan_to_num_defaults", lambda x: torch.nan_to_num(x), special)
check("nan_to_num_float32", lambda x: torch.nan_to_num(x, posinf=7.0), special.float())
check("nan_to_num_out", lambda x: torch.nan_to_num(x, nan=1.5, out=torch.empty_like(x)), special)
check("cumsum", lambda x: torch.cumsum(x, 1), rg(3, 37))
check("cumsum_int", lambda x: torch.cumsum(x, 0), torch.randint(-9, 9, (70, 2), dtype=torch.int32))
check("cumsum_in_place", lambda x: (x * 1).cumsum_(-1), rg(2, 9))
check("cumsum_dtype", lambda x: torch.cumsum(x, 0, dtype=torch.float64), rg(5, dtype=torch.float32))
check("addbmm_in_place", lambda s, a, b: (s * 1).addbmm_(a, b), rg(3, 5), rg(4, 3, 2), rg(4, 2, 5))
check("addbmm", lambda s, a, b: torch.addbmm(s, a, b, beta=0.5, alpha=2), rg(3, 5), rg(4, 3, 2), rg(4, 2, 5))

# Declined calls reach the host tier: counted there, with CPU's results/errors.
ft.reset_op_stats()
check("conv3d_half_declined", lambda x, w: F.conv3d(x, w),
      rg(1, 2, 4, 4, 4).to(torch.bfloat16), rg(3, 2, 2, 2, 2).to(torch.bfloat16), tol=0.05)
declined = ft.op_stats().get("aten::convolution", {}).get("fallback", 0)
errors = {}
for name, fn, args in (
    ("nll_target_out_of_range", lambda s, t: F.nll_loss(s, t), (torch.randn(3, 4), torch.tensor([0, 7, 1]))),
    ("bce_input_outside_0_1", lambda p, y: F.binary_cross_entropy(p, y), (torch.tensor([0.5, 1.5]), torch.tensor([1.0, 0.0]))),
    ("conv_channels_mismatch", lambda x, w: F.conv2d(x, w), (torch.randn(1, 3, 5, 5), torch.randn(2, 4, 3, 3))),
):
    msgs = []
    for d in ("cpu", dev):
        try:
            fn(*[a.to(d) for a in args])
            msgs.append(None)
        except Exception as e:
            msgs.append(str(e).splitlines()[0])
    errors[name] = msgs
tiers = {}
ft.reset_op_stats()
check("stats_probe_conv", lambda x, w: F.conv2d(x, w), rg(1, 2, 5, 5), rg(3, 2, 3, 3))
check("stats_probe_conv3d", lambda x, w: F.conv_transpose3d(F.conv3d(x, w), w),
      rg(1, 2, 4, 4, 4), rg(3, 2, 2, 2, 2))
# .sum().backward() hands convolution_backward an all-stride-0 grad_output.
check("stats_probe_conv_sum", lambda x, w: F.conv2d(x, w).sum(), rg(2, 2, 5, 5), rg(3, 2, 3, 3))
check("stats_probe_bn", lambda x: F.batch_norm(x, None, None, training=True), rg(4, 3))
check("stats_probe_bn_legit", lambda x: legit(x, None, None, *legit_stats[x.device.type], True, 0.1, 1e-5)[0],
      rg(4, 3, 5))
check("stats_probe_bn_legit_no_stats",
      lambda x: torch.ops.aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.1, 1e-5)[0],
      rg(4, 3))
check("stats_probe_ln", lambda x: F.layer_norm(x, (3,)), rg(4, 3))
check("stats_probe_ce", lambda s, t: F.cross_entropy(s, t), rg(4, 3), torch.tensor([0, 2, 1, 1]))
check("stats_probe_mse", lambda a, b: F.mse_loss(a, b), rg(4, 3), rg(4, 3))
check("stats_probe_bce", lambda p, y: F.binary_cross_entropy(p, y), torch.rand(4, dtype=torch.float64).requires_grad_(), torch.rand(4, dtype=torch.float64))
check("stats_probe_smooth_l1", lambda a, b: F.smooth_l1_loss(a, b), rg(4), rg(4))
check("stats_probe_huber", lambda a, b: F.huber_loss(a, b), rg(4), rg(4))
check("stats_probe_scatter", lambda b, s, i: torch.scatter_add(b, 0, i, s), base, src, rows)
check("stats_probe_roll", lambda x: torch.roll(x, 1, 0), rg(3, 4))
check("stats_probe_var", lambda x: torch.var(x, 0), rg(3, 4))
check("stats_probe_std", lambda x: torch.std(x), rg(3, 4))
check("stats_probe_addbmm", lambda s, a, b: torch.addbmm(s, a, b), rg(3, 5), rg(4, 3, 2), rg(4, 2, 5))
check("stats_probe_clamp", lambda x, lo: torch.clamp(x, min=lo), rg(3, 4), rg(4))
check("stats_probe_clamp_", lambda x, lo: torch.clamp_(x * 1, min=lo), rg(3, 4), rg(4))
check("stats_probe_nan_to_num", lambda x: torch.nan_to_num(x), special)
check("stats_probe_cumsum", lambda x: torch.cumsum(x, 0), rg(6, 2))
check("stats_probe_cumsum_", lambda x: (x * 1).cumsum_(0), rg(6, 2))
check("stats_probe_emb", lambda w, i: F.embedding(i, w), rg(5, 3), torch.tensor([1, 4]))
print(json.dumps({"bad": bad, "declined": declined, "errors": errors, "stats": ft.op_stats()}))
"""


def _available(backend: str) -> str | None:
    proc = python_subprocess(
        f"import flagos_torchfl as ft; ft.initialize({backend!r})", timeout=120
    )
    return None if proc.returncode == 0 else proc.stderr.strip()[-300:]


@pytest.fixture(params=["host", "opencl"])
def backend(request):
    if request.param == "opencl":
        why = _available("opencl")
        if why:
            pytest.skip(f"opencl unavailable: {why}")
    return request.param


def test_composites_match_cpu(backend, tmp_path):
    env = HOST_ROUTES if backend == "host" else OPENCL_ROUTES
    proc = python_subprocess(
        CHECKS.replace("BACKEND", repr(backend)), timeout=900, FLAGOS_CACHE_DIR=str(tmp_path), **env
    )
    r = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert r["bad"] == {}, r["bad"]
    # The probes ran every composite op on the composite tier, none on the host.
    overloads = (
        "aten::convolution",
        "aten::convolution_backward",
        "aten::native_batch_norm",
        "aten::native_batch_norm_backward",
        "aten::_native_batch_norm_legit",
        "aten::_native_batch_norm_legit.no_stats",
        "aten::native_layer_norm",
        "aten::native_layer_norm_backward",
        "aten::nll_loss_forward",
        "aten::nll_loss_backward",
        "aten::mse_loss",
        "aten::mse_loss_backward",
        "aten::embedding_dense_backward",
        "aten::binary_cross_entropy",
        "aten::binary_cross_entropy_backward",
        "aten::smooth_l1_loss",
        "aten::smooth_l1_loss_backward.grad_input",  # out= overload: composite + copy
        "aten::huber_loss",
        "aten::scatter_add",
        "aten::roll",
        "aten::var.correction",
        "aten::std.correction",
        "aten::addbmm",
        "aten::clamp.Tensor",
        "aten::clamp_.Tensor",
        "aten::nan_to_num.out",
        "aten::cumsum",
        "aten::cumsum_",
    )
    # (host's generator also takes functional scatters itself: "generated".)
    for name in overloads:
        tiers = r["stats"].get(name, {})
        ran = tiers.get("decomposition", 0) + tiers.get("generated", 0)
        assert ran > 0 and not tiers.get("fallback"), (name, tiers)
    # Inside: the GEMMs ran on a kernel, not on the host.
    assert not r["stats"].get("aten::bmm", {}).get("fallback"), r["stats"].get("aten::bmm")
    # Declined calls: counted host fallbacks, CPU's own errors.
    assert r["declined"] >= 1
    for name, (cpu, flagos) in r["errors"].items():
        assert cpu is not None and flagos == cpu, (name, cpu, flagos)
