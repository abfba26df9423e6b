"""torch.autocast on the flagos device follows the dtypes torch.flagos supports."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_close_to_cpu


def test_supported_dtypes():
    assert torch.flagos.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_matmul_runs_in_lower_precision_like_cpu(dtype):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(16, 32, generator=g), torch.randn(32, 8, generator=g)
    with torch.autocast("flagos", dtype=dtype):
        out = a.to("flagos") @ b.to("flagos")
    with torch.autocast("cpu", dtype=dtype):
        expected = a @ b
    assert out.dtype == dtype == expected.dtype
    assert_close_to_cpu(out, expected, rtol=1e-2, atol=1e-2)


def test_autocast_leaves_fp32_ops_alone():
    x = torch.randn(8, 8, device="flagos")
    with torch.autocast("flagos", dtype=torch.bfloat16):
        assert (x + 1).dtype == torch.float32
        assert torch.softmax(x @ x, dim=1).dtype in (torch.float32, torch.bfloat16)
