"""Overlapping in-place and out= writes raise CPU's error (Note [Overlapping writes])."""

from __future__ import annotations

import pytest
import torch

CASES = {
    "partial overlap, in place": lambda t: t[1:].add_(t[:-1]),
    "write into an expanded tensor": lambda t: t[:3].clone().view(1, 3).expand(4, 3).mul_(2),
    "out= overlapping its input": lambda t: torch.add(t[:-1], 1, out=t[1:]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_overlapping_writes_raise_like_cpu(name):
    f = CASES[name]
    with pytest.raises(RuntimeError) as cpu_error:
        f(torch.arange(1.0, 7.0))
    before = torch.arange(1.0, 7.0, device="flagos")
    with pytest.raises(RuntimeError) as flagos_error:
        f(before)
    assert str(flagos_error.value).split(".")[0] == str(cpu_error.value).split(".")[0]
    assert before.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # nothing written


def test_exact_aliasing_stays_allowed():
    x = torch.arange(1.0, 7.0, device="flagos")
    x.add_(x)
    torch.mul(x, 2, out=x)
    assert x.cpu().tolist() == [4.0, 8.0, 12.0, 16.0, 20.0, 24.0]
