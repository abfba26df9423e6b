"""Which values name a CUDA device, and the flagos device each one means.

Only whole device names are translated: the strings "cuda" and "cuda:N", a
torch.device of type cuda, and legacy "torch.cuda.<T>Tensor" type names.
Nothing is substring-replaced, so "cudagraphs", "cuda_graph" or a file
named "cuda:0.pt" pass through untouched. Integers already mean the current
accelerator, which is flagos (torch.device(0) == flagos:0), so they need no
translation.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .._state import DEVICE_TYPE

_CUDA_NAME = re.compile(r"cuda(?::(\d+))?")
_LEGACY_TYPE = re.compile(r"torch\.cuda\.(\w+Tensor)")


def is_cuda_device(value: Any) -> bool:
    """True for "cuda", "cuda:N" and torch.device("cuda"[, N]); False for anything else."""
    if type(value) is torch.device:
        return value.type == "cuda"
    return isinstance(value, str) and _CUDA_NAME.fullmatch(value) is not None


def to_flagos(value: Any) -> Any:
    """The flagos device a CUDA device value means; any other value unchanged.

    Strings stay strings and torch.devices stay torch.devices, so callers that
    format or compare the value keep working.
    """
    if type(value) is torch.device:
        if value.type != "cuda":
            return value
        return torch.device(DEVICE_TYPE, value.index)
    if isinstance(value, str):
        match = _CUDA_NAME.fullmatch(value)
        if match is not None:
            return DEVICE_TYPE if match.group(1) is None else f"{DEVICE_TYPE}:{match.group(1)}"
    return value


def flagos_index(value: Any) -> int | None:
    """The flagos device index meant by a torch.cuda.* device argument.

    Accepts what torch.cuda accepts: None (the current device), an int,
    "cuda"/"cuda:N", "flagos"/"flagos:N" and torch.devices of either type.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        value = torch.device(to_flagos(value))
    if isinstance(value, torch.device):
        if value.type not in ("cuda", DEVICE_TYPE):
            raise ValueError(
                f"expected a cuda device (which the flagos cuda alias maps to flagos), got '{value}'"
            )
        return value.index
    raise ValueError(f"expected a cuda device, an index or None, got {value!r}")


def flagos_device(value: Any) -> torch.device:
    """torch.device("flagos"[, N]) for a torch.cuda.* / Tensor.cuda() device argument."""
    index = flagos_index(value)
    return torch.device(DEVICE_TYPE) if index is None else torch.device(DEVICE_TYPE, index)


def legacy_type_name(value: Any) -> str | None:
    """ "FloatTensor" for "torch.cuda.FloatTensor" (string form only); else None."""
    if isinstance(value, str):
        match = _LEGACY_TYPE.fullmatch(value)
        if match is not None:
            return match.group(1)
    return None
