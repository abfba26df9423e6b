"""torch.compile under the alias: inductor's default, when inductor cannot target flagos.

Dynamo traces flagos tensors fine (backends "eager" and "aot_eager" work);
the factory wrappers are declared to it with torch.compiler.allow_in_graph
(once, at the first torch.compile), so that a torch.zeros(..., device="cuda")
inside compiled code stays in the graph instead of breaking it. But
inductor, torch.compile's default backend, has no code generator for
the flagos device and fails deep inside with "KeyError: 'flagos'". A CUDA
script that calls torch.compile(model) would stop there. While inductor
has no flagos support, torch.compile without backend= (or with "inductor")
runs with "aot_eager" instead: the same graphs and autograd, eager kernels,
correct results, no fusion. It warns once and says how to choose. An
explicit other backend is left alone, and once inductor learns the flagos
device (register_backend_for_device) nothing is changed any more.
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
    from torch._inductor.codegen import common

    return common.get_scheduling_for_device("flagos") is not None


def _make_compile(original):
    @functools.wraps(original)
    def compile(model=None, *, backend=None, mode=None, options=None, **kwargs):
        global _warned
        _allow_wrappers_in_graph()
        if backend in (None, "inductor") and not inductor_supports_flagos():
            if not _warned:
                _warned = True
                warnings.warn(
                    "torch.compile: inductor has no code generator for the flagos device yet, so "
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
