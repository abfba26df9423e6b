"""Inductor's scheduling and wrapper for the flagos device (Note [Fused kernels]).

FlagosScheduling fuses as inductor's SIMD backends do and hands each fused
group to FlagosKernel over the simplest tiling: one pointwise range and at
most one reduction range (the work item is the row, the reduction a loop or
a work-group). FlagosWrapperCodegen is inductor's Python wrapper that knows
how to call a FusedKernel (python_wrapper's non-Triton call path knows only
cpu and mps).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor.codegen.simd import SIMDScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

from .. import _state
from .kernel import FlagosKernel

PLACEHOLDER = "KERNEL_NAME"


class FlagosScheduling(SIMDScheduling):
    kernel_type = FlagosKernel  # type: ignore[assignment]

    @classmethod
    def _flat(cls, numel: sympy.Expr, reduction_numel: sympy.Expr) -> dict[str, sympy.Expr]:
        return cls.create_tiling([numel], [reduction_numel])

    @classmethod
    def select_tiling(cls, node_schedule, numel, reduction_numel=sympy.S.One, *args, **kwargs):
        return cls._flat(numel, reduction_numel)

    @classmethod
    def get_tiling_and_scores(
        cls, node_schedule, numel, reduction_numel=sympy.S.One, *args, **kwargs
    ):
        return cls._flat(numel, reduction_numel), None

    def define_kernel(self, src_code: str, node_schedule: Any, kernel: FlagosKernel) -> str:
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        name = f"flagos_fused_{wrapper.next_kernel_suffix()}"
        wrapper.src_to_kernel[src_code] = name
        header = wrapper.header
        if not getattr(header, "_flagos_runtime", False):
            header.writeline("from flagos_torchfl.inductor.runtime import flagos_fused_kernel")
            header._flagos_runtime = True
        header.writeline(f"{name} = {src_code.replace(PLACEHOLDER, repr(name), 1)}")
        return name


class _FlagosCalls:
    """python_wrapper's non-Triton call path knows only cpu and mps: flagos calls go straight."""

    def _generate_kernel_call_helper(
        self, kernel_name: str, call_args, *, device=None, triton=True, **kwargs
    ):
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == _state.DEVICE_TYPE:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return None
        return super()._generate_kernel_call_helper(
            kernel_name, call_args, device=device, triton=triton, **kwargs
        )


class FlagosWrapperCodegen(_FlagosCalls, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return FlagosSubgraphWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return FlagosWrapperCodegen()


class FlagosSubgraphWrapperCodegen(_FlagosCalls, SubgraphPythonWrapperCodegen):
    pass


def set_device_limits(language: str, work_groups: bool, group_size: int, fp64: bool) -> None:
    """What the active backend's kernels may use (called at registration)."""
    FlagosKernel.language = language
    FlagosKernel.work_groups = work_groups
    FlagosKernel.group_size = group_size
    FlagosKernel.fp64 = fp64
