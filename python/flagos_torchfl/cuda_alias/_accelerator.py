"""torch.accelerator under the alias: one identity, "cuda", for the code that asks.

Note [One accelerator identity under the alias]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Frameworks decide "which accelerator, which collective" from
torch.accelerator.current_accelerator(), not from torch.cuda: accelerate's
PartialState takes its device type from it and looks the collective up in a
table keyed by type ({"cuda": "nccl", ...}). With the alias answering
torch.cuda.* as CUDA but torch.accelerator as "flagos", accelerate found no
collective for "flagos", chose DistributedType.NO, and `accelerate launch
--multi_gpu` trained one unsynchronised replica per process, each "rank 0 of
1"; transformers then counted torch.cuda.device_count() GPUs and wrapped the
model in DataParallel. A silent loss of synchronisation.

So under the alias current_accelerator() says torch.device("cuda") -- to the
code outside torch. torch's own modules (and ours) keep the true answer,
flagos: they pass it on to C++, where the accelerator is PrivateUse1, and
compare it with real tensors' devices (init_process_group's device_id check,
ProcessGroup._get_backend, DataLoader's pin-memory device). A framework that
gets "cuda" reaches flagos through the alias's other wrappers: torch.cuda.*,
the "nccl" backend (rewritten to fccl), device_id=cuda:N, factories and .to().

The functions that take a device (set_device_index, synchronize, the memory
statistics, device_index) accept cuda devices, as torch.cuda's do: they read
device indices through torch.accelerator._utils._get_device_index, which is
wrapped to read "cuda:N" as flagos:N.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

import torch

from .._state import DEVICE_TYPE
from ._names import to_flagos
from ._patcher import Patcher

# Callers in these packages get the true accelerator (see the Note).
_TRUTHFUL = ("torch", "flagos_torchfl")


def caller_is_truthful(depth: int) -> bool:
    """Is the caller @p depth frames up (1: whoever called the caller) in torch or flagos_torchfl?"""
    name = sys._getframe(depth + 1).f_globals.get("__name__") or ""
    return any(name == root or name.startswith(root + ".") for root in _TRUTHFUL)


def _make_current_accelerator(original):
    @functools.wraps(original)
    def current_accelerator(*args: Any, **kwargs: Any) -> torch.device | None:
        if torch.compiler.is_compiling():
            # Dynamo inlines this wrapper (the original, which it would
            # constant-fold, breaks the graph when called from here): traced
            # code gets the truth as a constant. The alias is only active
            # once flagos is the accelerator.
            return torch.device(DEVICE_TYPE)
        device = original(*args, **kwargs)
        if device is None or caller_is_truthful(1):
            return device
        return torch.device("cuda")

    return current_accelerator


def _make_get_device_index(original):
    @functools.wraps(original)
    def get_device_index(device: Any, *args: Any, **kwargs: Any) -> int:
        return original(to_flagos(device), *args, **kwargs)

    return get_device_index


def install(patcher: Patcher) -> None:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is None or not hasattr(accelerator, "current_accelerator"):
        return
    patcher.set(
        accelerator,
        "current_accelerator",
        _make_current_accelerator(accelerator.current_accelerator),
    )
    try:
        utils = importlib.import_module("torch.accelerator._utils")
    except ImportError:
        return
    original = getattr(utils, "_get_device_index", None)
    if original is None:
        return
    wrapper = _make_get_device_index(original)
    # Each module imported the helper by name: replace every binding of it.
    for name in ("torch.accelerator._utils", "torch.accelerator", "torch.accelerator.memory"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "_get_device_index", None) is original:
            patcher.set(module, "_get_device_index", wrapper)
