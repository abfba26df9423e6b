"""The two custom-kernel examples against CPU: examples/fused_rmsnorm.py, examples/flash_attention.py.

Forward and backward on the backend under test (host: the C sources; opencl:
the OpenCL C sources), over shapes around the kernels' tile and work-group
sizes; as torch.library custom ops (opcheck: schema, fake tensors, autograd
registration), under torch.compile and with dynamic shapes. Every check also
asserts that the custom kernel really launched (fx.launches()), so a silent
fallback to the eager composition cannot pass.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from conftest import BACKEND, REPO, check_ok, clean_env
from flagos_torchfl import extension as fx

sys.path.insert(0, str(REPO / "examples"))
import flash_attention as fa  # noqa: E402
import fused_rmsnorm as rn  # noqa: E402

# Differences from CPU are rounding of float32 sums in another order; rows
# here are at most a few thousand long (|x| ~ 4): 1e-4 is ~50x the largest
# difference seen, and a wrong index or a missing rescale is off by O(1).
ATOL = 1e-4


def _launched(fn):
    before = fx.launches()
    out = fn()
    assert fx.launches() > before, "the custom kernel did not run"
    return out


@pytest.mark.parametrize("shape", [(1, 1), (3, 63), (5, 64), (7, 65), (2, 3, 1000), (4, 4097)])
def test_rms_norm_forward_and_backward_match_cpu(shape):
    torch.manual_seed(0)
    x, w = torch.randn(shape), torch.randn(shape[-1])
    dy = torch.randn(shape)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    rn.reference(xc, wc).backward(dy)
    xf, wf = x.to("flagos").requires_grad_(), w.to("flagos").requires_grad_()
    y = _launched(lambda: rn.rms_norm(xf, wf))
    _launched(lambda: y.backward(dy.to("flagos")))
    torch.testing.assert_close(y.detach().cpu(), rn.reference(x, w), rtol=0, atol=ATOL)
    torch.testing.assert_close(xf.grad.cpu(), xc.grad, rtol=0, atol=ATOL)
    # dw sums over every row: relative to its scale.
    torch.testing.assert_close(wf.grad.cpu(), wc.grad, rtol=1e-4, atol=ATOL * wc.grad.abs().max())


def test_rms_norm_takes_strided_inputs():
    x = torch.randn(100, 48)
    w = torch.randn(100)
    y = _launched(lambda: rn.rms_norm(x.to("flagos").t(), w.to("flagos")))
    torch.testing.assert_close(y.cpu(), rn.reference(x.t(), w), rtol=0, atol=ATOL)


def test_rms_norm_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="float32"):
        rn.rms_norm(
            torch.randn(2, 4, device="flagos", dtype=torch.float64), torch.randn(4, device="flagos")
        )
    with pytest.raises(ValueError, match="does not match"):
        rn.rms_norm(torch.randn(2, 4, device="flagos"), torch.randn(5, device="flagos"))


CASES = [
    # (batch, heads, s_q, s_k, head_dim, causal)
    (1, 1, 1, 1, 1, False),
    (1, 1, 1, 1, 1, True),
    (2, 3, 77, 77, 64, False),
    (2, 3, 77, 77, 64, True),
    (1, 2, 33, 33, 17, True),
    (1, 1, 16, 16, 8, True),
    (1, 2, 20, 45, 8, False),
    (1, 2, 45, 20, 8, True),
    (1, 1, 130, 130, 128, True),
]


@pytest.mark.parametrize("b,h,s_q,s_k,d,causal", CASES)
def test_flash_attention_forward_and_backward_match_cpu(b, h, s_q, s_k, d, causal):
    torch.manual_seed(0)
    q = torch.randn(b, h, s_q, d)
    k, v = torch.randn(b, h, s_k, d), torch.randn(b, h, s_k, d)
    do = torch.randn_like(q)
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    out_c = torch.nn.functional.scaled_dot_product_attention(qc, kc, vc, is_causal=causal)
    out_c.backward(do)
    qf, kf, vf = (t.to("flagos").requires_grad_() for t in (q, k, v))
    out_f = _launched(lambda: fa.flash_attention(qf, kf, vf, causal=causal))
    out_f.backward(do.to("flagos"))
    torch.testing.assert_close(out_f.detach().cpu(), out_c.detach(), rtol=0, atol=ATOL)
    for got, want in ((qf.grad, qc.grad), (kf.grad, kc.grad), (vf.grad, vc.grad)):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=ATOL)


def test_flash_attention_keeps_large_scores_finite():
    """The online softmax subtracts the running maximum: scores of ~1e3 do not overflow exp."""
    q = torch.randn(1, 1, 40, 16) * 30
    k, v = torch.randn(1, 1, 40, 16) * 30, torch.randn(1, 1, 40, 16)
    out = fa.flash_attention(q.to("flagos"), k.to("flagos"), v.to("flagos"), causal=True).cpu()
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, fa.reference(q, k, v, causal=True), rtol=0, atol=ATOL)


def test_flash_attention_bad_input_is_a_clear_error():
    t = torch.randn(1, 1, 4, 8, device="flagos")
    with pytest.raises(TypeError, match="float32"):
        fa.flash_attention(t.double(), t.double(), t.double())
    with pytest.raises(ValueError, match="takes q"):
        fa.flash_attention(t, t[:, :, :, :4], t)
    with pytest.raises(ValueError, match="head dim 300"):
        big = torch.randn(1, 1, 2, 300, device="flagos")
        fa.flash_attention(big, big, big)


# opcheck's test_autograd_registration is "NYI devices other than
# CPU/CUDA/XPU"; the backward tests above check the autograd formulas.
OPCHECKS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def test_the_ops_pass_torch_library_opcheck():
    """Schema and fake-tensor registrations agree with the real kernels, also under AOT dispatch."""
    x, w = torch.randn(6, 70, device="flagos"), torch.randn(70, device="flagos")
    args = (x.requires_grad_(), w.requires_grad_(), 1e-6)
    torch.library.opcheck(rn.rms_norm_fwd, args, test_utils=OPCHECKS)
    q, k, v = (torch.randn(1, 2, 19, 8, device="flagos", requires_grad=True) for _ in range(3))
    args = (q, k, v, True, 1 / math.sqrt(8))
    torch.library.opcheck(fa.flash_attn_fwd, args, test_utils=OPCHECKS)


class _Block(torch.nn.Module):
    """An RMSNorm + causal attention + RMSNorm block over the custom ops."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.Parameter(torch.randn(dim))
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.norm2 = torch.nn.Parameter(torch.randn(dim))

    def forward(self, x, fused=True):
        norm = rn.rms_norm if fused else rn.reference
        attn = fa.flash_attention if fused else fa.reference
        b, s, dim = x.shape
        qkv = self.qkv(norm(x, self.norm1)).view(b, s, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        y = attn(q, k, v, causal=True).transpose(1, 2).reshape(b, s, dim)
        return norm(x + y, self.norm2)


def _grads(model, x, **kw):
    model.zero_grad()
    model(x, **kw).square().sum().backward()
    return [p.grad.detach().cpu().clone() for p in model.parameters()]


def test_the_ops_under_torch_compile_match_eager_and_cpu():
    torch.manual_seed(0)
    cpu = _Block()
    dev = _Block().to("flagos")
    dev.load_state_dict(cpu.state_dict())
    compiled = torch.compile(dev, fullgraph=True)
    x = torch.randn(2, 21, 32)
    want = _grads(cpu, x, fused=False)
    got = _launched(lambda: _grads(compiled, x.to("flagos")))
    eager = _grads(dev, x.to("flagos"))
    for g, e, w in zip(got, eager, want, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g, w, rtol=1e-3, atol=1e-3 * w.abs().max())


def test_the_ops_under_torch_compile_with_dynamic_shapes():
    torch._dynamo.reset()
    torch.manual_seed(0)
    cpu = _Block()
    dev = _Block().to("flagos")
    dev.load_state_dict(cpu.state_dict())
    compiled = torch.compile(dev, dynamic=True)
    for batch, seq in ((1, 5), (3, 17), (2, 40)):
        x = torch.randn(batch, seq, 32)
        with torch.no_grad():
            got = _launched(lambda x=x: compiled(x.to("flagos"))).cpu()
            want = cpu(x, fused=False)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("script", ["fused_rmsnorm.py", "flash_attention.py"])
def test_the_example_scripts_check_themselves(script):
    """As a user runs them: `python examples/<script>` on this backend, exit 0 and OK."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / script)],
        env=clean_env(FLAGOS_BACKEND=BACKEND),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = check_ok(proc)
    assert out.strip().splitlines()[-1] == "OK", out
    assert f"on {BACKEND} (" in out


def test_custom_kernels_show_in_torch_profiler_under_their_op():
    """The plugin's tracing table times custom launches too, linked to the custom op."""
    import flagos_torchfl as ft
    from torch.profiler import ProfilerActivity, profile

    if not ft.backend_info(verbose=False).get("device_activity"):
        pytest.skip("this torch has no Kineto PrivateUse1 registry")
    x, w = torch.randn(64, 300, device="flagos"), torch.randn(300, device="flagos")
    rn.rms_norm(x, w)
    torch.flagos.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(3):
            rn.rms_norm(x, w)
        torch.flagos.synchronize()
    rows = {e.key: e for e in prof.key_averages()}
    op = rows["flagos_examples::rms_norm_fwd"]
    assert op.count == 3
    assert op.device_time_total > 0
    assert rows["rms_norm_fwd"].self_device_time_total > 0  # the kernel, by its entry point
