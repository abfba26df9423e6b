"""The post-grad pass inductor runs on every graph with flagos tensors.

It does three things a backend cannot do from its kernels:

- **falls back** where fused kernels have no equivalent: inductor's random
  ops (its Philox seeds and draws: the eager flagos operators draw instead)
  and stores that would need atomic adds (scatter_add, index_put with
  accumulate, index_add, embedding's backward): those nodes run as the
  eager flagos operators (``should_fallback``);
- **moves 0-dim CPU tensors** that meet flagos tensors to the device first:
  inductor picks a pointwise kernel's device from its first GPU input, and
  flagos is not a GPU type, so ``torch.tensor(3.) * x`` would otherwise be
  a CPU kernel reading device memory;
- **names the backend** in inductor's FX graph cache key (uuid()): a graph
  compiled for one plugin is never served to another, nor after this
  package's code generator changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
import torch._inductor.inductor_prims  # noqa: F401  (registers prims.inductor_*)
from torch._inductor.custom_graph_pass import CustomGraphModulePass

from .. import _state

_aten = torch.ops.aten
_prims = torch.ops.prims

# Inductor's own random numbers (replace_random.py): counter-based draws
# inside kernels, which fused kernels do not have.
_RANDOM = {
    _prims.inductor_seeds.default,
    _prims.inductor_lookup_seed.default,
    _prims.inductor_random.default,
    _prims.inductor_randint.default,
}
# Lowerings that store with mode="atomic_add" (by ATen name: the set of
# accumulating index ops grows between torch releases).
_ATOMIC_ALWAYS = frozenset(
    {
        "aten::scatter_add",
        "aten::scatter_reduce",
        "aten::index_add",
        "aten::index_reduce",
        "aten::embedding_dense_backward",
        "aten::_unsafe_masked_index_put_accumulate",
    }
)
_ACCUMULATING = frozenset({"aten::index_put", "aten::index_put_", "aten::_unsafe_index_put"})


def _needs_fallback(node: torch.fx.Node) -> bool:
    if node.target in _RANDOM:
        return True
    schema = getattr(node.target, "_schema", None)
    name = schema.name if schema is not None else ""
    if name in _ATOMIC_ALWAYS:
        return True
    if name in _ACCUMULATING:
        accumulate = node.kwargs.get("accumulate", node.args[3] if len(node.args) > 3 else False)
        return bool(accumulate)
    return False


def _device_of(node: torch.fx.Node) -> torch.device | None:
    val = node.meta.get("val")
    return val.device if isinstance(val, torch.Tensor) else None


def _cpu_scalar(arg: object) -> bool:
    if not isinstance(arg, torch.fx.Node):
        return False
    val = arg.meta.get("val")
    return isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dim() == 0


class FlagosGraphPass(CustomGraphModulePass):
    def __init__(self, language: str, group: int):
        digest = hashlib.sha256()
        for path in sorted(Path(__file__).parent.glob("*.py")):
            digest.update(path.read_bytes())
        info = _state.require_initialized()._backend_info()
        self._uuid = (
            f"flagos:{info.get('name')}:{info.get('version')}:{language}:{group}:"
            f"{digest.hexdigest()[:16]}"
        )

    def uuid(self) -> str:
        return self._uuid

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        graph = gm.graph
        for node in list(graph.nodes):
            if node.op != "call_function":
                continue
            device = _device_of(node)
            if device is None or device.type != _state.DEVICE_TYPE:
                continue
            if _needs_fallback(node):
                node.meta["should_fallback"] = True
            for arg in list(node.args) + list(node.kwargs.values()):
                if _cpu_scalar(arg):
                    with graph.inserting_before(node):
                        moved = graph.call_function(_prims.device_put.default, (arg, device))
                    moved.meta["val"] = arg.meta["val"].to(device)
                    node.replace_input_with(arg, moved)
        graph.lint()
        gm.recompile()
