"""Note [Shape classes]: a new shape of a known class skips the meta kernel.

The output of a functional pointwise overload over contiguous inputs is the
broadcast shape, contiguous; once a real meta call proved that for a class
(dtypes, 0-dim-ness, scalar values), new shapes in the class are synthesized.
Each case checks the counters (no meta call after the first shape) and the
values, dtypes and strides against CPU; the cases the rule must not cover
(a strided input, an in-place call that would grow self, a broadcast
error) are checked too. Row operators (softmax and its kin, layer_norm) and
reductions (output shape from dim and keepdim) have classes of their own,
tested the same way below. Each runs in a fresh process with an empty cache
folder, so no earlier process's shape store (Note [Shape inference across
processes]) answers for it.
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
def compare_new_shapes(fn, learn, shapes):
    # The class is learned on @p learn; then each new shape against CPU
    # (values, dtype, shape, strides), and the counters around them.
    torch.manual_seed(0)
    fn(torch.randn(learn).to(DEV))
    before = counters()
    for shape in shapes:
        x = torch.randn(shape)
        got, want = fn(x.to(DEV)), fn(x)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, shape)
        assert got.stride() == want.stride(), (got.stride(), want.stride())
        torch.testing.assert_close(got.cpu(), want)
    print(json.dumps({{"before": before, "after": counters()}}))
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
    "in place": lambda x: x.clone().mul_(2).add_(x, alpha=0.5).sigmoid_(),
}
# Each op's class is learned on the first shape (rank does not matter).
compare_new_shapes(CASES[sys.argv[1]], (2, 2, 2, 2), [(3, 5), (7, 11, 2), (13,), (1, 9), (4, 1, 6)])
"""
)


@pytest.mark.parametrize(
    "case", ["chain", "int to float", "comparison", "broadcast", "cpu scalar", "in place"]
)
def test_new_shapes_of_a_class_skip_the_meta_kernel(case, run_python, tmp_path):
    assert_new_shapes_skip_the_meta_kernel(CLASS_CASE, case, run_python, tmp_path)


def assert_new_shapes_skip_the_meta_kernel(script, case, run_python, tmp_path):
    """Runs @p script's @p case in a fresh process: no meta call and at least
    one class hit once the class was learned."""
    code = script.replace("sys.argv[1]", repr(case))
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
c + a
c.clone().add_(c)  # the in-place class: self's shape is the broadcast shape
with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
    c.add_(a)  # self cannot grow: the meta kernel's error
i = torch.arange(6, device=DEV)
i.add_(1)  # int64 += int: the class of this call
with pytest.raises(RuntimeError, match="can't be cast"):
    i.add_(1.5)  # another class (a float scalar): the meta kernel's dtype error
print("ok")
"""
)


def test_strided_inputs_errors_and_in_place_keep_the_meta_kernel(run_python, tmp_path):
    assert check_ok(run_python(EDGES, FLAGOS_CACHE_DIR=str(tmp_path))).strip().endswith("ok")


# Row operators and reductions (Note [Shape classes], ShapeRule): the class
# key holds each tensor's rank, so every case learns its classes on one
# shape of the rank its new shapes have.
ROW_REDUCE_CASE = (
    PRELUDE
    + """
import sys
F = torch.nn.functional
W, B = torch.randn(16), torch.randn(16)
def layer_norm(x):
    w, b = (W, B) if x.device.type == "cpu" else (W.to(DEV), B.to(DEV))
    return F.layer_norm(x, (16,), w, b, 1e-5)
def softmax_backward(x):
    y = x.softmax(-1)
    return torch.ops.aten._softmax_backward_data(x.cos(), y, -1, x.dtype)
def log_softmax_backward(x):
    y = x.log_softmax(1)
    return torch.ops.aten._log_softmax_backward_data(x.cos(), y, 1, x.dtype)
CASES = {
    "softmax": lambda x: x.softmax(-1),
    "log_softmax dim 0": lambda x: torch.log_softmax(x, 0),
    "softmax float64": lambda x: x.double().softmax(1),
    "softmax backward": softmax_backward,
    "log_softmax backward": log_softmax_backward,
    "sum keepdim": lambda x: x.sum(-1, keepdim=True),
    "sum dims": lambda x: x.sum((0, -1)),
    "sum all": lambda x: x.sum(),
    "sum to float64": lambda x: x.sum(1, dtype=torch.float64),
    "int sum": lambda x: (x * 10).to(torch.int32).sum(-1),
    "mean": lambda x: x.mean(1),
    "amax keepdim": lambda x: x.amax((1, 2), keepdim=True),
    "var": lambda x: x.var(-1),
    "argmax": lambda x: x.argmax(-1),
    "max dim": lambda x: x.max(1).values + x.max(1).indices,  # both outputs
    "layer_norm": layer_norm,
}
# The classes of this rank are learned on the first shape.
compare_new_shapes(CASES[sys.argv[1]], (2, 3, 16), [(5, 7, 16), (1, 9, 16), (4, 1, 16), (3, 11, 16)])
"""
)

ROW_REDUCE = [
    "softmax",
    "log_softmax dim 0",
    "softmax float64",
    "softmax backward",
    "log_softmax backward",
    "sum keepdim",
    "sum dims",
    "sum all",
    "sum to float64",
    "int sum",
    "mean",
    "amax keepdim",
    "var",
    "argmax",
    "max dim",
    "layer_norm",
]


@pytest.mark.parametrize("case", ROW_REDUCE)
def test_new_shapes_of_row_and_reduction_classes_skip_the_meta_kernel(case, run_python, tmp_path):
    assert_new_shapes_skip_the_meta_kernel(ROW_REDUCE_CASE, case, run_python, tmp_path)


ROW_REDUCE_EDGES = (
    PRELUDE
    + """
import pytest
F = torch.nn.functional
x = torch.randn(6, 10)
d = x.to(DEV)
d.softmax(-1), d.sum(-1), d.amax(0), F.layer_norm(d, (10,))  # the classes are known

def meta_calls():
    return counters()["meta_calls"]

# A transposed view: not class-eligible, the meta kernel's layout.
before = meta_calls()
got = d.t().softmax(-1)
torch.testing.assert_close(got.cpu(), x.t().softmax(-1))
assert got.stride() == x.t().softmax(-1).stride()
assert d.t().sum(-1).shape == (10,)
assert meta_calls() > before

# Errors come from the meta kernel or the CPU, as without classes.
with pytest.raises(IndexError, match="Dimension out of range"):
    d.sum(2)
with pytest.raises(RuntimeError, match="appears multiple times"):
    d.sum((0, 0))
with pytest.raises(IndexError, match="Dimension out of range"):
    d.softmax(3)
with pytest.raises(RuntimeError, match="normalized_shape"):
    F.layer_norm(d, (7,))

# Empty tensors keep the meta path: its checks and its shapes.
e = torch.empty(0, 10)
with pytest.raises(IndexError, match="non-zero size"):
    e.to(DEV).amax(0)
before = meta_calls()
assert e.to(DEV).sum(-1).shape == e.sum(-1).shape == (0,)
assert e.to(DEV).softmax(-1).shape == (0, 10)
assert meta_calls() > before

# In-place and out= overloads never synthesize.
out = torch.empty(6, device=DEV)
before = meta_calls()
torch.sum(d, -1, out=out)
torch.testing.assert_close(out.cpu(), x.sum(-1))
assert meta_calls() > before
print("ok")
"""
)


def test_row_and_reduction_edges_keep_the_meta_kernel(run_python, tmp_path):
    out = check_ok(run_python(ROW_REDUCE_EDGES, FLAGOS_CACHE_DIR=str(tmp_path)))
    assert out.strip().endswith("ok")
