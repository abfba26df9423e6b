"""Note [Unboxed entries]: the hottest overloads have typed kernels in front of the bridge.

The entries borrow their arguments and run the same checks and kernel tiers
as the boxed kernel; every other way in (torch.ops, a Python dispatch mode,
the later tiers, autocompare) must give the same results, counts and errors.
"""

from __future__ import annotations

import json
import sys

import flagos_torchfl as ft
import pytest
import torch
from conftest import BACKEND, check_ok
from torch.utils._python_dispatch import TorchDispatchMode

if BACKEND not in ("host", "opencl"):
    pytest.skip("flagos backends with the catalog", allow_module_level=True)

DEV = torch.device("flagos")

# One call per entry kind: functional, in place, scalar arguments, dims.
CALLS = {
    "add.Tensor": lambda a, b: a + b * 2,
    "add_.Tensor": lambda a, b: a.clone().add_(b, alpha=0.5),
    "mul_.Tensor": lambda a, b: a.clone().mul_(b),
    "relu": lambda a, b: torch.relu(a),
    "mm": lambda a, b: a @ b.t(),
    "addmm": lambda a, b: torch.addmm(a, a, b, beta=0.5, alpha=2),
    "sum": lambda a, b: a.sum(),
    "sum.dim_IntList": lambda a, b: a.sum(-1, keepdim=True),
    "mean.dim": lambda a, b: a.mean((0, 1)),
    "threshold_backward": lambda a, b: torch.ops.aten.threshold_backward(a, b, 0.0),
}


def pair():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 5, generator=g), torch.randn(5, 5, generator=g)
    return (a, b), (a.to(DEV), b.to(DEV))


@pytest.mark.parametrize("name", CALLS)
def test_entries_agree_with_cpu_and_count_once(name):
    (a, b), (da, db) = pair()
    ft.reset_op_stats()
    got = CALLS[name](da, db)
    torch.testing.assert_close(got.cpu(), CALLS[name](a, b), rtol=1e-5, atol=1e-5)
    calls = sum(ft.op_stats().get(f"aten::{name}", {}).values())
    assert calls == 1, ft.op_stats()


class Recorder(TorchDispatchMode):
    """A Python mode: every call reaches the kernel boxed."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", CALLS)
def test_boxed_callers_get_the_same_results(name):
    (_, _), (da, db) = pair()
    want = CALLS[name](da, db).cpu()
    with Recorder() as mode:
        got = CALLS[name](da, db)
    assert any(name.split(".")[0] in op for op in mode.ops), mode.ops
    torch.testing.assert_close(got.cpu(), want)


def test_torch_ops_and_in_place_identity():
    (a, b), (da, db) = pair()
    torch.testing.assert_close(torch.ops.aten.add.Tensor(da, db, alpha=3).cpu(), a + 3 * b)
    out = da.clone()
    assert out.add_(db) is out  # in place returns self, as the boxed kernel does
    assert torch.relu_(out) is out


def test_arguments_keep_their_reference_counts():
    # The entries borrow: a leak or a lost reference shows in the count.
    _, (da, db) = pair()
    before = sys.getrefcount(da), sys.getrefcount(db)
    for _ in range(100):
        da + db
        da.clone().add_(db)
        torch.relu(da)
        da.sum(0)
    assert (sys.getrefcount(da), sys.getrefcount(db)) == before


def test_errors_come_through_the_entry():
    (_, _), (da, _) = pair()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        da + torch.randn(5, 5)
    with pytest.raises(RuntimeError, match="must match the size"):
        da + torch.randn(3, device=DEV)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.randn(5, 1, device=DEV).add_(da)
    with pytest.raises(IndexError, match="Dimension out of range"):
        da.sum(3)


LATER_TIERS = f"""
import json, torch, flagos_torchfl as ft
ft.initialize({BACKEND!r})
torch.ops.flagos._set_autocompare("1")
a, b = torch.randn(4, 4), torch.randn(4, 4)
da, db = a.to("flagos"), b.to("flagos")
torch.testing.assert_close((da + db).cpu(), a + b)   # forced to the host tier
torch.testing.assert_close((da @ db).cpu(), a @ b)   # checked by autocompare
torch.testing.assert_close(torch.relu(da).cpu(), torch.relu(a))
report = {{r["op"]: r["checked"] for r in map(json.loads, torch.ops.flagos._autocompare_report())}}
print(json.dumps({{"stats": ft.op_stats(), "checked": report}}))
"""


def test_host_tier_and_autocompare_through_the_entry(run_python):
    out = check_ok(run_python(LATER_TIERS, FLAGOS_FORCE_FALLBACK="^add\\..*"))
    r = json.loads(out.strip().splitlines()[-1])
    assert r["stats"]["aten::add.Tensor"] == {"fallback": 1}, r
    assert r["checked"].get("aten::mm", 0) >= 1, r
