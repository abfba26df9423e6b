"""Lightning on the flagos device without the cuda alias: accelerator="flagos".

    import flagos_torchfl.integrations.lightning  # registers the names below
    trainer = L.Trainer(accelerator="flagos", devices=2, strategy="ddp_flagos")
    trainer = L.Trainer(accelerator="flagos", devices=1, strategy="single_flagos")

Importing this module registers FlagosAccelerator under the name "flagos"
with Lightning's accelerator registries (lightning.pytorch and
lightning.fabric, whichever are installed), and initializes flagos if
nothing did (FLAGOS_BACKEND, else the best plugin).

One device: Lightning's automatic strategy puts a single device of an
accelerator it does not know on the CPU; "single_flagos" is its
SingleDeviceStrategy on flagos:0 (SingleDeviceStrategy(device="flagos:N")
for another index).

DDP: Lightning's DDPStrategy builds the DistributedDataParallel wrapper
inside torch.cuda.stream(torch.cuda.Stream()) whenever it passes device_ids,
which fails on any device but CUDA. FlagosDDPStrategy ("ddp_flagos")
passes none: DDP takes the device from the module's parameters, one device
per process, as it does for any non-CUDA device. The process group's
backend comes from torch's default_device_backend_map, where flagos maps to
the fccl collectives.

accelerator="auto" is Lightning's own choice among the accelerators it
knows (CUDA, MPS, XLA, ...); it does not consult the registry, so without
the alias "auto" is the CPU. Under the cuda alias "auto" and "gpu" already
mean flagos (CUDAAccelerator on torch.cuda, which answers for flagos).
"""

from __future__ import annotations

from typing import Any

import torch

from .._state import DEVICE_TYPE

NAME = "flagos"


def _initialized_device_count() -> int:
    import flagos_torchfl as ft

    if not ft.is_initialized():
        ft.initialize()
    return torch.flagos.device_count()


def parse_devices(devices: Any) -> list[int]:
    """Lightning's `devices` argument as flagos device indices: n (the first
    n), -1 or "auto" (all), "0,2" or [0, 2] (those); a clear error for indices
    that do not exist."""
    count = _initialized_device_count()
    if isinstance(devices, str):
        text = devices.strip()
        if text in ("auto", "-1"):
            devices = -1
        elif "," in text or text.startswith("["):
            devices = [int(p) for p in text.strip("[]").split(",") if p.strip()]
        else:
            devices = int(text)
    if isinstance(devices, int):
        if devices == -1:
            return list(range(count))
        if devices < 0:
            raise ValueError(f"devices={devices}: expected a positive count, -1 or a list")
        devices = list(range(devices))
    indices = [int(d) for d in devices]
    missing = [i for i in indices if not 0 <= i < count]
    if missing:
        raise ValueError(
            f"devices={indices}: flagos has {count} device(s) here (indices 0..{count - 1}); "
            f"{missing} do not exist"
        )
    return indices


def _accelerator_class(base: type) -> type:
    class FlagosAccelerator(base):  # type: ignore[misc, valid-type]
        """Lightning's accelerator for the flagos device (any plugin behind it)."""

        def setup_device(self, device: torch.device) -> None:
            if device.type != DEVICE_TYPE:
                raise ValueError(f"FlagosAccelerator got device {device}, expected a flagos device")
            torch.flagos.set_device(device.index or 0)

        def teardown(self) -> None:
            pass

        def get_device_stats(self, device: Any) -> dict[str, Any]:
            index = torch.device(device).index or 0
            return {
                "allocated_bytes": torch.flagos.memory_allocated(index),
                "reserved_bytes": torch.flagos.memory_reserved(index),
            }

        @staticmethod
        def parse_devices(devices: Any) -> list[int]:
            return parse_devices(devices)

        @staticmethod
        def get_parallel_devices(devices: Any) -> list[torch.device]:
            return [torch.device(DEVICE_TYPE, i) for i in parse_devices(devices)]

        @staticmethod
        def auto_device_count() -> int:
            return _initialized_device_count()

        @staticmethod
        def is_available() -> bool:
            try:
                return _initialized_device_count() > 0
            except Exception:  # noqa: BLE001 - no usable plugin: not available
                return False

        @staticmethod
        def name() -> str:
            return NAME

        @classmethod
        def register_accelerators(cls, accelerator_registry: Any) -> None:
            accelerator_registry.register(NAME, cls, description=cls.__name__, override=True)

    return FlagosAccelerator


STRATEGY = "ddp_flagos"
SINGLE = "single_flagos"


def _ddp_strategy_class(base: type) -> type:
    class FlagosDDPStrategy(base):  # type: ignore[misc, valid-type]
        """DDPStrategy without CUDA's stream around the wrapper (see the module doc)."""

        def determine_ddp_device_ids(self) -> None:
            return None

    return FlagosDDPStrategy


def _register() -> dict[str, type]:
    registered: dict[str, type] = {}
    try:
        from lightning.pytorch.accelerators import Accelerator, AcceleratorRegistry
        from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy, StrategyRegistry
    except ImportError:
        pass
    else:
        cls = _accelerator_class(Accelerator)
        cls.register_accelerators(AcceleratorRegistry)
        registered["lightning.pytorch"] = cls
        strategy = _ddp_strategy_class(DDPStrategy)
        StrategyRegistry.register(STRATEGY, strategy, description=strategy.__doc__, override=True)
        registered["strategy"] = strategy
        StrategyRegistry.register(
            SINGLE,
            SingleDeviceStrategy,
            description="SingleDeviceStrategy on flagos:0",
            override=True,
            device=torch.device(DEVICE_TYPE, 0),
        )
    try:
        from lightning.fabric.accelerators import ACCELERATOR_REGISTRY
        from lightning.fabric.accelerators import Accelerator as FabricAccelerator
    except ImportError:
        pass
    else:
        cls = _accelerator_class(FabricAccelerator)
        cls.register_accelerators(ACCELERATOR_REGISTRY)
        registered["lightning.fabric"] = cls
    if not registered:
        raise ImportError(
            "flagos_torchfl.integrations.lightning needs Lightning (pip install lightning)"
        )
    return registered


_REGISTERED = _register()
# Lightning's Trainer takes an instance too: L.Trainer(accelerator=FlagosAccelerator()).
FlagosAccelerator = _REGISTERED.get("lightning.pytorch") or _REGISTERED["lightning.fabric"]
FlagosDDPStrategy = _REGISTERED.get("strategy")
