"""The host fallback tier: CPU-equal results (autograd included), counted and logged.

The operators used here have no device kernel or composite yet
(tests/python/opdb_fallbacks.txt lists them), so they take the host fallback
on every backend. When one of them leaves the host, pick another from that
list.
"""

from __future__ import annotations

import json
import re

import flagos_torchfl as ft
import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close_to_cpu, check_ok

# name (a substring of the ATen operator names it reaches) -> function
FALLBACK_OPS = {
    "grid_sampler_2d": lambda x: F.grid_sample(
        x.reshape(1, 1, 6, 5),
        torch.linspace(-0.9, 0.8, 12, device=x.device).reshape(1, 2, 3, 2),
        align_corners=False,
    ),
    "igammac": lambda x: torch.special.gammaincc(torch.full_like(x, 2.0), x.abs() + 0.1),
    "avg_pool3d": lambda x: F.avg_pool3d(x.reshape(1, 1, 6, 5, 1), (2, 2, 1)),
    "adaptive_max_pool3d": lambda x: F.adaptive_max_pool3d(x.reshape(1, 1, 6, 5, 1), (3, 2, 1)),
    "upsample_trilinear3d": lambda x: F.interpolate(
        x.reshape(1, 1, 6, 5, 1), scale_factor=2, mode="trilinear"
    ),
    "upsample_bicubic2d": lambda x: F.interpolate(
        x.reshape(1, 1, 6, 5), scale_factor=2, mode="bicubic"
    ),
}


def fallback_calls(name: str) -> int:
    """Calls on the fallback tier of the operators whose name contains `name`."""
    return sum(t.get("fallback", 0) for op, t in ft.op_stats().items() if name in op)


def inputs(requires_grad=False):
    cpu = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    dev = cpu.to("flagos")
    return cpu.requires_grad_(requires_grad), dev.requires_grad_(requires_grad)


@pytest.mark.parametrize("name", FALLBACK_OPS)
def test_fallback_result_equals_cpu(name):
    cpu, dev = inputs()
    assert_close_to_cpu(FALLBACK_OPS[name](dev), FALLBACK_OPS[name](cpu))


@pytest.mark.parametrize("name", FALLBACK_OPS)
def test_fallback_gradients_equal_cpu(name):
    cpu, dev = inputs(requires_grad=True)
    (FALLBACK_OPS[name](cpu) ** 2).sum().backward()
    out = FALLBACK_OPS[name](dev)
    assert out.grad_fn is not None
    (out**2).sum().backward()
    assert_close_to_cpu(dev.grad, cpu.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", FALLBACK_OPS)
def test_op_stats_count_each_fallback_call(name):
    _, dev = inputs()
    before = fallback_calls(name)
    FALLBACK_OPS[name](dev)
    per_call = fallback_calls(name) - before
    assert per_call >= 1, ft.op_stats()
    for _ in range(3):
        FALLBACK_OPS[name](dev)
    assert fallback_calls(name) - before == 4 * per_call


def test_reset_op_stats():
    _, dev = inputs()
    FALLBACK_OPS["grid_sampler_2d"](dev)
    assert fallback_calls("grid_sampler_2d") >= 1
    ft.reset_op_stats()
    assert fallback_calls("grid_sampler_2d") == 0
    assert all(n == 0 for tiers in ft.op_stats().values() for n in tiers.values())


def test_op_stats_shape():
    _, dev = inputs()
    FALLBACK_OPS["upsample_bicubic2d"](dev)
    stats = ft.op_stats()
    assert stats and all(isinstance(op, str) and "::" in op for op in stats)
    for tiers in stats.values():
        assert set(tiers) <= set(ft.backend.TIERS)
        assert all(isinstance(n, int) and n >= 0 for n in tiers.values())


LOG_SNIPPET = """
    import json, torch, flagos_torchfl as ft
    ft.initialize("host")
    x = torch.randn(4, 5, device="flagos")
    for _ in range(3):
        torch.nn.functional.avg_pool3d(x.reshape(1, 1, 4, 5, 1), (2, 2, 1))
        torch.special.gammaincc(x.abs(), x.abs())
    stats = ft.op_stats()
    print(json.dumps(sorted(op for op, t in stats.items() if t.get("fallback"))))
"""


def fallback_lines(stderr: str, op: str) -> list[str]:
    """stderr lines naming exactly `op` (not another overload of it)."""
    pattern = re.compile(re.escape(op) + r"(?![\w.])")
    return [line for line in stderr.splitlines() if pattern.search(line)]


def test_log_fallback_logs_once_per_operator(run_python):
    proc = run_python(LOG_SNIPPET, FLAGOS_LOG_FALLBACK="1")
    ops = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert any("avg_pool3d" in op for op in ops) and any("igammac" in op for op in ops)
    for op in ops:
        assert len(fallback_lines(proc.stderr, op)) == 1, (op, proc.stderr)


def test_no_fallback_log_by_default(run_python):
    proc = run_python(LOG_SNIPPET)
    for op in json.loads(check_ok(proc).strip().splitlines()[-1]):
        assert fallback_lines(proc.stderr, op) == [], proc.stderr


# A native kernel returning FLAGOS_ERROR_FALLBACK asks for the host tier
# (status.h), so the core skips the generated and decomposition tiers. The
# test plugin (tests/plugins/host_fallback_plugin.c) is the host plugin with
# such relu and mse_loss kernels; without the request relu would run a
# generated kernel and mse_loss its composite.
PLUGIN_ASKS_HOST = """
import json, torch, torch.nn.functional as F, flagos_torchfl as ft
ft.initialize("test_host_fallback")
x, y = torch.randn(4, 5), torch.randn(4, 5)
d = torch.device("flagos")
xd, yd = x.to(d), y.to(d)
ft.reset_op_stats()
relu, mse = torch.relu(xd), F.mse_loss(xd, yd)
stats = ft.op_stats()
print(json.dumps({
    "results_ok": torch.equal(relu.cpu(), torch.relu(x))
    and torch.allclose(mse.cpu(), F.mse_loss(x, y)),
    "relu": stats.get("aten::relu", {}),
    "mse_loss": stats.get("aten::mse_loss", {}),
    "generated_launches": ft.kernel_cache_stats().get("launches", 0),
}))
"""


def test_plugin_fallback_status_goes_to_the_host_tier(run_python, test_plugin):
    proc = run_python(
        PLUGIN_ASKS_HOST, FLAGOS_PLUGIN_PATH=test_plugin("host_fallback"), FLAGOS_LOG_FALLBACK="1"
    )
    result = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert result["results_ok"], result
    assert result["relu"] == {"fallback": 1}, result
    assert result["mse_loss"] == {"fallback": 1}, result
    assert result["generated_launches"] == 0, result
    # Logged once like any fallback, saying that the plugin asked and why.
    (line,) = fallback_lines(proc.stderr, "aten::relu")
    assert "asked for the host (test plugin: this call is for the host)" in line, line


# Note [Argument errors come from the CPU]: a catalog operator whose meta
# kernel rejects the arguments goes on to the host tier, which raises the
# CPU kernel's own error (PyTorch's Python meta kernel for mv words it
# differently), and the call is counted as a fallback.
BAD_CALLS = {
    "mv": lambda d: torch.mv(torch.randn(3, 4, device=d), torch.randn(5, device=d)),
    "mm": lambda d: torch.mm(torch.randn(3, 4, device=d), torch.randn(5, 2, device=d)),
    "add": lambda d: torch.randn(3, device=d) + torch.randn(4, device=d),
    "softmax": lambda d: torch.softmax(torch.randn(3, device=d), dim=3),
    "bitwise_and": lambda d: torch.randn(3, device=d).bitwise_and(torch.randn(3, device=d)),
}


@pytest.mark.parametrize("name", BAD_CALLS)
def test_argument_errors_equal_cpu(name):
    errors = []
    for device in ("cpu", "flagos"):
        with pytest.raises(Exception) as info:
            BAD_CALLS[name](device)
        errors.append((type(info.value), str(info.value).splitlines()[0]))
    assert errors[1] == errors[0]
    ft.reset_op_stats()
    with pytest.raises(errors[0][0]):
        BAD_CALLS[name]("flagos")
    assert fallback_calls(name) == 1
