"""torch.cuda.* answered by the flagos device: the implementations.

Each function has torch.cuda's signature and meaning, with "the current CUDA
device" read as "the current flagos device". Device arguments accept what
torch.cuda accepts (None, int, "cuda:N", torch.device) plus flagos devices.
_torch_cuda.py decides which torch.cuda name gets which of these.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, NamedTuple

import torch

from ._names import flagos_index


def _flagos():
    return torch.flagos


# ---------------------------------------------------------------- devices


def is_available() -> bool:
    return _flagos().is_available()


def is_initialized() -> bool:
    return _flagos().is_initialized()


def init() -> None:
    _flagos()._lazy_init()


def _lazy_init() -> None:
    _flagos()._lazy_init()


def _is_in_bad_fork() -> bool:
    return _flagos()._is_in_bad_fork()


def device_count() -> int:
    return _flagos().device_count()


def current_device() -> int:
    return _flagos().current_device()


def set_device(device: Any) -> None:
    index = flagos_index(device)
    if index is not None:
        _flagos().set_device(index)


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    if allow_cpu and (device == "cpu" or getattr(device, "type", None) == "cpu"):
        return -1
    index = flagos_index(device)
    if index is None:
        if not optional:
            raise ValueError(
                f"Expected a cuda device with a specified index or an integer, got {device!r}"
            )
        return current_device()
    return index


def _exchange_device(device: int) -> int:
    previous = current_device()
    if device >= 0 and device != previous:
        set_device(device)
    return previous


def _maybe_exchange_device(device: int) -> int:
    return _exchange_device(device)


class device:
    """torch.cuda.device: a context manager that selects a flagos device."""

    def __init__(self, device: Any):
        index = -1 if device is None else flagos_index(device)
        self._inner = _flagos().device(-1 if index is None else index)

    def __enter__(self):
        self._inner.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        return self._inner.__exit__(*exc)


class device_of(device):
    """torch.cuda.device_of: selects the device of a tensor (no-op off the device)."""

    def __init__(self, obj: Any):
        super().__init__(obj.get_device() if obj.device.type in ("flagos", "cuda") else -1)


def synchronize(device: Any = None) -> None:
    _flagos().synchronize(flagos_index(device))


# ---------------------------------------------------------------- properties


class DeviceProperties(NamedTuple):
    """What torch.cuda.get_device_properties() reports for a flagos device.

    major/minor are 0: a flagos device has no CUDA compute capability, so
    code that gates features on it takes its conservative path.
    """

    name: str
    total_memory: int
    multi_processor_count: int
    major: int = 0
    minor: int = 0
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    arch: str = ""
    gcnArchName: str = ""
    warp_size: int = 1

    def __repr__(self) -> str:
        return (
            f"_FlagosDeviceProperties(name='{self.name}', arch='{self.arch}', "
            f"total_memory={self.total_memory >> 20}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def get_device_properties(device: Any = None) -> DeviceProperties:
    props = _flagos().get_device_properties(flagos_index(device))
    return DeviceProperties(
        name=props.name,
        total_memory=props.total_memory,
        multi_processor_count=props.multi_processor_count,
        arch=props.arch,
    )


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    from .. import amp

    return torch.bfloat16 in amp.get_policy().supported_dtypes


def is_tf32_supported() -> bool:
    return False


def get_arch_list() -> list[str]:
    return []


def get_gencode_flags() -> str:
    return ""


def is_current_stream_capturing() -> bool:
    return False  # the alias has no CUDA graphs, so nothing is ever capturing


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    return False


def get_allocator_backend() -> str:
    return "native"


def get_sync_debug_mode() -> int:
    return 0


def get_per_process_memory_fraction(device: Any = None) -> float:
    return 1.0


# ---------------------------------------------------------------- memory


def memory_stats(device: Any = None):
    return _flagos().memory_stats(flagos_index(device))


def memory_allocated(device: Any = None) -> int:
    return _flagos().memory_allocated(flagos_index(device))


def max_memory_allocated(device: Any = None) -> int:
    return _flagos().max_memory_allocated(flagos_index(device))


def memory_reserved(device: Any = None) -> int:
    return _flagos().memory_reserved(flagos_index(device))


def max_memory_reserved(device: Any = None) -> int:
    return _flagos().max_memory_reserved(flagos_index(device))


def reset_peak_memory_stats(device: Any = None) -> None:
    _flagos().reset_peak_memory_stats(flagos_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _flagos().reset_accumulated_memory_stats(flagos_index(device))


def empty_cache() -> None:
    _flagos().empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    return _flagos().mem_get_info(flagos_index(device))


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    return _flagos().memory_summary(flagos_index(device), abbreviated)


def list_gpu_processes(device: Any = None) -> str:
    return f"flagos:{_get_device_index(device, optional=True)}: process list not available"


def ipc_collect() -> None:
    pass


# ---------------------------------------------------------------- RNG


def manual_seed(seed: int) -> None:
    _flagos().manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    _flagos().manual_seed_all(seed)


def seed() -> None:
    _flagos().seed()


def seed_all() -> None:
    _flagos().seed_all()


def initial_seed() -> int:
    return _flagos().initial_seed()


def get_rng_state(device: Any = "cuda") -> torch.Tensor:
    return _flagos().get_rng_state(_get_device_index(device, optional=True))


def set_rng_state(new_state: torch.Tensor, device: Any = "cuda") -> None:
    _flagos().set_rng_state(new_state, _get_device_index(device, optional=True))


def get_rng_state_all() -> list[torch.Tensor]:
    return _flagos().get_rng_state_all()


def set_rng_state_all(new_states) -> None:
    _flagos().set_rng_state_all(new_states)


def default_generators() -> tuple[torch.Generator, ...]:
    from .. import _core

    return tuple(_core.C()._get_default_generator(i) for i in range(device_count()))


# ---------------------------------------------------------------- streams and events


def _stream_class():
    base = _flagos().Stream

    class Stream(base):
        """torch.cuda.Stream: a stream of the flagos device.

        Args:
            device: None (current), int, "cuda:N" or torch.device.
            priority: 0 (normal) or negative (higher priority, a hint).
        """

        def __new__(cls, device: Any = None, priority: int = 0, **handle: int):
            if handle:
                return super().__new__(cls, **handle)
            return super().__new__(cls, flagos_index(device), priority)

    return Stream


def current_stream(device: Any = None):
    return torch.cuda.Stream._wrap(_flagos().current_stream(flagos_index(device)))


def default_stream(device: Any = None):
    return torch.cuda.Stream._wrap(_flagos().default_stream(flagos_index(device)))


def set_stream(stream) -> None:
    if stream is not None:
        _flagos().set_stream(stream)


def stream(stream):
    return _flagos().stream(stream)


# ---------------------------------------------------------------- hints that do nothing here

_warned: set[str] = set()


def _ignored(name: str, why: str):
    def ignored(*args, **kwargs) -> None:
        if name not in _warned:
            _warned.add(name)
            warnings.warn(
                f"torch.cuda.{name}() has no effect under the flagos cuda alias: {why}",
                stacklevel=2,
            )

    ignored.__name__ = name
    return ignored


set_per_process_memory_fraction = _ignored(
    "set_per_process_memory_fraction",
    "limit the device memory with the backend's own setting (e.g. FLAGOS_HOST_MEMORY_LIMIT)",
)
set_sync_debug_mode = _ignored("set_sync_debug_mode", "flagos has no synchronization debug mode")
caching_allocator_enable = _ignored(
    "caching_allocator_enable", "the flagos caching allocator is always on"
)


def _nvtx_noop(*args, **kwargs):
    return None


@contextlib.contextmanager
def _nvtx_range(*args, **kwargs):
    yield


NVTX = {
    "mark": _nvtx_noop,
    "range_push": _nvtx_noop,
    "range_pop": _nvtx_noop,
    "range_start": _nvtx_noop,
    "range_end": _nvtx_noop,
    "range": _nvtx_range,
}
