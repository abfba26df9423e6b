"""A flagos tensor combined with a CPU tensor raises CUDA's same-device error.

Note [Tensors on one device] (csrc/dispatch/core/device_check.h). Before, `f + c`
ran silently on the host tier (`c + f` even returned a CPU tensor) and
`c.add_(f)` died with a NotImplementedError from _copy_from_and_resize. The
expected column is what PyTorch's CUDA kernels do with a cuda and a CPU tensor.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def f(*s):
    return torch.ones(*s, device="flagos")


def c(*s):
    return torch.ones(*s)


MIXED = {  # CUDA: "Expected all tensors to be on the same device"
    "f + c": lambda: f(4) + c(4),
    "c + f": lambda: c(4) + f(4),
    "c.add_(f)": lambda: c(4).add_(f(4)),
    "f.add_(c)": lambda: f(4).add_(c(4)),
    "add(out=cpu)": lambda: torch.add(f(4), f(4), out=c(4)),
    "sum(out=0-dim cpu)": lambda: torch.sum(f(4), 0, out=torch.empty(())),
    "mm": lambda: torch.mm(f(2, 2), c(2, 2)),
    "linear": lambda: F.linear(f(2, 3), c(4, 3)),
    "conv2d": lambda: F.conv2d(f(1, 1, 4, 4), c(1, 1, 3, 3)),
    "where": lambda: torch.where(f(4) > 0, c(4), f(4)),
    "cat": lambda: torch.cat([f(2), c(2)]),
    "index_select(cpu index)": lambda: f(4).index_select(0, torch.tensor([0, 1])),
    "embedding(cpu indices)": lambda: F.embedding(torch.tensor([0]), f(3, 2)),
    "layer_norm(cpu weight)": lambda: F.layer_norm(f(2, 3), (3,), c(3)),
    "atan2, a host-fallback op": lambda: torch.atan2(f(3), c(3)),
}

ALLOWED = {  # CUDA allows these
    "f + 0-dim cpu": (lambda: f(4) + torch.tensor(2.0), [3.0] * 4),
    "0-dim cpu + f": (lambda: torch.tensor(2.0) * f(4), [2.0] * 4),
    "lerp_(0-dim cpu weight)": (lambda: f(2).lerp_(f(2) * 3, torch.tensor(0.5)), [2.0] * 2),
    "clamp(0-dim cpu max)": (lambda: (f(2) * 5).clamp(max=torch.tensor(2.0)), [2.0] * 2),
    "f[cpu indices]": (
        lambda: (f(4) * torch.arange(4.0).to("flagos"))[torch.tensor([3, 1])],
        [3.0, 1.0],
    ),
    "index_put_(cpu indices)": (
        lambda: f(3).index_put_((torch.tensor([1]),), torch.tensor(5.0)),
        [1.0, 5.0, 1.0],
    ),
    "copy_ from cpu": (lambda: f(2).copy_(c(2) * 4), [4.0] * 2),
    "cpu.copy_ from flagos": (lambda: c(2).copy_(f(2) * 4), [4.0] * 2),
}


@pytest.mark.parametrize("case", list(MIXED))
def test_mixing_devices_raises_cudas_error(case):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device") as err:
        MIXED[case]()
    assert "cpu" in str(err.value) and "flagos:0" in str(err.value)


@pytest.mark.parametrize("case", list(ALLOWED))
def test_what_cuda_allows_still_works(case):
    run, expected = ALLOWED[case]
    out = run()
    want_device = "cpu" if case.startswith("cpu.") else "flagos"
    assert out.device.type == want_device
    assert out.cpu().tolist() == expected


def test_foreach_addcdiv_takes_its_cpu_scalars_tensor():
    # torch.optim passes `scalars` as a 1-D CPU tensor (documented so).
    xs = [f(2), f(3)]
    torch._foreach_addcdiv_(xs, [f(2), f(3)], [f(2) * 2, f(3) * 2], torch.tensor([2.0, 4.0]))
    assert [x.cpu().tolist() for x in xs] == [[2.0] * 2, [3.0] * 3]
