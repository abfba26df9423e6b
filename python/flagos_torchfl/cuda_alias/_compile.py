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


# Note [Compile modes without CUDA graphs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# "reduce-overhead" and "max-autotune" turn on inductor's CUDA graphs, whose
# checks trust torch.cuda.is_available() (True under the alias) and then call
# CUDA-only bindings (AttributeError: torch._C has no attribute
# '_cuda_cudaCachingAllocator_is_enabled'). The flagos device has no graph
# capture, so under the alias those modes become what they are without
# graphs: "max-autotune-no-cudagraphs", and the default mode for
# "reduce-overhead" (whose whole point is CUDA graphs), with one warning.
_GRAPH_MODES = {"reduce-overhead": None, "max-autotune": "max-autotune-no-cudagraphs"}
_warned_modes: set[str] = set()


def _without_cuda_graphs(mode, options):
    if mode in _GRAPH_MODES:
        if mode not in _warned_modes:
            _warned_modes.add(mode)
            instead = _GRAPH_MODES[mode]
            warnings.warn(
                f"torch.compile(mode={mode!r}) on the flagos device: CUDA graphs are not "
                "available there (no graph capture), so it runs as "
                + (f"mode={instead!r}" if instead else "the default mode")
                + " (fused kernels, no graphs).",
                UserWarning,
                stacklevel=3,
            )
        mode = _GRAPH_MODES[mode]
    if options and options.get("triton.cudagraphs"):
        options = {**options, "triton.cudagraphs": False}
    return mode, options


def _make_compile(original):
    @functools.wraps(original)
    def compile(model=None, *, backend=None, mode=None, options=None, **kwargs):
        global _warned
        _allow_wrappers_in_graph()
        if backend in (None, "inductor"):
            mode, options = _without_cuda_graphs(mode, options)
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
