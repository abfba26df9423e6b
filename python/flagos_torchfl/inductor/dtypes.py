"""torch dtypes in fused kernel bodies (Note [Fused kernel bodies], csrc/jit/gen/fused.h).

Values compute in the type compute_type() names: 16-bit floats load into
float and round only when stored, as inductor's other backends do.
"""

from __future__ import annotations

import torch

_COMPUTE = {
    torch.bool: "bool",
    torch.int8: "flagos_i8",
    torch.uint8: "flagos_u8",
    torch.int16: "flagos_i16",
    torch.int32: "flagos_i32",
    torch.int64: "flagos_i64",
    torch.float16: "float",
    torch.bfloat16: "float",
    torch.float32: "float",
    torch.float64: "double",
}

# include/flagos/status.h: (kind << 8) | bits.
_FLAGOS_CODE = {
    torch.bool: (6 << 8) | 8,
    torch.uint8: (1 << 8) | 8,
    torch.int8: 8,
    torch.int16: 16,
    torch.int32: 32,
    torch.int64: 64,
    torch.float16: (2 << 8) | 16,
    torch.bfloat16: (4 << 8) | 16,
    torch.float32: (2 << 8) | 32,
    torch.float64: (2 << 8) | 64,
}

_INT64_MIN = "(-(flagos_i64)0x7fffffffffffffff - 1)"
_INT64_MAX = "((flagos_i64)0x7fffffffffffffff)"


def supported(dtype: torch.dtype) -> bool:
    return dtype in _COMPUTE


def _check(dtype: torch.dtype) -> None:
    if dtype not in _COMPUTE:
        raise NotImplementedError(f"flagos fused kernels: dtype {dtype}")


def compute_type(dtype: torch.dtype | None) -> str:
    """The C type a value of @p dtype computes in (float for an unknown one)."""
    if dtype is None:
        return "float"
    _check(dtype)
    return _COMPUTE[dtype]


def flagos_code(dtype: torch.dtype) -> int:
    _check(dtype)
    return _FLAGOS_CODE[dtype]


def suffix(dtype: torch.dtype | None) -> str:
    """The helpers' suffix: f (float), d (double), i (int64 and smaller ints, bool)."""
    if dtype is None or dtype in (torch.float16, torch.bfloat16, torch.float32):
        return "f"
    if dtype == torch.float64:
        return "d"
    return "i"


def load(dtype: torch.dtype, ptr: str, index: str) -> str:
    _check(dtype)
    if dtype == torch.float16:
        return f"FLAGOS_LD_F16({ptr}, {index})"
    if dtype == torch.bfloat16:
        return f"FLAGOS_LD_BF16({ptr}, {index})"
    if dtype == torch.bool:
        return f"({ptr}[{index}] != 0)"
    return f"{ptr}[{index}]"


def store(dtype: torch.dtype, ptr: str, index: str, value: object) -> str:
    _check(dtype)
    if dtype == torch.float16:
        return f"FLAGOS_ST_F16({ptr}, {index}, {value});"
    if dtype == torch.bfloat16:
        return f"FLAGOS_ST_BF16({ptr}, {index}, {value});"
    if dtype == torch.bool:
        return f"{ptr}[{index}] = (flagos_u8)(({value}) != 0);"
    return f"{ptr}[{index}] = ({_COMPUTE[dtype]})({value});"


# Atomic adds a fused kernel can store (csrc/jit/gen/emit_*.cpp, FLAGOS_ATOMIC_ADD).
_ATOMIC = {torch.float32: "f", torch.float64: "d", torch.int32: "i32", torch.int64: "i64"}


def atomic_add_supported(dtype: torch.dtype) -> bool:
    return dtype in _ATOMIC


def atomic_add(dtype: torch.dtype, ptr: str, index: str, value: object) -> str:
    if dtype not in _ATOMIC:
        raise NotImplementedError(f"flagos fused kernels: atomic add of {dtype}")
    return f"FLAGOS_ATOMIC_ADD({_ATOMIC[dtype]}, &{ptr}[{index}], ({_COMPUTE[dtype]})({value}));"


def accumulate_dtype(src: torch.dtype, reduction_type: str) -> torch.dtype:
    """Floats accumulate in float (double for double), everything else in int64."""
    if src == torch.float64:
        return torch.float64
    if src.is_floating_point or reduction_type.startswith("welford"):
        return torch.float32
    return torch.int64


def identity(reduction_type: str, dtype: torch.dtype) -> str:
    floating = dtype.is_floating_point
    if reduction_type in ("max", "argmax"):
        return "-INFINITY" if floating else _INT64_MIN
    if reduction_type in ("min", "argmin"):
        return "INFINITY" if floating else _INT64_MAX
    return "1" if reduction_type == "prod" else "0"


def max_fn(dtype: torch.dtype) -> str:
    return f"flagos_max{suffix(dtype)}" if dtype.is_floating_point else "flagos_imax"


def min_fn(dtype: torch.dtype) -> str:
    return f"flagos_min{suffix(dtype)}" if dtype.is_floating_point else "flagos_imin"


INT64_MAX = _INT64_MAX
