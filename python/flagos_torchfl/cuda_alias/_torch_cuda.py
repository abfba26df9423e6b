"""torch.cuda under the alias: every public name gets a flagos meaning or a clear error.

Each name in torch.cuda.__all__ is classified (classify()):

- implemented: answered by the flagos device (_cuda_api.py);
- ignored:     a tuning hint with no flagos meaning; warns once and does nothing;
- legacy type: torch.cuda.FloatTensor & co build flagos tensors;
- unsupported: needs the CUDA runtime itself (graphs, NVML, cuBLAS handles,
               external streams, ...); raises NotImplementedError naming the alias;
- kept:        submodules, exception classes and constants, left as they are.

Nothing is left that would reach the CUDA runtime and fail with "Torch not
compiled with CUDA enabled". A test checks that every name of the installed
torch's torch.cuda.__all__ lands in one of these groups.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from . import _cuda_api as api
from ._names import flagos_device
from ._patcher import Patcher

IMPLEMENTED = (
    "is_available",
    "is_initialized",
    "init",
    "device_count",
    "current_device",
    "set_device",
    "device",
    "device_of",
    "synchronize",
    "get_device_properties",
    "get_device_name",
    "get_device_capability",
    "is_bf16_supported",
    "is_tf32_supported",
    "get_arch_list",
    "get_gencode_flags",
    "is_current_stream_capturing",
    "can_device_access_peer",
    "get_allocator_backend",
    "get_sync_debug_mode",
    "get_per_process_memory_fraction",
    "memory_stats",
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "empty_cache",
    "mem_get_info",
    "memory_summary",
    "list_gpu_processes",
    "ipc_collect",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "get_rng_state_all",
    "set_rng_state_all",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    # Not in __all__, but libraries call them.
    "_lazy_init",
    "_is_in_bad_fork",
    "_get_device_index",
    "_exchange_device",
    "_maybe_exchange_device",
)

# Old names of implemented functions.
RENAMED = {
    "memory_cached": "memory_reserved",
    "max_memory_cached": "max_memory_reserved",
    "reset_max_memory_allocated": "reset_peak_memory_stats",
    "reset_max_memory_cached": "reset_peak_memory_stats",
}

IGNORED = ("set_per_process_memory_fraction", "set_sync_debug_mode", "caching_allocator_enable")

# Defined per activation (they need the registered torch.flagos module).
DYNAMIC = ("Stream", "Event", "StreamContext", "default_generators")

# Left alone: submodules are handled below or documented as unsupported,
# exceptions and constants work without CUDA.
KEPT = ("amp", "has_half", "has_magma", "cudaStatus", "CudaError", "DeferredCudaCallError")

# Submodules whose functions are also reachable as torch.cuda.<sub>.<name>.
SUBMODULES = ("memory", "random", "streams")

_DOCS = "docs/cuda-alias.md"


def _message(name: str) -> str:
    backend = "flagos"
    try:
        from .. import _core

        backend = f"flagos backend '{_core.C()._backend_info()['name']}'"
    except Exception:  # noqa: BLE001 - the message must not fail
        pass
    return (
        f"torch.cuda.{name} is not supported under the flagos cuda alias: 'cuda' runs on the "
        f"{backend}, and this API needs the CUDA runtime itself. See {_DOCS} for what the "
        "alias covers; set FLAGOS_ALIAS_CUDA=0 to turn it off."
    )


def _unsupported_function(name: str):
    def unsupported(*args, **kwargs):
        raise NotImplementedError(_message(name))

    unsupported.__name__ = name
    unsupported.__qualname__ = f"cuda.{name}"
    unsupported.__doc__ = f"Not supported under the flagos cuda alias ({_DOCS})."
    return unsupported


def _unsupported_class(name: str) -> type:
    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(_message(name))

    return type(name, (), {"__new__": __new__, "__doc__": f"Not supported ({_DOCS})."})


class _LegacyTypeMeta(type):
    """torch.cuda.FloatTensor(...) builds a flagos tensor; isinstance checks device and dtype."""

    def __call__(cls, *args, device: Any = None, **kwargs):
        cpu_type = getattr(torch, cls.__flagos_legacy_type__)
        return cpu_type(*args, **kwargs).to(flagos_device(device))

    def __instancecheck__(cls, obj: Any) -> bool:
        return (
            isinstance(obj, torch.Tensor) and obj.device.type == "flagos" and obj.dtype == cls.dtype
        )


def _legacy_type(name: str) -> type:
    return _LegacyTypeMeta(
        name,
        (),
        {
            "__flagos_legacy_type__": name,
            "__module__": "torch.cuda",
            "dtype": getattr(torch, name).dtype,
            "is_cuda": True,
            "is_sparse": False,
        },
    )


def classify(name: str, value: Any) -> str:
    """The group of torch.cuda.<name> (see the module docstring)."""
    if name in IMPLEMENTED or name in RENAMED or name in DYNAMIC:
        return "implemented"
    if name in IGNORED:
        return "ignored"
    if name in KEPT or isinstance(value, types.ModuleType):
        return "kept"
    if isinstance(value, type) and issubclass(value, BaseException):
        return "kept"
    if name.endswith("Tensor") and hasattr(torch, name):
        return "legacy type"
    if callable(value):
        return "unsupported"
    return "kept"


def _implementations() -> dict[str, Any]:
    impl: dict[str, Any] = {name: getattr(api, name) for name in IMPLEMENTED + IGNORED}
    impl.update({old: getattr(api, new) for old, new in RENAMED.items()})
    impl["Stream"] = api._stream_class()
    impl["Event"] = torch.flagos.Event
    impl["StreamContext"] = torch.flagos.StreamContext
    impl["default_generators"] = api.default_generators()
    return impl


def install(patcher: Patcher) -> None:
    cuda = torch.cuda
    impl = _implementations()
    names = set(getattr(cuda, "__all__", ())) | set(impl)
    for name in sorted(names):
        value = getattr(cuda, name, None)
        group = classify(name, value)
        if group in ("implemented", "ignored"):
            patcher.set(cuda, name, impl[name])
        elif group == "legacy type":
            patcher.set(cuda, name, _legacy_type(name))
        elif group == "unsupported":
            stub = (
                _unsupported_class(name) if isinstance(value, type) else _unsupported_function(name)
            )
            patcher.set(cuda, name, stub)

    for sub_name in SUBMODULES:
        sub = getattr(cuda, sub_name, None)
        if sub is None:
            continue
        for name in vars(sub):
            if name in impl and not name.startswith("__") and callable(impl[name]):
                patcher.set(sub, name, impl[name])

    nvtx = getattr(cuda, "nvtx", None)
    if nvtx is not None:
        for name, fn in api.NVTX.items():
            if hasattr(nvtx, name):
                patcher.set(nvtx, name, fn)
    profiler = getattr(cuda, "profiler", None)
    if profiler is not None:
        for name in ("start", "stop", "profile", "init"):
            if hasattr(profiler, name):
                patcher.set(profiler, name, _unsupported_function(f"profiler.{name}"))
