"""Note [Shape classes]: a new shape of a known pointwise class skips the meta kernel.

The output of a functional pointwise overload over contiguous inputs is the
broadcast shape, contiguous; once a real meta call proved that for a class
(dtypes, 0-dim-ness, scalar values), new shapes in the class are synthesized.
Each case checks the counters (no meta call after the first shape) and the
values, dtypes and strides against CPU; the cases the rule must not cover
(a strided input, in-place, a broadcast error) are checked too. Each runs in
a fresh process with an empty cache folder, so no earlier process's shape
store (Note [Shape inference across processes]) answers for it.
"""

from __future__ import annotations

import json

import pytest
from conftest import BACKEND, check_ok

if BACKEND not in ("host", "opencl"):
    pytest.skip("flagos backends with the catalog", allow_module_level=True)

PRELUDE = f"""
import json, torch, flagos_torchfl as ft
ft.initialize({BACKEND!r})
DEV = torch.device("flagos")
def counters():
    return json.loads(torch.ops.flagos._shape_store_info())
"""

CLASS_CASE = (
    PRELUDE
    + """
import sys
CASES = {
    "chain": lambda x: torch.nn.functional.gelu(x * 1.5 + 2).sigmoid() * x,
    "int to float": lambda x: (x * 10).to(torch.int32) * 0.5,
    "comparison": lambda x: x > 0.25,
    "broadcast": lambda x: x * x.flatten()[:1],  # a contiguous 1-element operand
    "cpu scalar": lambda x: x * torch.tensor(3.0),
}
fn = CASES[sys.argv[1]]
torch.manual_seed(0)
fn(torch.randn(2, 2, 2, 2).to(DEV))  # each op's class is learned here (rank does not matter)
before = counters()
for shape in [(3, 5), (7, 11, 2), (13,), (1, 9), (4, 1, 6)]:
    x = torch.randn(shape)
    got, want = fn(x.to(DEV)), fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, shape)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    torch.testing.assert_close(got.cpu(), want)
print(json.dumps({"before": before, "after": counters()}))
"""
)


@pytest.mark.parametrize("case", ["chain", "int to float", "comparison", "broadcast", "cpu scalar"])
def test_new_shapes_of_a_class_skip_the_meta_kernel(case, run_python, tmp_path):
    code = CLASS_CASE.replace("sys.argv[1]", repr(case))
    out = check_ok(run_python(code, FLAGOS_CACHE_DIR=str(tmp_path)))
    r = json.loads(out.strip().splitlines()[-1])
    assert r["after"]["meta_calls"] == r["before"]["meta_calls"], r
    assert r["after"]["class_hits"] > r["before"]["class_hits"], r


EDGES = (
    PRELUDE
    + """
import pytest
x = torch.randn(6, 10)
(x.to(DEV) * 2).sigmoid()  # the contiguous classes are known
before = counters()
xt = x.to(DEV).t()  # a transposed view: not class-eligible, the meta kernel's layout
got = (xt * 2).sigmoid()
assert got.stride() == (x.t() * 2).sigmoid().stride(), got.stride()
torch.testing.assert_close(got.cpu(), (x.t() * 2).sigmoid())
assert counters()["meta_calls"] > before["meta_calls"]

a, b = torch.randn(3, 4, device=DEV), torch.randn(5, device=DEV)
a + a  # the class of (float, float) add is known
with pytest.raises(RuntimeError, match=r"size of tensor a \\(4\\) must match"):
    a + b
c = torch.randn(3, 1, device=DEV)
c + a  # the functional class; in-place is never class-eligible
with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
    c.add_(a)
print("ok")
"""
)


def test_strided_inputs_errors_and_in_place_keep_the_meta_kernel(run_python, tmp_path):
    assert check_ok(run_python(EDGES, FLAGOS_CACHE_DIR=str(tmp_path))).strip().endswith("ok")
