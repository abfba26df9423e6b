"""Device-index parsing for torch.flagos (torch.load calls _get_device_index)."""

from __future__ import annotations

import torch

from .. import _core
from .._state import DEVICE_TYPE


def _get_device_index(device=None, optional: bool = False, allow_cpu: bool = False) -> int:
    """The flagos device index named by `device`.

    Accepts an int, "flagos", "flagos:1", a torch.device or None. Without an
    index, returns the current device when `optional`, else raises. With
    `allow_cpu`, a CPU device gives -1.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if allow_cpu and device.type == "cpu":
            return -1
        if device.type != DEVICE_TYPE:
            raise ValueError(f"expected a {DEVICE_TYPE} device, got '{device}'")
        index = device.index
    elif device is None:
        index = None
    else:
        index = int(device)
    if index is None:
        if not optional:
            raise ValueError(
                f"expected a {DEVICE_TYPE} device with an index or an integer, got {device!r}"
            )
        return _core.C()._get_device()
    return index
