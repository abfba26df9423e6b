"""The cuda alias: unmodified CUDA scripts run on the flagos device.

While active, "cuda", "cuda:N" and torch.device("cuda"[, N]) mean the
flagos device wherever PyTorch takes a device, and torch.cuda.* answers for
flagos (docs/cuda-alias.md lists exactly what is covered and what is not).

When it is active (decide()):

- FLAGOS_ALIAS_CUDA=0: never;
- FLAGOS_ALIAS_CUDA=1, or FLAGOS_BACKEND set: once a flagos backend is
  initialized, even where native CUDA works (the user asked for flagos);
- otherwise (FLAGOS_ALIAS_CUDA unset or "auto"): once a flagos backend is
  initialized, if native CUDA is not usable (a CPU-only torch, or a CUDA
  build that sees no GPU). Where native CUDA works nothing is patched.

initialize() calls activate_cuda_alias() at its end; activate(), deactivate()
and is_active() are for tests and tools.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from .. import config
from . import (
    _accelerator,
    _amp,
    _compile,
    _distributed,
    _factories,
    _parallel,
    _script,
    _serialization,
    _torch_cuda,
)
from ._names import flagos_device, is_cuda_device, to_flagos
from ._patcher import Patcher

__all__ = [
    "Decision",
    "activate",
    "activate_cuda_alias",
    "deactivate",
    "decide",
    "flagos_device",
    "incompatibilities",
    "is_active",
    "is_cuda_device",
    "native_cuda_available",
    "status",
    "to_flagos",
]

# Note [Wrappers, not a TorchFunctionMode]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A TorchFunctionMode at the bottom of the mode stack (how torch's own
# set_default_device works) sees every torch call and could rewrite each
# device argument. We measured it here and chose plain wrappers instead:
#
# - cost: every torch call goes through Python, +3.6 us per op on the host
#   backend (an `add` of 64 floats: 17.9 -> 21.5 us); a wrapper costs only
#   the calls that take a device (factories, .to(), .cuda(), ...);
# - reach: modes are thread-local, and a mode is popped while its own
#   handler runs. Tensor.backward() is itself a torch function, so the
#   autograd engine copies a mode-less state into its device threads, and a
#   custom autograd.Function.backward (or checkpoint recomputation) calling
#   torch.zeros(..., device="cuda") failed with "Torch not compiled with
#   CUDA enabled". Python threads (DataLoader pin thread, user threads) start
#   without the mode too. Wrapped module attributes are global: every thread,
#   every nesting level.
#
# The price: references taken before activation (`from torch import zeros`
# executed earlier) keep the unwrapped function, so activation must come
# before user code imports libraries. Autoload (FLAGOS_BACKEND) and
# `flagos-torchfl run` activate inside `import torch`, before anything else.


@dataclass(frozen=True)
class Decision:
    active: bool
    reason: str


_lock = threading.RLock()
_patcher: Patcher | None = None
_decision: Decision | None = None
_native_probe_result: bool | None = None


def native_cuda_available() -> bool:
    """Does this torch have working native CUDA? (Probed once, before any patch.)"""
    global _native_probe_result
    if _native_probe_result is None:
        if _patcher is not None:
            probe = _patcher.original(torch.cuda, "is_available")
        else:
            probe = torch.cuda.is_available
        try:
            _native_probe_result = bool(torch.backends.cuda.is_built() and probe())
        except Exception:  # noqa: BLE001 - a broken driver means "not usable"
            _native_probe_result = False
    return _native_probe_result


def _flagos_ready() -> bool:
    from .._state import is_initialized

    return is_initialized()


_SETTINGS = {
    **dict.fromkeys(("0", "false", "no", "off"), "0"),
    **dict.fromkeys(("1", "true", "yes", "on"), "1"),
    **dict.fromkeys(("", "auto"), "auto"),
}


def setting() -> str:
    """FLAGOS_ALIAS_CUDA as "0", "1" or "auto"; ValueError for anything else."""
    value = (config.alias_cuda() or "").strip().lower()
    if value not in _SETTINGS:
        raise ValueError(f"FLAGOS_ALIAS_CUDA={value!r}: expected 0, 1 or auto")
    return _SETTINGS[value]


def decide() -> Decision:
    """Should the alias be active in this process, and why (see the module docstring)."""
    setting_ = setting()
    if setting_ == "0":
        return Decision(False, "FLAGOS_ALIAS_CUDA=0")
    if not _flagos_ready():
        return Decision(False, "no flagos backend is initialized")
    if setting_ == "1":
        return Decision(True, "FLAGOS_ALIAS_CUDA=1")
    if config.backend():
        return Decision(True, f"FLAGOS_BACKEND={config.backend()} selects the unified layer")
    if native_cuda_available():
        return Decision(
            False,
            "native CUDA is available (FLAGOS_BACKEND or FLAGOS_ALIAS_CUDA=1 forces the alias)",
        )
    return Decision(True, "no usable native CUDA")


def activate_cuda_alias() -> Decision:
    """initialize()'s hook: activate the alias if decide() says so. Returns the decision."""
    global _decision
    decision = decide()
    with _lock:
        _decision = decision
    if decision.active:
        activate()
    return decision


def activate() -> None:
    """Patch torch so that "cuda" means flagos (idempotent). Needs an initialized backend."""
    global _patcher, _decision
    with _lock:
        if _patcher is not None:
            return
        if not _flagos_ready():
            raise RuntimeError(
                "the cuda alias needs an initialized flagos backend: call "
                "flagos_torchfl.initialize() first"
            )
        native_cuda_available()  # probe before torch.cuda.is_available is replaced
        patcher = Patcher()
        try:
            _factories.install(patcher)
            _parallel.install(patcher)
            _torch_cuda.install(patcher)
            _accelerator.install(patcher)
            _amp.install(patcher)
            _distributed.install(patcher)
            _compile.install(patcher)
            _serialization.install()
            _script.register(patcher)
        except BaseException:
            _script.unregister()
            patcher.undo()
            _amp.uninstall()
            _serialization.uninstall()
            raise
        _patcher = patcher
        if _decision is None or not _decision.active:
            _decision = Decision(True, "activated explicitly")


def deactivate() -> None:
    """Undo activate(): torch is as it was before (idempotent)."""
    global _patcher, _decision
    with _lock:
        if _patcher is None:
            return
        _script.unregister()
        _serialization.uninstall()
        _amp.uninstall()
        _patcher.undo()
        _patcher = None
        _decision = Decision(False, "deactivated")


def incompatibilities() -> list[str]:
    """Patched attributes that no longer look as torch introspects them (empty: none).

    torch reads attributes of its own callables, not only calls them
    (dynamo: ``torch.cuda.use_mem_pool.__wrapped__``); a replacement must
    keep ``__wrapped__`` where the original had one, and be a class where
    the original was a class (isinstance and subclass checks).
    """
    from ._patcher import missing

    with _lock:
        if _patcher is None:
            return []
        found = []
        for owner, name, previous in _patcher.patched():
            if previous is missing():
                continue
            now = getattr(owner, name, None)
            where = f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"
            if hasattr(previous, "__wrapped__") and not hasattr(now, "__wrapped__"):
                found.append(f"{where} lost __wrapped__")
            if isinstance(previous, type) != isinstance(now, type):
                found.append(
                    f"{where} was {'a class' if isinstance(previous, type) else 'no class'}"
                )
        return found


def is_active() -> bool:
    return _patcher is not None


def status() -> dict:
    """For reports (info, doctor): active or not, why, and how much is patched."""
    return {
        "active": is_active(),
        "reason": _decision.reason if _decision else "not decided (initialize() not called)",
        "native_cuda": native_cuda_available(),
        "patched_attributes": len(_patcher) if _patcher else 0,
    }
