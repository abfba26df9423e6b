"""Mixed precision spelled for CUDA: torch.autocast("cuda"), GradScaler("cuda"), torch.cuda.amp.

The dtype policy itself lives in flagos_torchfl.amp; here "cuda" becomes
"flagos" wherever a device type names the autocast or scaler device.
"""

from __future__ import annotations

import functools
import sys
import warnings

import torch

from .. import amp
from ._patcher import Patcher


def _flagos_type(device_type):
    return "flagos" if device_type == "cuda" else device_type


def _make_grad_scaler_init(original):
    @functools.wraps(original)
    def __init__(self, device="cuda", *args, **kwargs):
        original(self, _flagos_type(device), *args, **kwargs)

    return __init__


def _make_device_type_function(original, default_to_flagos: bool):
    """torch.is_autocast_enabled("cuda") & co read the flagos autocast state.

    With default_to_flagos, the no-argument form (which means CUDA) does too.
    """

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if args and isinstance(args[0], str):
            args = (_flagos_type(args[0]), *args[1:])
        elif "device_type" in kwargs:
            kwargs["device_type"] = _flagos_type(kwargs["device_type"])
        elif default_to_flagos and not args and not kwargs:
            args = ("flagos",)
        return original(*args, **kwargs)

    return wrapper


def _make_gpu_dtype_function(getter: bool):
    if getter:

        def get_autocast_gpu_dtype():
            return torch.get_autocast_dtype("flagos")

        return get_autocast_gpu_dtype

    def set_autocast_gpu_dtype(dtype):
        torch.set_autocast_dtype("flagos", dtype)

    return set_autocast_gpu_dtype


def _make_custom(original):
    @functools.wraps(original)
    def custom(*args, device_type, **kwargs):
        return original(*args, device_type=_flagos_type(device_type), **kwargs)

    return custom


class _CudaAmpAutocast(torch.amp.autocast_mode.autocast):
    """torch.cuda.amp.autocast under the alias.

    Same as CUDA's (deprecated) class, except that dtype defaults to None,
    so that the flagos policy and its warning apply when the script did not
    choose a dtype (Note [CUDA's autocast default] in flagos_torchfl/amp.py).
    """

    if sys.version_info < (3, 13):

        def __new__(cls, enabled=True, dtype=None, cache_enabled=True):
            return super().__new__(cls)

    def __init__(
        self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True
    ):
        warnings.warn(
            "`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cuda', args...)` instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def install(patcher: Patcher) -> None:
    amp.install()
    amp._set_cuda_alias(True)

    scaler = torch.amp.grad_scaler.GradScaler
    patcher.set(scaler, "__init__", _make_grad_scaler_init(scaler.__init__))

    for name, default_to_flagos in (
        ("is_autocast_enabled", True),
        ("set_autocast_enabled", False),
        ("get_autocast_dtype", False),
        ("set_autocast_dtype", False),
    ):
        patcher.set(
            torch, name, _make_device_type_function(getattr(torch, name), default_to_flagos)
        )
    patcher.set(torch, "get_autocast_gpu_dtype", _make_gpu_dtype_function(getter=True))
    patcher.set(torch, "set_autocast_gpu_dtype", _make_gpu_dtype_function(getter=False))

    for module in (torch.amp, torch.amp.autocast_mode):
        for name in ("custom_fwd", "custom_bwd"):
            patcher.set(module, name, _make_custom(getattr(torch.amp.autocast_mode, name)))

    patcher.set(torch.cuda.amp, "autocast", _CudaAmpAutocast)
    patcher.set(torch.cuda.amp.autocast_mode, "autocast", _CudaAmpAutocast)


def uninstall() -> None:
    amp._set_cuda_alias(False)
