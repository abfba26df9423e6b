"""The post-grad pass inductor runs on every graph with flagos tensors.

It does three things a backend cannot do from its kernels:

- **falls back** where fused kernels have no equivalent: inductor's random
  ops (its seeds and draws; they appear only where fallback_random was not
  set for the graph: inductor/__init__.py, _draw_random_numbers_as_eager_does),
  accumulating stores (scatter_add, index_put with accumulate, index_add,
  embedding's backward) of dtypes without an atomic add (16- and 8-bit) and
  special functions (Bessel, orthogonal polynomials, zeta, igamma, frexp):
  those nodes run as the eager flagos operators (``should_fallback``);
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
from . import dtypes

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
# accumulating index ops grows between torch releases). Fused kernels add
# atomically into float32/float64/int32/int64 (dtypes.atomic_add); other
# dtypes run these as eager operators.
_ACCUMULATE_ALWAYS = frozenset(
    {
        "aten::scatter_add",
        "aten::scatter_add_",
        "aten::scatter_reduce",
        "aten::scatter_reduce_",
        "aten::index_add",
        "aten::index_add_",
        "aten::index_reduce",
        "aten::index_reduce_",
        "aten::embedding_dense_backward",
        "aten::_unsafe_masked_index_put_accumulate",
    }
)
_ACCUMULATE_IF_ASKED = frozenset({"aten::index_put", "aten::index_put_", "aten::_unsafe_index_put"})


def _special_functions() -> frozenset[str]:
    """ATen ops that lower to an inductor math op fused kernels do not have.

    Inductor's special functions (Bessel, orthogonal polynomials, zeta,
    igamma, ...) are one table (pointwise_overrides_data); the ATen op of
    `bessel_j0` is `special_bessel_j0` (or the name itself). frexp returns two
    values and polygamma dispatches on an integer: both eager only.
    """
    from torch._inductor.codegen.common import pointwise_overrides_data

    from .kernel import FlagosOverrides

    names = {"aten::frexp", "aten::polygamma", "aten::special_polygamma"}
    for name in pointwise_overrides_data:
        if FlagosOverrides._is_unimplemented(name):
            names |= {f"aten::{name}", f"aten::special_{name}"}
    return frozenset(names)


_SPECIAL = _special_functions()


def _accumulates(node: torch.fx.Node, name: str) -> bool:
    if name in _ACCUMULATE_ALWAYS:
        return True
    if name in _ACCUMULATE_IF_ASKED:
        return bool(node.kwargs.get("accumulate", node.args[3] if len(node.args) > 3 else False))
    if name in ("aten::scatter", "aten::scatter_"):  # reduce="add"/"multiply"
        return "reduce" in node.kwargs or len(node.args) > 4
    return False


def _needs_fallback(node: torch.fx.Node) -> bool:
    if node.target in _RANDOM:
        return True
    schema = getattr(node.target, "_schema", None)
    name = schema.name if schema is not None else ""
    if name in _SPECIAL:
        return True
    if _accumulates(node, name):
        val = node.meta.get("val")
        return not (isinstance(val, torch.Tensor) and dtypes.atomic_add_supported(val.dtype))
    return False


def _device_of(node: torch.fx.Node) -> torch.device | None:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):  # frexp, var_mean, ...: the first tensor's
        val = next((v for v in val if isinstance(v, torch.Tensor)), None)
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
