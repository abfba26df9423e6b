"""torch.compile under the alias: inductor where it can target flagos, else aot_eager.

Dynamo traces flagos tensors fine; the factory wrappers are declared to it
with torch.compiler.allow_in_graph (once, at the first torch.compile), so
that a torch.zeros(..., device="cuda") inside compiled code stays in the
graph instead of breaking it. Inductor, torch.compile's default backend,
targets flagos through flagos_torchfl.inductor (fused kernels through the
plugin's compiler slot) when the plugin has a compiler and FLAGOS_COMPILE is
not off. Otherwise inductor has no code generator for the device and would
fail deep inside with "KeyError: 'flagos'", so a CUDA script that calls
torch.compile(model) runs with "aot_eager" instead: the same graphs and
autograd, eager kernels, correct results, no fusion. It warns once and says
why and how to choose. An explicit other backend is left alone.
"""

from __future__ import annotations

import functools
import warnings
import weakref

import torch

from ._factories import installed_wrappers
from ._patcher import Patcher

FALLBACK = "aot_eager"
_warned = False
_in_graph: weakref.WeakSet = weakref.WeakSet()


def _allow_wrappers_in_graph() -> None:
    for wrapper in installed_wrappers():
        if wrapper not in _in_graph:
            torch.compiler.allow_in_graph(wrapper)
            _in_graph.add(wrapper)


def inductor_supports_flagos() -> bool:
    # Registers the flagos inductor backend (lazily: inductor is not yet
    # imported) where the plugin has a compiler and FLAGOS_COMPILE is on.
    from ..inductor import register

    return register()


def _why_not() -> str:
    from .. import config

    if not config.compile_enabled():
        return "FLAGOS_COMPILE=off"
    return "the backend's plugin has no compiler"


def _make_compile(original):
    @functools.wraps(original)
    def compile(model=None, *, backend=None, mode=None, options=None, **kwargs):
        global _warned
        _allow_wrappers_in_graph()
        if backend in (None, "inductor") and not inductor_supports_flagos():
            if not _warned:
                _warned = True
                warnings.warn(
                    f"torch.compile: inductor cannot target the flagos device ({_why_not()}), so "
                    f"under the flagos cuda alias torch.compile runs with backend='{FALLBACK}' "
                    "(graphs captured, eager kernels, correct results, no fusion"
                    + (
                        f"; mode={mode!r} and options are inductor settings, ignored"
                        if mode or options
                        else ""
                    )
                    + "). Pass backend= to choose another backend.",
                    UserWarning,
                    stacklevel=2,
                )
            backend, mode, options = FALLBACK, None, None
        if backend is None:
            backend = "inductor"
        return original(model, backend=backend, mode=mode, options=options, **kwargs)

    return compile


def install(patcher: Patcher) -> None:
    patcher.set(torch, "compile", _make_compile(torch.compile))
