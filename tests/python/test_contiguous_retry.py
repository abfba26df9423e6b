"""Note [Contiguous retry] (prepared_call.cpp): a native kernel that declines
strided inputs is offered contiguous copies before the call leaves its tier.

The host plugin's embedding and adaptive-pool backward kernels take
contiguous gradients only; the gradient of a sum is a stride-0 expand.
"""

from __future__ import annotations

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=str(CORE_ERROR))


@pytest.fixture(autouse=True)
def host_only():
    import flagos_torchfl as ft

    ft.initialize()
    if ft.backend_info(verbose=False)["backend"] != "host":
        pytest.skip("the kernels named here are the host plugin's")


def _grads(device, fn, *shapes):
    torch.manual_seed(0)
    leaves = [torch.randn(s).to(device).requires_grad_() for s in shapes]
    fn(*leaves).sum().backward()  # sum: the incoming gradient is an expand
    return [t.grad.cpu() for t in leaves]


@pytest.mark.parametrize(
    "overload, fn, shapes",
    [
        (
            "aten::embedding_dense_backward",
            lambda w: torch.nn.functional.embedding(torch.tensor([1, 2, 1, 7], device=w.device), w),
            [(10, 3)],
        ),
        (
            "aten::_adaptive_avg_pool2d_backward",
            lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (2, 3)),
            [(2, 3, 5, 7)],
        ),
    ],
)
def test_a_strided_gradient_stays_on_the_native_kernel(overload, fn, shapes):
    import flagos_torchfl as ft

    ft.reset_op_stats()
    got = _grads("flagos", fn, *shapes)
    assert ft.op_stats()[overload] == {"native": 1}
    for g, want in zip(got, _grads("cpu", fn, *shapes), strict=True):
        torch.testing.assert_close(g, want)
