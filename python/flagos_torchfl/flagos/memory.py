"""torch.flagos memory statistics and cache control (the core's caching allocator).

"allocated" is what live tensors hold; "reserved" is what the allocator took
from the device, including freed blocks it keeps for reuse. empty_cache()
gives those cached blocks back.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .. import _core
from .._text import format_bytes, table
from . import _index, _lazy_init

__all__ = [
    "empty_cache",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
]

# The core's counters (csrc/python/README.md) under the names
# torch.cuda.memory_stats() uses, so tools written for CUDA read them as-is.
_STAT_NAMES = {
    "allocated": "allocated_bytes.all.current",
    "peak_allocated": "allocated_bytes.all.peak",
    "reserved": "reserved_bytes.all.current",
    "peak_reserved": "reserved_bytes.all.peak",
    "active_blocks": "active.all.current",
    "cached_blocks": "inactive_split.all.current",
    "num_allocs": "allocation.all.allocated",
    "num_frees": "allocation.all.freed",
    "num_device_mallocs": "num_device_alloc",
    "num_device_frees": "num_device_free",
    "num_ooms": "num_ooms",
    "num_cache_flushes": "num_cache_flushes",
}


def _raw_stats(device: Any) -> dict[str, int]:
    return _core.C()._memory_stats(_index(device))


def memory_stats(device: Any = None) -> OrderedDict[str, int]:
    """Allocator statistics of `device`, with torch.cuda.memory_stats() key names."""
    raw = _raw_stats(device)
    return OrderedDict(sorted((_STAT_NAMES.get(k, k), v) for k, v in raw.items()))


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live tensors on `device`."""
    return _raw_stats(device)["allocated"]


def max_memory_allocated(device: Any = None) -> int:
    """Peak of memory_allocated() since start-up or reset_peak_memory_stats()."""
    return _raw_stats(device)["peak_allocated"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the allocator holds on `device` (allocated + cached)."""
    return _raw_stats(device)["reserved"]


def max_memory_reserved(device: Any = None) -> int:
    """Peak of memory_reserved() since start-up or reset_peak_memory_stats()."""
    return _raw_stats(device)["peak_reserved"]


def reset_peak_memory_stats(device: Any = None) -> None:
    """Restart the peaks from the current values."""
    _core.C()._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Zero the counters (allocations, frees, OOMs, cache flushes)."""
    _core.C()._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """Return every cached (unused) block of every device to the plugin."""
    _lazy_init()
    _core.C()._empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of `device` as its plugin reports them."""
    free, total = _core.C()._mem_get_info(_index(device))
    return int(free), int(total)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A readable table of the allocator statistics of `device`."""
    index = _index(device)
    raw = _raw_stats(index)
    free, total = mem_get_info(index)
    rows = [
        ["", "current", "peak"],
        ["allocated", format_bytes(raw["allocated"]), format_bytes(raw["peak_allocated"])],
        ["reserved", format_bytes(raw["reserved"]), format_bytes(raw["peak_reserved"])],
    ]
    if not abbreviated:
        rows += [
            ["active blocks", str(raw["active_blocks"]), ""],
            ["cached blocks", str(raw["cached_blocks"]), ""],
        ]
    counters = [
        ["allocations", str(raw["num_allocs"])],
        ["frees", str(raw["num_frees"])],
        ["device mallocs", str(raw["num_device_mallocs"])],
        ["device frees", str(raw["num_device_frees"])],
        ["out-of-memory", str(raw["num_ooms"])],
        ["cache flushes", str(raw["num_cache_flushes"])],
    ]
    lines = [
        f"flagos:{index} memory summary",
        table(rows),
        f"  device: {format_bytes(free)} free of {format_bytes(total)}",
    ]
    if not abbreviated:
        lines += ["  counters:", table(counters, "    ")]
    return "\n".join(lines)
