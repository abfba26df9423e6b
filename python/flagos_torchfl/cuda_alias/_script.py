"""TorchScript under the alias: the wrappers compile as the builtins they wrap.

TorchScript resolves a call like torch.zeros_like(x) by looking the function
object up in its builtin table (torch.jit._builtins, keyed by id) and emits
aten::zeros_like. The alias replaces torch.zeros_like by a Python wrapper,
which is not in the table, so TorchScript tried to compile the wrapper's
source, reached the original (a builtin_function_or_method) and failed:
"module, class, method, function ... was expected, got
builtin_function_or_method" -- for any scripted function calling a wrapped
factory, and for torch's own scripted helpers (test_unbind, forward AD's
tests). Each wrapper of a builtin is registered under its builtin's op, and
removed again on deactivate.

Scripted code therefore calls ATen directly, without the alias: a "cuda"
device string inside TorchScript still fails as on a CPU-only torch
(docs/cuda-alias.md), while devices taken from tensors (x.device) work.
"""

from __future__ import annotations

from ._patcher import Patcher, missing

_registered: list[int] = []


def register(patcher: Patcher) -> None:
    try:
        from torch.jit import _builtins
    except ImportError:
        return
    table = _builtins._get_builtin_table()
    for owner, name, previous in patcher.patched():
        if previous is missing():
            continue
        op = table.get(id(previous))
        now = getattr(owner, name, None)
        if op is not None and now is not None and id(now) not in table:
            table[id(now)] = op
            _registered.append(id(now))


def unregister() -> None:
    try:
        from torch.jit import _builtins
    except ImportError:
        return
    table = _builtins._get_builtin_table()
    while _registered:
        table.pop(_registered.pop(), None)
