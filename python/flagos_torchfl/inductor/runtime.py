"""What inductor's generated Python calls on flagos: fused kernels (Note [Fused kernels]).

A module inductor writes for a flagos graph starts with lines such as::

    flagos_fused_0 = flagos_fused_kernel('flagos_fused_0', {'params': [...], 'body': ...})

and calls ``flagos_fused_0(buf0, arg0_1, ks0, 1024)`` in its graph. The
constructor has the plugin's Dialect frame the body (``_fused_kernel_source``)
and starts the build on a small thread pool at once, so a module's kernels
compile in parallel while inductor loads the rest; the first launch waits
for its own build. Builds go through the compiler slot into the kernel cache
(in memory, on disk, shared by processes), so a second process, or a
recompile of the same graph, loads binaries instead of compiling.

Launches go on the current stream of the tensors' device with an explicit
work-group size (Note [Launch geometry], include/flagos/compiler.h).
"""

from __future__ import annotations

import concurrent.futures
import os
import struct
import threading
from typing import Any

import torch

from .. import _state

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_launches = 0
_I64 = struct.Struct("<q")


def _builder() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, min(4, os.cpu_count() or 1)),
                thread_name_prefix="flagos-fused-build",
            )
        return _pool


def launches() -> int:
    """Fused-kernel launches in this process."""
    return _launches


def _local_size(device: int) -> int:
    props = torch.flagos.get_device_properties(device)
    if props.preferred_work_group_size:
        return props.preferred_work_group_size
    return min(256, props.max_work_group_size or 256)


class FusedKernel:
    """One fused kernel of a compiled graph; call it with the kernel's arguments."""

    def __init__(self, name: str, spec: dict[str, Any]):
        self.name = name
        self.params = [tuple(p) for p in spec["params"]]
        self.mode: str = spec["mode"]
        self.group: int = spec["group"]
        self.rows: int = spec.get("rows", 1)
        core = _state.require_initialized()
        self._core = core
        self.language = core._custom_kernel_language()
        self.source = core._fused_kernel_source(
            self.language,
            name,
            self.params,
            spec["body"],
            self.mode,
            self.group,
            self.rows,
            spec["fp64"],
        )
        self._is_ptr = [p[0] == "ptr" for p in self.params]
        self._xnumel_at = [p[1] for p in self.params].index("xnumel")
        self._work_groups = self.language in ("opencl-c", "cuda-c")
        self._local: dict[int, int] = {}
        self._builds: dict[int, concurrent.futures.Future] = {}
        self._handles: dict[int, int] = {}
        self._lock = threading.Lock()
        self._build_async(torch.flagos.current_device())

    def _build_async(self, device: int) -> concurrent.futures.Future:
        with self._lock:
            future = self._builds.get(device)
            if future is None:
                future = _builder().submit(
                    self._core._fused_kernel_build, device, self.name, self.source
                )
                self._builds[device] = future
            return future

    def _handle(self, device: int) -> int:
        handle = self._handles.get(device)
        if handle is None:
            handle = self._build_async(device).result()  # raises the compiler's log
            self._handles[device] = handle
            self._local[device] = _local_size(device)
        return handle

    def __call__(self, *args: Any) -> None:
        global _launches
        if len(args) != len(self.params):
            raise TypeError(
                f"fused kernel '{self.name}' takes {len(self.params)} arguments, got {len(args)}"
            )
        device = None
        packed: list[Any] = []
        for is_ptr, arg in zip(self._is_ptr, args, strict=True):
            if is_ptr:
                if device is None:
                    device = arg.device.index or 0
                packed.append(arg)
            else:
                packed.append(_I64.pack(int(arg)))
        if device is None:
            device = torch.flagos.current_device()
        xnumel = int(args[self._xnumel_at])
        if xnumel <= 0:
            return
        handle = self._handle(device)
        if self.mode == "group":
            groups = (xnumel + self.rows - 1) // self.rows
            global_, local = [groups * self.group * self.rows], [self.group * self.rows]
        elif self._work_groups:
            global_, local = [xnumel], [self._local[device]]
        else:
            global_, local = [xnumel], []
        self._core._custom_kernel_launch(handle, device, packed, global_, local, False)
        _launches += 1

    def __repr__(self) -> str:
        return f"FusedKernel({self.name!r}, mode={self.mode!r}, language={self.language!r})"


def flagos_fused_kernel(name: str, spec: dict[str, Any]) -> FusedKernel:
    return FusedKernel(name, spec)
