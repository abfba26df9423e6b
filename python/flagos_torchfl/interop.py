"""Zero-copy exchange between native `cuda` tensors and `flagos` tensors on the
same GPU, when flagos runs on the cuda plugin beside torch's own CUDA (its
memory is CUDA device memory in the same primary context: Note [Primary
contexts], backends/cuda/device.cpp). A CUDA-only library can then run on
flagos data, and flagos on a library's CUDA output, without a copy::

    import flagos_torchfl as ft
    from flagos_torchfl.interop import to_native, from_native

    ft.initialize("cuda")              # FLAGOS_ALIAS_CUDA=0 keeps "cuda" native
    x = torch.randn(1024, device="flagos")
    y = some_cuda_only_op(to_native(x))   # a torch.device("cuda", n) view of x's memory
    z = from_native(y)                    # a flagos view of y's memory

Each view shares the memory and keeps the source tensor alive for as long as
it lives; writes through either are seen by both.

Stream ordering: the two sides queue work on different streams. `to_native`
waits for the work flagos queued on the tensor's device (its current stream)
before returning, so native work queued after it sees finished data;
`from_native` waits for torch's current CUDA stream the same way. Work queued
on the source side *after* the exchange is not ordered with the other side:
synchronize yourself (`torch.flagos.synchronize()` / `torch.cuda.synchronize()`)
before reusing a tensor across the boundary.
"""

from __future__ import annotations

import torch

from . import _state

__all__ = ["from_native", "to_native"]


def _require_cuda_backend():
    C = _state.require_initialized()
    if _state.backend_name != "cuda":
        raise ValueError(
            "zero-copy exchange with native CUDA needs the cuda backend, not "
            f"'{_state.backend_name}': its memory is not CUDA memory"
        )
    if not (torch.backends.cuda.is_built() and torch.cuda.is_available()):
        raise ValueError("zero-copy exchange needs torch's own CUDA (a CUDA build that sees a GPU)")
    return C


def to_native(tensor: torch.Tensor) -> torch.Tensor:
    """A native `cuda` tensor viewing a flagos tensor's memory (no copy)."""
    if tensor.device.type != _state.DEVICE_TYPE:
        raise ValueError(f"to_native takes a flagos tensor, got one on {tensor.device}")
    C = _require_cuda_backend()
    index = tensor.device.index or 0
    torch.flagos.current_stream(index).synchronize()
    return C._view_on_device(tensor, "cuda", C._physical_device(index))


def from_native(tensor: torch.Tensor) -> torch.Tensor:
    """A flagos tensor viewing a native `cuda` tensor's memory (no copy)."""
    if tensor.device.type != "cuda" or not isinstance(tensor, torch.Tensor):
        raise ValueError(f"from_native takes a native cuda tensor, got one on {tensor.device}")
    C = _require_cuda_backend()
    physical = tensor.device.index or 0
    for logical in range(torch.flagos.device_count()):
        if C._physical_device(logical) == physical:
            break
    else:
        raise ValueError(f"cuda:{physical} is not one of flagos's devices (FLAGOS_VISIBLE_DEVICES)")
    torch.cuda.current_stream(physical).synchronize()
    return C._view_on_device(tensor, _state.DEVICE_TYPE, logical)
