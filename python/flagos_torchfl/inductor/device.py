"""The flagos device as dynamo and inductor see it (DeviceInterface, DeviceOpOverrides).

Dynamo asks a device's interface for the current device, streams and
properties while it traces and caches; inductor's Python wrapper writes the
device guard, synchronize and raw-stream lines from the op overrides. Both
forward to torch.flagos, the device module shaped like torch.cuda.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices
from torch._inductor.codegen.common import DeviceOpOverrides

from .. import _state

_Properties = namedtuple(
    "FlagosProperties",
    ["name", "multi_processor_count", "max_work_group_size", "total_memory", "arch"],
)


def get_raw_stream(device: int) -> int:
    """The current stream's id on @p device (what inductor's wrapper passes around)."""
    return torch.flagos.current_stream(device).stream_id


def _index(device: Any) -> int:
    if device is None:
        return torch.flagos.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        return device.index if device.index is not None else torch.flagos.current_device()
    return int(device)


def _properties(device: Any = None) -> Any:
    p = torch.flagos.get_device_properties(_index(device))
    return _Properties(
        p.name, p.multi_processor_count, p.max_work_group_size, p.total_memory, p.arch
    )


def compute_capability(device: Any = None) -> str:
    """Plugin, its version and the device's architecture: part of inductor's cache keys."""
    info = torch.flagos.get_device_properties(_index(device))
    return f"{_state.backend_name}:{_plugin_version()}:{info.arch}"


def _plugin_version() -> str:
    return str(_state.require_initialized()._backend_info().get("version", ""))


class FlagosInterface(DeviceInterface):
    device = torch.flagos.device  # type: ignore[assignment]
    Event = torch.flagos.Event  # type: ignore[assignment]
    Stream = torch.flagos.Stream  # type: ignore[assignment]

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[_state.DEVICE_TYPE] = device

        @staticmethod
        def current_device() -> int:
            if _state.DEVICE_TYPE in caching_worker_current_devices:
                return caching_worker_current_devices[_state.DEVICE_TYPE]
            return torch.flagos.current_device()

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            return _properties(device)

    current_device = staticmethod(torch.flagos.current_device)
    set_device = staticmethod(torch.flagos.set_device)
    device_count = staticmethod(torch.flagos.device_count)
    stream = staticmethod(torch.flagos.stream)
    current_stream = staticmethod(torch.flagos.current_stream)
    set_stream = staticmethod(torch.flagos.set_stream)
    synchronize = staticmethod(torch.flagos.synchronize)
    get_raw_stream = staticmethod(get_raw_stream)
    get_device_properties = staticmethod(_properties)  # type: ignore[assignment]
    get_compute_capability = staticmethod(compute_capability)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = torch.flagos.current_device()
        if device >= 0 and device != previous:
            torch.flagos.set_device(device)
        return previous

    @staticmethod
    def exchange_device(device: int) -> int:
        return FlagosInterface.maybe_exchange_device(device)

    @staticmethod
    def is_available() -> bool:
        return torch.flagos.is_available()

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return torch.flagos.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False


class FlagosDeviceOpOverrides(DeviceOpOverrides):
    """The lines inductor's Python wrapper writes around flagos kernels."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from flagos_torchfl.inductor.device import get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.flagos.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.flagos.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.flagos.device({device_idx})"
