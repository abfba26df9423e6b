"""Custom kernels from source, on any backend with a compiler (docs/extensions.md).

A hand-written fused kernel (RMSNorm, flash attention) is given once per
language; the active plugin's compiler builds the one it compiles, the core's
kernel cache keeps the binary (in memory and on disk, shared by processes:
Note [Custom kernels], csrc/extension/custom_kernel.h), and launches go on
the current stream with the tensors' device addresses::

    from flagos_torchfl import extension as fx

    scale = fx.compile_kernel("scale", {
        "opencl": '''
            __kernel void scale(FLAGOS_TENSOR(float, y), FLAGOS_TENSOR(const float, x),
                                long n, float a) {
              size_t i = get_global_id(0);
              if (i < n) FLAGOS_PTR(float, y)[i] = a * FLAGOS_PTR(const float, x)[i];
            }''',
        "c": '''
            FLAGOS_KERNEL(scale) {
              float* y = FLAGOS_TENSOR_ARG(float, 0);
              const float* x = FLAGOS_TENSOR_ARG(const float, 1);
              int64_t n = FLAGOS_SCALAR_ARG(int64_t, 2);
              float a = FLAGOS_SCALAR_ARG(float, 3);
              FLAGOS_ITEMS(i) if ((int64_t)i < n) y[i] = a * x[i];
            }''',
    })
    scale(y, x, x.numel(), fx.float32(2.0), global_size=x.numel(), local_size=64)

Source keys are tried in this order: the backend's name ("host", "opencl", a
vendor's), the language its compiler takes ("c", "opencl-c", "cuda-c"), and
"opencl" for "opencl-c". Scalars: a Python int passes as int64, a float as
float32; int32(), int64(), float32(), float64(), uint32(), uint64() say so
explicitly. The kernel reads tensors as raw memory: pass contiguous ones (or
mind the strides yourself).

To make a kernel an operator that autograd, torch.compile and fake tensors
understand, wrap it in torch.library.custom_op(..., device_types="flagos")
with register_fake and register_autograd (examples/fused_rmsnorm.py).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from . import _state

__all__ = [
    "Kernel",
    "compile_kernel",
    "float32",
    "float64",
    "int32",
    "int64",
    "language",
    "launches",
    "uint32",
    "uint64",
]

# The short names "opencl" and "cuda" stand for the languages "opencl-c" and "cuda-c".
_LANGUAGE_ALIASES = {"opencl-c": ("opencl",), "cuda-c": ("cuda",)}


@dataclass(frozen=True)
class _Scalar:
    """A scalar argument with its C type (struct format)."""

    value: int | float
    fmt: str

    def encode(self) -> bytes:
        try:
            return struct.pack("<" + self.fmt, self.value)
        except struct.error as err:
            raise ValueError(f"scalar {self.value!r} does not fit its type: {err}") from None


def _typed(name: str, fmt: str, cast):
    def make(value) -> _Scalar:
        return _Scalar(cast(value), fmt)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = f"A scalar argument of C type {name}."
    return make


# The C types a scalar argument can have (struct formats, little-endian).
int32 = _typed("int32", "i", int)
int64 = _typed("int64", "q", int)
uint32 = _typed("uint32", "I", int)
uint64 = _typed("uint64", "Q", int)
float32 = _typed("float32", "f", float)
float64 = _typed("float64", "d", float)


def language() -> str:
    """The language the active backend compiles ("" when it has no compiler)."""
    return _state.require_initialized()._custom_kernel_language()


def launches() -> int:
    """Custom-kernel launches in this process (all kernels, all devices)."""
    return _state.require_initialized()._custom_kernel_launches()


def _keys_for(backend: str, lang: str) -> list[str]:
    return [backend, lang, *_LANGUAGE_ALIASES.get(lang, ())]


def _pick(given: Mapping[str, str], backend: str, lang: str) -> str | None:
    for key in _keys_for(backend, lang):
        if key in given:
            return given[key]
    return None


def _sizes(what: str, value: int | Sequence[int] | None) -> list[int]:
    if value is None:
        return []
    sizes = [value] if isinstance(value, int) else list(value)
    if not 1 <= len(sizes) <= 3 or any(not isinstance(s, int) or s < 0 for s in sizes):
        raise ValueError(f"{what} must be 1 to 3 non-negative ints, got {value!r}")
    return sizes


class Kernel:
    """A named kernel with one source per language; compiled per device on first use."""

    def __init__(
        self, name: str, sources: Mapping[str, str], options: str | Mapping[str, str] = ""
    ):
        if not name or not isinstance(name, str):
            raise ValueError("a kernel needs its entry point's name")
        if not sources:
            raise ValueError(f"kernel '{name}' has no sources")
        self.name = name
        self._sources = dict(sources)
        self._options = options
        self._handles: dict[int, int] = {}
        core = _state.require_initialized()
        self._core = core
        self.backend = _state.backend_name or ""
        self.language = core._custom_kernel_language()
        if not self.language:
            raise RuntimeError(
                f"kernel '{name}': backend '{self.backend}' has no compiler, so it cannot "
                "build custom kernels (include/flagos/compiler.h)"
            )
        source = _pick(self._sources, self.backend, self.language)
        if source is None:
            raise ValueError(
                f"kernel '{name}' has no source for backend '{self.backend}', which compiles "
                f"'{self.language}': give one under "
                + " or ".join(repr(k) for k in _keys_for(self.backend, self.language))
                + f" (given: {sorted(self._sources)})"
            )
        self.source = source
        if isinstance(options, str):
            self.options = options
        else:
            self.options = _pick(options, self.backend, self.language) or ""

    def compile(self, device: int | torch.device | None = None) -> Kernel:
        """Builds (or finds in the cache) the kernel for @p device; raises with the log."""
        self._handle(self._index(device))
        return self

    def _index(self, device: int | torch.device | None) -> int:
        if device is None:
            return torch.flagos.current_device()
        if isinstance(device, torch.device):
            if device.type != _state.DEVICE_TYPE:
                raise ValueError(f"kernel '{self.name}': {device} is not a flagos device")
            return device.index if device.index is not None else 0
        return int(device)

    def _handle(self, index: int) -> int:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._core._custom_kernel_build(index, self.name, self.source, self.options)
            self._handles[index] = handle
        return handle

    def __call__(
        self,
        *args: torch.Tensor | int | float | _Scalar,
        global_size: int | Sequence[int],
        local_size: int | Sequence[int] | None = None,
    ) -> None:
        """Enqueues one launch on the current stream of the tensors' device."""
        packed: list[torch.Tensor | bytes] = []
        device = None
        for k, arg in enumerate(args):
            if isinstance(arg, torch.Tensor):
                if arg.device.type != _state.DEVICE_TYPE:
                    raise ValueError(
                        f"kernel '{self.name}': argument {k} is on {arg.device}, not on flagos"
                    )
                if device is None:
                    device = arg.device.index or 0
                packed.append(arg)
            elif isinstance(arg, _Scalar):
                packed.append(arg.encode())
            elif isinstance(arg, bool):
                raise TypeError(
                    f"kernel '{self.name}': argument {k} is a bool; pass int32(...) or int64(...)"
                )
            elif isinstance(arg, int):
                packed.append(int64(arg).encode())
            elif isinstance(arg, float):
                packed.append(float32(arg).encode())
            else:
                raise TypeError(
                    f"kernel '{self.name}': argument {k} must be a flagos tensor or a scalar, "
                    f"got {type(arg).__name__}"
                )
        index = self._index(None) if device is None else device
        global_ = _sizes("global_size", global_size)
        if not global_:
            raise ValueError(f"kernel '{self.name}' needs a global_size")
        local = _sizes("local_size", local_size)
        self._core._custom_kernel_launch(self._handle(index), index, packed, global_, local)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, language={self.language!r}, backend={self.backend!r})"


def compile_kernel(
    name: str, sources: Mapping[str, str], options: str | Mapping[str, str] = ""
) -> Kernel:
    """A Kernel, compiled now for the current device (so a bad source fails here, with its log)."""
    return Kernel(name, sources, options).compile()
