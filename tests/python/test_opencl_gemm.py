"""The opencl plugin's GEMMs through torch: small ones on the plugin's own
kernel, larger ones on CLBlast (Note [Small GEMMs] in
backends/opencl/kernels/gemm_small.cpp), and FLAGOS_OPENCL_SMALL_GEMM.

Each case runs in a fresh interpreter on the opencl backend and compares
against CPU. The small kernel reads any strides, so a GEMM whose operand
has gaps in both strides (a[::2, ::2]) is native with it; CLBlast declines
it, and the bridge offers CLBlast a contiguous copy (Note [Contiguous
retry], prepared_call.cpp), so it stays native there too.
"""

from __future__ import annotations

import json

from conftest import NEEDS_OPENCL_PLUGIN, check_ok, python_subprocess

pytestmark = NEEDS_OPENCL_PLUGIN

CHECKS = r"""
import json, torch, flagos_torchfl as ft
ft.initialize("opencl")
dev = torch.device("flagos")
torch.manual_seed(0)
bad = {}

def close(name, got, want):
    tol = 1e-4 if want.dtype == torch.float32 else 1e-10
    try:
        torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol, equal_nan=True)
    except AssertionError as e:
        bad[name] = str(e)[:300]

for dt in (torch.float32, torch.float64):
    for m, k, n in [(1, 1, 1), (7, 5, 3), (16, 16, 16), (9, 33, 70), (64, 64, 64), (130, 70, 129)]:
        a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
        tag = f"{dt}/{m}x{k}x{n}"
        close("mm/" + tag, torch.mm(a.to(dev), b.to(dev)), a @ b)
        at, bt = a.t().contiguous().to(dev).t(), b.t().contiguous().to(dev).t()
        close("mm_t/" + tag, torch.mm(at, bt), a @ b)
        bias = torch.randn(n, dtype=dt)
        close("addmm/" + tag, torch.addmm(bias.to(dev), a.to(dev), b.to(dev), beta=0.5, alpha=2),
              torch.addmm(bias, a, b, beta=0.5, alpha=2))
        c = torch.randn(m, n, dtype=dt)
        cd = c.to(dev)
        cd.addmm_(a.to(dev), b.to(dev), beta=1.5)
        close("addmm_/" + tag, cd, c.addmm(a, b, beta=1.5))
        nan = torch.full((m, n), float("nan"), dtype=dt)
        close("beta0/" + tag, torch.addmm(nan.to(dev), a.to(dev), b.to(dev), beta=0),
              torch.addmm(nan, a, b, beta=0))
    A, B = torch.randn(4, 6, 5, dtype=dt), torch.randn(4, 5, 9, dtype=dt)
    close("bmm", torch.bmm(A.to(dev), B.to(dev)), torch.bmm(A, B))
    Bb = B[:1].expand(4, 5, 9)
    close("bmm_bcast", torch.bmm(A.to(dev), Bb.to(dev)), torch.bmm(A, Bb))
    S = torch.randn(1, 6, 1, dtype=dt)
    close("baddbmm", torch.baddbmm(S.to(dev), A.to(dev), B.to(dev), beta=0.3, alpha=0.7),
          torch.baddbmm(S, A, B, beta=0.3, alpha=0.7))

# Gaps in both strides: only the small kernel takes these natively.
x, w = torch.randn(12, 10), torch.randn(5, 7)
before = ft.op_stats().get("aten::mm", {}).get("native", 0)
close("gappy", torch.mm(x.to(dev)[::2, ::2], w.to(dev)), x[::2, ::2] @ w)
native = ft.op_stats().get("aten::mm", {}).get("native", 0) - before

# A linear layer's forward and backward (addmm, mm with transposes).
lin = torch.nn.Linear(20, 10).double()
lind = torch.nn.Linear(20, 10).double().to(dev)
lind.load_state_dict(lin.state_dict())
inp = torch.randn(8, 20, dtype=torch.float64)
lin(inp).square().sum().backward()
lind(inp.to(dev)).square().sum().backward()
close("linear_grad_w", lind.weight.grad, lin.weight.grad)
close("linear_grad_b", lind.bias.grad, lin.bias.grad)
print(json.dumps({"bad": bad, "gappy_native": native}))
"""


def run_checks(**env: str) -> dict:
    return json.loads(check_ok(python_subprocess(CHECKS, **env)).strip().splitlines()[-1])


def test_small_kernel_matches_cpu_and_takes_any_strides():
    result = run_checks()
    assert result["bad"] == {}
    assert result["gappy_native"] == 1


def test_clblast_only_matches_cpu():
    result = run_checks(FLAGOS_OPENCL_SMALL_GEMM="0")
    assert result["bad"] == {}
    # CLBlast takes row- or column-major operands only: it declines the gappy
    # view, and runs the contiguous copy the bridge retries with.
    assert result["gappy_native"] == 1


def test_garbage_value_is_reported():
    proc = python_subprocess(
        "import flagos_torchfl as ft; ft.initialize('opencl')", FLAGOS_OPENCL_SMALL_GEMM="-3"
    )
    assert proc.returncode != 0
    assert "FLAGOS_OPENCL_SMALL_GEMM='-3'" in proc.stderr
