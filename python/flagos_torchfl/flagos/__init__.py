"""torch.flagos: the device module of the `flagos` device.

flagos_torchfl.initialize() registers this module as `torch.flagos`. It holds
what PyTorch itself looks up on a device module (lazy init, device count and
selection, the `device` context manager used by torch.load and storage moves,
RNG, autocast dtypes) plus the CUDA-style extras users expect: memory
statistics, streams and events, device properties.

Device indices are logical: `flagos:0` is the first device
FLAGOS_VISIBLE_DEVICES selects (docs/env.md).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import torch

from .. import _core
from . import _utils
from ._utils import _get_device_index

_initialized = False
_in_bad_fork = False
# _C._synchronize once the device is up: synchronize()'s common call is then
# one C call (Note [A cheap synchronize]).
_synchronize_current: Any = None
# Seeding before the device is in use waits for _lazy_init, as torch.cuda's
# _lazy_call does: torch.manual_seed() seeds every device module, and if it
# brought the device up, torch.flagos.is_initialized() would be True before
# any device work. DeviceMesh (and so FSDP2's fully_shard) picks the device
# from LOCAL_RANK only while it is False: pytorch/examples' FSDP2 example
# (manual_seed, then fully_shard) ran every rank on device 0. The latest
# call of each kind wins.
_queued_calls: dict[str, Any] = {}


def _lazy_call(fn: Any, kind: str) -> None:
    if is_initialized():
        fn()
    else:
        _queued_calls[kind] = fn


def _after_fork_in_child() -> None:
    # The plugin's threads and device contexts do not survive fork().
    global _initialized, _in_bad_fork, _synchronize_current
    if _core.loaded() and _core.C()._is_initialized():
        _in_bad_fork = True
        _initialized = False
        _synchronize_current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork() -> bool:
    """True in a child forked after the device was brought up."""
    return _in_bad_fork


def is_initialized() -> bool:
    return _initialized and not _in_bad_fork


def _lazy_init() -> None:
    """Called by PyTorch before the first use of the device in a process."""
    global _initialized, _synchronize_current
    if is_initialized():
        return
    if _in_bad_fork:
        raise RuntimeError(
            "Cannot re-initialize the flagos device in a forked subprocess. To use flagos with "
            "multiprocessing, use the 'spawn' start method."
        )
    from .._state import require_initialized as _require_initialized

    _require_initialized()._init_lazy()
    _initialized = True
    _synchronize_current = _core.C()._synchronize
    calls = list(_queued_calls.values())
    _queued_calls.clear()
    for fn in calls:
        fn()


def _index(device: Any) -> int:
    """Lazy-init the device, then the index `device` names (None: the current one)."""
    _lazy_init()
    return _get_device_index(device, optional=True)


def init() -> None:
    _lazy_init()


def is_available() -> bool:
    """True when a backend is initialized and shows at least one device."""
    return device_count() > 0


def device_count() -> int:
    """Number of logical flagos devices; 0 before initialize(). Never raises."""
    try:
        C = _core.C()
    except ImportError:
        return 0
    return int(C._device_count()) if C._is_initialized() else 0


def current_device() -> int:
    _lazy_init()
    return _core.C()._get_device()


def set_device(device) -> None:
    """Select the current device; a negative index is a no-op."""
    _lazy_init()
    index = _get_device_index(device)
    if index >= 0:
        _core.C()._set_device(index)


class device:
    """Context manager that makes `device` current and restores the previous one.

    Accepts an int, "flagos:N", torch.device or None (None / -1: no-op).
    """

    def __init__(self, device: Any):
        self.idx = -1 if device is None else _get_device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            _lazy_init()
            self.prev_idx = _core.C()._get_device()
            if self.prev_idx != self.idx:
                _core.C()._set_device(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        if self.idx >= 0 and self.prev_idx != self.idx:
            _core.C()._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager selecting the device of a tensor or storage (no-op off flagos)."""

    def __init__(self, obj: Any):
        super().__init__(obj.get_device() if obj.device.type == "flagos" else -1)


def synchronize(device: Any = None) -> None:
    """Wait for all work queued on every stream of `device` (default: current)."""
    if device is None and _synchronize_current is not None:
        _synchronize_current()  # the common call: one C call (Note [A cheap synchronize])
        return
    _core.C()._synchronize(_index(device))


class _DeviceProperties(NamedTuple):
    name: str
    total_memory: int
    arch: str
    multi_processor_count: int
    # Work-group sizes (include/flagos/device.h); 0 where the plugin did not say.
    max_work_group_size: int = 0
    preferred_work_group_size: int = 0


def get_device_properties(device: Any = None) -> _DeviceProperties:
    index = _index(device)
    devices = _core.C()._backend_info()["devices"]
    if not 0 <= index < len(devices):
        raise ValueError(f"invalid flagos device index {index} ({len(devices)} devices)")
    d = devices[index]
    return _DeviceProperties(
        d["name"],
        d["total_memory"],
        d["arch"],
        d["compute_units"],
        d.get("max_work_group_size", 0),
        d.get("preferred_work_group_size", 0),
    )


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Dtypes torch.autocast(device_type="flagos") accepts (the backend's amp policy)."""
    from .. import amp

    return amp.supported_dtypes()


from . import memory, random, streams  # noqa: E402
from .memory import *  # noqa: E402, F403
from .random import *  # noqa: E402, F403
from .streams import *  # noqa: E402, F403


def _inductor_backend_init() -> None:
    """torch >= 2.15's vendor hook: inductor calls it before it first compiles for flagos."""
    from ..inductor import register

    register()


_INDUCTOR_CLASSES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen")


def __getattr__(name: str) -> Any:
    # torch < 2.15 reads these from the device module instead (PEP 562: the
    # inductor import happens only when something asks; the answer is None
    # once registered, see inductor.codegen_class).
    if name in _INDUCTOR_CLASSES:
        from ..inductor import codegen_class

        return codegen_class(name)
    raise AttributeError(f"module 'torch.flagos' has no attribute '{name}'")


__all__ = [
    "device",
    "device_count",
    "device_of",
    "current_device",
    "get_amp_supported_dtype",
    "get_device_name",
    "get_device_properties",
    "init",
    "is_available",
    "is_initialized",
    "set_device",
    "synchronize",
    "_utils",
    *memory.__all__,
    *random.__all__,
    *streams.__all__,
]
