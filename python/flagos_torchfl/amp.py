"""Mixed precision on the flagos device, made explicit: one policy per backend.

    import flagos_torchfl as ft
    ft.amp.get_policy()          # Policy(dtype=torch.bfloat16, supported_dtypes=..., source=...)
    ft.amp.set_policy(dtype=torch.float16)
    ft.amp.set_policy(fp32_ops=["softmax"], lower_precision_ops=["baddbmm"])

What runs in lower precision under torch.autocast("flagos") is decided in
two places:

- the op lists: csrc/dispatch/core/autocast.cpp registers CUDA's lists for
  AutocastPrivateUse1 (matmul/conv family in the autocast dtype, numerically
  sensitive ops in float32, mixed inputs promoted). A policy can move single
  operators with fp32_ops / lower_precision_ops (Python kernels registered
  on AutocastPrivateUse1 in front of the C++ ones);
- the dtype: torch.autocast("flagos") without dtype= runs in the policy's
  dtype. The plugin picks it (flagosDeviceProperties.autocast_dtype, ABI
  1.1: host says bfloat16, as CPUs have no fast float16 arithmetic; a plugin
  that says nothing gets float16, CUDA's default); FLAGOS_AMP_DTYPE or
  set_policy(dtype=) override it, and an explicit dtype= always wins.

Under the cuda alias, torch.autocast("cuda") without dtype= means float16 on
CUDA. When the policy says otherwise, the first such autocast warns once,
naming the dtype it runs in and how to choose explicitly
(Note [CUDA's autocast default]).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import torch

from . import config
from ._state import DEVICE_TYPE

__all__ = ["Policy", "get_policy", "reset_policy", "set_policy"]

CUDA_DEFAULT_DTYPE = torch.float16  # torch.get_autocast_dtype("cuda") out of the box
# What torch.get_autocast_dtype("flagos") returns until someone sets it
# (PyTorch's default for PrivateUse1); see _default_dtype_for().
_TORCH_DEFAULT_DTYPE = torch.float16

_DTYPE_NAMES = {
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float32": torch.float32,
    "fp32": torch.float32,
}


@dataclass(frozen=True)
class Policy:
    """Autocast on the flagos device.

    Attributes:
        dtype: what torch.autocast("flagos") (and "cuda" under the alias) runs
            lower-precision ops in when no dtype= is given.
        supported_dtypes: the dtypes autocast accepts on this backend.
        source: where `dtype` came from (backend default, FLAGOS_AMP_DTYPE, set_policy).
        op_lists: which op lists decide the precision per op ("cuda": CUDA's, as
            registered in csrc/dispatch/core/autocast.cpp).
        fp32_ops: operators forced to float32 under autocast (overrides).
        lower_precision_ops: operators forced to the autocast dtype (overrides).
    """

    dtype: torch.dtype
    supported_dtypes: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, torch.float32)
    source: str = ""
    op_lists: str = "cuda"
    fp32_ops: tuple[str, ...] = field(default=())
    lower_precision_ops: tuple[str, ...] = field(default=())


_lock = threading.Lock()
_policy: Policy | None = None
_overrides: torch.library.Library | None = None
_warned_cuda_default = False


def parse_dtype(value: str | torch.dtype) -> torch.dtype:
    """torch.bfloat16 for "bfloat16"/"bf16"/torch.bfloat16 (and float16, float32 alike)."""
    if isinstance(value, torch.dtype):
        return value
    try:
        return _DTYPE_NAMES[value.strip().lower()]
    except KeyError:
        raise ValueError(
            f"unknown autocast dtype {value!r}: expected one of {sorted(_DTYPE_NAMES)}"
        ) from None


def _backend_default() -> tuple[torch.dtype, str] | None:
    """The backend's preferred dtype and why; None before a backend is initialized."""
    from . import _core
    from ._state import is_initialized

    if not is_initialized():
        return None
    info = _core.C()._backend_info()
    name = info.get("name", "")
    if info.get("amp_dtype"):  # flagosDeviceProperties.autocast_dtype (ABI 1.1)
        return parse_dtype(info["amp_dtype"]), f"backend '{name}': the plugin prefers it"
    return CUDA_DEFAULT_DTYPE, f"backend '{name}': CUDA's default (the plugin states none)"


def _initial_policy() -> tuple[Policy, bool]:
    """The default policy, and whether it is final (a backend is up, or the environment says)."""
    env = config.amp_dtype()
    if env:
        return Policy(dtype=parse_dtype(env), source=f"FLAGOS_AMP_DTYPE={env}"), True
    default = _backend_default()
    if default is None:
        return Policy(dtype=CUDA_DEFAULT_DTYPE, source="no backend initialized yet"), False
    return Policy(dtype=default[0], source=default[1]), True


def get_policy() -> Policy:
    """The autocast policy of the flagos device (built on first use after initialize())."""
    global _policy
    with _lock:
        if _policy is not None:
            return _policy
        policy, final = _initial_policy()
        if final:
            _policy = policy
        return policy


def set_policy(
    dtype: torch.dtype | str | None = None,
    *,
    supported_dtypes: Iterable[torch.dtype] | None = None,
    fp32_ops: Iterable[str] | None = None,
    lower_precision_ops: Iterable[str] | None = None,
) -> Policy:
    """Change the autocast policy; arguments left None keep their value.

    Args:
        dtype: the default autocast dtype (torch.float16, torch.bfloat16 or a name).
        supported_dtypes: dtypes autocast accepts (others: autocast warns and disables).
        fp32_ops: ATen operator names ("softmax", "bmm") that run in float32
            under autocast, whatever the op lists say; [] removes the overrides.
        lower_precision_ops: ATen operator names that run in the autocast dtype.

    Returns the new policy. Raises ValueError for an unknown dtype or operator.
    """
    global _policy
    current = get_policy()
    changes: dict = {}
    if dtype is not None:
        changes["dtype"] = parse_dtype(dtype)
        changes["source"] = "set_policy"
    if supported_dtypes is not None:
        changes["supported_dtypes"] = tuple(parse_dtype(d) for d in supported_dtypes)
    if fp32_ops is not None:
        changes["fp32_ops"] = tuple(fp32_ops)
    if lower_precision_ops is not None:
        changes["lower_precision_ops"] = tuple(lower_precision_ops)
    new = replace(current, **changes)
    if new.dtype not in new.supported_dtypes:
        raise ValueError(
            f"autocast dtype {new.dtype} is not in supported_dtypes {new.supported_dtypes}"
        )
    clash = set(new.fp32_ops) & set(new.lower_precision_ops)
    if clash:
        raise ValueError(f"operators both in fp32_ops and lower_precision_ops: {sorted(clash)}")
    if (new.fp32_ops, new.lower_precision_ops) != (current.fp32_ops, current.lower_precision_ops):
        _register_overrides(new.fp32_ops, new.lower_precision_ops)
    with _lock:
        _policy = new
    return new


def reset_policy() -> Policy:
    """Back to the backend's default policy (drops every override)."""
    global _policy
    _register_overrides((), ())
    with _lock:
        _policy = None
    return get_policy()


# ------------------------------------------------------------ op overrides


def _cast(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor):
        if (
            value.is_floating_point()
            and value.device.type == DEVICE_TYPE
            and value.dtype != torch.float64
        ):
            return value.to(dtype)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _override_kernel(op, dtype: torch.dtype | None):
    """An AutocastPrivateUse1 kernel: cast floating inputs, run `op` below autocast."""
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

    def kernel(*args, **kwargs):
        target = dtype or torch.get_autocast_dtype(DEVICE_TYPE)
        with torch._C._ExcludeDispatchKeyGuard(keys):
            return op(*_cast(args, target), **{k: _cast(v, target) for k, v in kwargs.items()})

    return kernel


def _overloads(name: str):
    packet = getattr(torch.ops.aten, name, None)
    if packet is None or not isinstance(packet, torch._ops.OpOverloadPacket):
        raise ValueError(f"unknown ATen operator {name!r} in an autocast policy")
    for overload in packet.overloads():
        op = getattr(packet, overload)
        if torch.Tag.inplace_view in op.tags or op._schema.is_mutable:
            continue  # out= and in-place variants keep their dtype; autocast skips them too
        yield ("" if overload == "default" else f".{overload}"), op


def _register_overrides(fp32_ops: tuple[str, ...], lower_ops: tuple[str, ...]) -> None:
    global _overrides
    planned = [(name, torch.float32) for name in fp32_ops] + [(name, None) for name in lower_ops]
    kernels = [
        (f"{name}{suffix}", _override_kernel(op, dtype))
        for name, dtype in planned
        for suffix, op in _overloads(name)
    ]  # every name is checked before anything changes
    if _overrides is not None:
        _overrides._destroy()  # restores the C++ kernels
        _overrides = None
    if not kernels:
        return
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*[Oo]verrid.*")
        for qualified, kernel in kernels:
            library.impl(qualified, kernel, "AutocastPrivateUse1")
    _overrides = library


# ------------------------------------------------------------ torch.autocast integration

# Note [CUDA's autocast default]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch.autocast(device_type, dtype=None) resolves dtype=None through the
# thread-local torch.get_autocast_dtype(device_type), which for PrivateUse1
# is float16 in every thread until someone sets it. We resolve it from the
# policy instead, in every thread, unless this thread set its own value
# (then it differs from PyTorch's default and is kept). Under the cuda alias
# the script asked for "cuda", whose default is float16: when the policy
# says otherwise we run the policy's dtype (it is what the backend does
# well) and warn once, so that the choice is visible and can be made
# explicit.

_cuda_alias_active = False
_installed_init = None


def _set_cuda_alias(active: bool) -> None:
    """Called by the cuda alias: autocast("cuda") means autocast("flagos")."""
    global _cuda_alias_active
    _cuda_alias_active = active


def resolve_dtype(requested_cuda: bool) -> torch.dtype:
    """The dtype of an autocast on flagos created without dtype= (Note [CUDA's autocast default])."""
    global _warned_cuda_default
    thread_value = torch.get_autocast_dtype(DEVICE_TYPE)
    if thread_value != _TORCH_DEFAULT_DTYPE or torch.is_autocast_enabled(DEVICE_TYPE):
        return thread_value  # set by this thread, or inherited from an enclosing autocast
    policy = get_policy()
    if requested_cuda and policy.dtype != CUDA_DEFAULT_DTYPE and not _warned_cuda_default:
        _warned_cuda_default = True
        warnings.warn(
            f"torch.autocast('cuda') without dtype= runs in {_name(CUDA_DEFAULT_DTYPE)} on CUDA, "
            f"but under the flagos cuda alias it runs in {_name(policy.dtype)} "
            f"({policy.source}). To choose explicitly, pass dtype=torch.{_name(policy.dtype)} "
            f"(or torch.{_name(CUDA_DEFAULT_DTYPE)}) to torch.autocast, or set FLAGOS_AMP_DTYPE / "
            "flagos_torchfl.amp.set_policy(dtype=...).",
            UserWarning,
            stacklevel=_user_stacklevel(),
        )
    return policy.dtype


_INTERNAL = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)))


def _user_stacklevel() -> int:
    """The warnings stacklevel of the first caller outside torch and this package."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    return level


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _make_autocast_init(original):
    @functools.wraps(original)
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        requested_cuda = _cuda_alias_active and device_type == "cuda"
        if requested_cuda:
            device_type = DEVICE_TYPE
        if device_type == DEVICE_TYPE and not torch._jit_internal.is_scripting():
            if dtype is None:
                dtype = resolve_dtype(requested_cuda)
            supported = get_policy().supported_dtypes
            if enabled and dtype not in supported:
                warnings.warn(
                    f"flagos autocast: {dtype} is not in the backend's supported autocast dtypes "
                    f"{[_name(d) for d in supported]}; disabling autocast "
                    "(flagos_torchfl.amp.set_policy(supported_dtypes=...) changes the list).",
                    stacklevel=2,
                )
                enabled = False
        original(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    return __init__


def install() -> None:
    """Make torch.autocast on flagos follow the policy (idempotent; initialize() calls it)."""
    global _installed_init
    autocast = torch.amp.autocast_mode.autocast
    if _installed_init is not None and autocast.__init__ is _installed_init:
        return
    _installed_init = _make_autocast_init(autocast.__init__)
    _installed_init.__flagos_original__ = autocast.__dict__["__init__"]
    autocast.__init__ = _installed_init


def uninstall() -> None:
    """Undo install() (tests)."""
    global _installed_init
    autocast = torch.amp.autocast_mode.autocast
    if _installed_init is not None and autocast.__init__ is _installed_init:
        autocast.__init__ = _installed_init.__flagos_original__
    _installed_init = None


def supported_dtypes() -> list[torch.dtype]:
    """For torch.flagos.get_amp_supported_dtype(): what the policy accepts."""
    return list(get_policy().supported_dtypes)
