"""PyTorch's OpInfo database through torch.compile on flagos, against CPU.

Every unary and binary ufunc and every reduction of op_db that runs in
float32 on CPU, its first sample input, compiled with the default backend
(inductor's fused kernels; special functions and random draws as eager
flagos operators: graph_pass.py) on the backend under test, compared with
the same call on CPU. One compile per operator keeps it to a minute on host;
scripts/test.sh runs it on host only (each opencl compile costs PoCL ~1 s).
"""

from __future__ import annotations

import pytest
import torch
from flagos_torchfl import extension
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import BinaryUfuncInfo, ReductionOpInfo, UnaryUfuncInfo

pytestmark = pytest.mark.skipif(
    not extension.language(), reason="the backend has no compiler: no inductor backend"
)

RANDOM = {"nn.functional.rrelu"}  # random in training mode: CPU draws other numbers
FAMILIES = (UnaryUfuncInfo, BinaryUfuncInfo, ReductionOpInfo)
OPS = [
    op
    for op in op_db
    if isinstance(op, FAMILIES)
    and torch.float32 in op.supported_dtypes("cpu")
    and op.name not in RANDOM
]


def _to(value):
    if isinstance(value, torch.Tensor):
        return value.to("flagos")
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v) for v in value)
    return value


def _compare(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.device.type == "flagos"
        torch.testing.assert_close(
            got.cpu(), want, rtol=1e-3, atol=1e-4, equal_nan=True, check_stride=False
        )
    elif isinstance(want, (list, tuple)):
        for g, w in zip(got, want, strict=True):
            _compare(g, w)


@pytest.mark.parametrize("op", OPS, ids=lambda op: f"{op.name}.{op.variant_test_name}".strip("."))
def test_compiled_op_matches_cpu(op):
    sample = next(iter(op.sample_inputs("cpu", torch.float32)), None)
    if sample is None:
        pytest.skip("no float32 sample")
    args, kwargs = [sample.input, *sample.args], dict(sample.kwargs)
    try:
        want = op(*args, **kwargs)
    except Exception as err:  # noqa: BLE001  (a sample CPU itself refuses)
        pytest.skip(f"CPU refuses the sample: {err}")
    torch._dynamo.reset()
    got = torch.compile(lambda *a, **k: op(*a, **k))(
        *_to(args), **{k: _to(v) for k, v in kwargs.items()}
    )
    _compare(got, want)
