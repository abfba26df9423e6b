"""Inductor's fused loops as flagos kernel bodies (Note [Fused kernel bodies]).

FlagosKernel is a SIMDKernel, as torch/_inductor/codegen/mps.py's MetalKernel
is: inductor hands it loads, stores, pointwise ops and reductions over one
pointwise range (``xindex``) and at most one reduction range (``r0_index``),
and it writes a body in the neutral C subset that csrc/jit/gen/fused.h
defines. The active plugin's Dialect (C++) frames that body in OpenCL C or
C, so nothing here knows a language's argument conventions.

Layout of a body: the index variables of ``xindex`` and the accumulators
first (``indexing_code``), then, per reduction stage, ``FLAGOS_RLOOP(r0_index,
r0_numel) { loads; compute }`` followed by the work-group combine and the
stores of reduced values. Every CSE temporary is declared once at the top
with its C type (C99 and OpenCL C have no ``auto``).
"""

from __future__ import annotations

import math
from typing import Any

import sympy
import torch
from sympy.printing.precedence import PRECEDENCE
from torch._inductor.codegen.common import (
    CSEVariable,
    DeferredLine,
    IndentedBuffer,
    OpOverrides,
    PythonPrinter,
)
from torch._inductor.codegen.simd import SIMDKernel
from torch._inductor.utils import get_bounds_index_expr
from torch._inductor.virtualized import OpsWrapper, V, ops
from torch.utils._sympy.printers import ExprPrinter

from .. import _state
from . import dtypes

# Reductions whose per-item accumulation and work-group combine exist.
REDUCTIONS = frozenset(
    {"sum", "prod", "max", "min", "any", "argmax", "argmin", "welford_reduce", "welford_combine"}
)


def constant(value: Any, dtype: torch.dtype | None) -> str:
    """A literal of @p dtype: float32 literals carry f (no double on devices without fp64)."""
    if isinstance(value, bool) or dtype == torch.bool:
        # Not 1/0: the CSE keys of a bool and an int constant must differ.
        return "true" if value else "false"
    if isinstance(value, float) or (dtype is not None and dtype.is_floating_point):
        value = float(value)
        if math.isinf(value):
            return "INFINITY" if value > 0 else "-INFINITY"
        if math.isnan(value):
            return "NAN"
        text = repr(value)
        return text if dtype == torch.float64 else f"{text}f"
    return str(int(value))


class FlagosExprPrinter(ExprPrinter):
    """Index and size expressions (sympy) in the neutral C subset."""

    def _print_FloorDiv(self, expr: sympy.Expr) -> str:
        x, div = expr.args
        if x.is_nonnegative and div.is_positive:
            return f"({self.paren(x)} / {self.paren(div)})"
        return f"flagos_ifloordiv({self.doprint(x)}, {self.doprint(div)})"

    _print_CleanDiv = _print_FloorDiv

    def _print_ModularIndexing(self, expr: sympy.Expr) -> str:
        x, div, mod = expr.args
        x = self.paren(x)
        if div != 1:
            x = f"({x} / {self.paren(div)})"
        return f"({x} % {self.paren(mod)})"

    def _print_PythonMod(self, expr: sympy.Expr) -> str:
        a, b = expr.args
        if a.is_nonnegative and b.is_positive:
            return f"({self.paren(a)} % {self.paren(b)})"
        return f"flagos_ipymod({self.doprint(a)}, {self.doprint(b)})"

    def paren(self, e: sympy.Expr) -> str:
        return self.parenthesize(e, PRECEDENCE["Atom"] - 0.5)

    def _print_Not(self, expr: sympy.Expr) -> str:
        return f"!({self.doprint(expr.args[0])})"

    def _print_And(self, expr: sympy.Expr) -> str:
        return self.stringify(expr.args, " && ", PRECEDENCE["And"])

    def _print_Or(self, expr: sympy.Expr) -> str:
        return self.stringify(expr.args, " || ", PRECEDENCE["Or"])

    def _min_max(self, expr: sympy.Expr, name: str) -> str:
        args = [self.doprint(a) for a in expr.args]
        fn = f"flagos_i{name}" if expr.is_integer else f"flagos_{name}f"
        out = args[0]
        for a in args[1:]:
            out = f"{fn}({out}, {a})"
        return out

    def _print_Min(self, expr: sympy.Expr) -> str:
        return self._min_max(expr, "min")

    def _print_Max(self, expr: sympy.Expr) -> str:
        return self._min_max(expr, "max")

    def _print_Abs(self, expr: sympy.Expr) -> str:
        fn = "flagos_iabs" if expr.is_integer else "fabs"
        return f"{fn}({self.doprint(expr.args[0])})"

    def _print_Where(self, expr: sympy.Expr) -> str:
        c, p, q = (self.parenthesize(a, PRECEDENCE["Atom"] - 0.5) for a in expr.args)
        return f"({c} ? {p} : {q})"

    def _print_PowByNatural(self, expr: sympy.Expr) -> str:
        x, y = expr.args
        return f"flagos_ipow({self.doprint(x)}, {self.doprint(y)})"

    def _print_IntTrueDiv(self, expr: sympy.Expr) -> str:
        a, b = expr.args
        return f"((float)({self.doprint(a)}) / (float)({self.doprint(b)}))"

    def _print_ToFloat(self, expr: sympy.Expr) -> str:
        return f"((float)({self.doprint(expr.args[0])}))"

    def _print_Float(self, expr: sympy.Expr) -> str:
        return constant(float(expr), torch.float32)

    def _print_Infinity(self, expr: sympy.Expr) -> str:
        return "INFINITY"

    def _print_NegativeInfinity(self, expr: sympy.Expr) -> str:
        return "-INFINITY"

    def _print_NaN(self, expr: sympy.Expr) -> str:
        return "NAN"

    def _to_int(self, fn: str, expr: sympy.Expr) -> str:
        return f"((flagos_i64){fn}({self.doprint(expr.args[0])}))"

    def _print_FloorToInt(self, expr: sympy.Expr) -> str:
        return self._to_int("floor", expr)

    def _print_CeilToInt(self, expr: sympy.Expr) -> str:
        return self._to_int("ceil", expr)

    def _print_TruncToInt(self, expr: sympy.Expr) -> str:
        return self._to_int("trunc", expr)

    def _print_RoundToInt(self, expr: sympy.Expr) -> str:
        return self._to_int("rint", expr)

    def _print_floor(self, expr: sympy.Expr) -> str:
        return f"floor({self.doprint(expr.args[0])})"

    def _print_ceiling(self, expr: sympy.Expr) -> str:
        return f"ceil({self.doprint(expr.args[0])})"

    def _print_OpaqueUnaryFn_sqrt(self, expr: sympy.Expr) -> str:
        return f"sqrt({self.doprint(expr.args[0])})"

    def _print_OpaqueUnaryFn_log2(self, expr: sympy.Expr) -> str:
        return f"log2({self.doprint(expr.args[0])})"


_printer = FlagosExprPrinter()


def _float_dtype(*values: Any) -> torch.dtype | None:
    """The floating dtype these operands compute in, None when all are integers.

    An operand without a dtype (a literal) decides nothing; with none known
    the values are taken as float.
    """
    known = [v.dtype for v in values if getattr(v, "dtype", None) is not None]
    if not known:
        return torch.float32
    floats = [d for d in known if d.is_floating_point]
    if not floats:
        return None
    return torch.float64 if torch.float64 in floats else torch.float32


def _is_float(*values: Any) -> bool:
    return _float_dtype(*values) is not None


def _suffix(*values: Any) -> str:
    """The helper suffix of the operands' compute type: f (float), d (double), i (ints)."""
    return dtypes.suffix(_float_dtype(*values) or torch.int64)


class FlagosOverrides(OpOverrides):
    """Pointwise ops as neutral C expressions (Note [Fused kernel bodies])."""

    @staticmethod
    def constant(value: bool | float | int, dtype: torch.dtype) -> str:
        return constant(value, dtype)

    @staticmethod
    def to_dtype(
        x: CSEVariable,
        dtype: torch.dtype,
        src_dtype: torch.dtype | None = None,
        use_compute_types: bool = True,
    ) -> str:
        if dtype == torch.bool:
            return f"({x} != 0)"
        return f"(({dtypes.compute_type(dtype)})({x}))"

    @staticmethod
    def to_dtype_bitcast(x: CSEVariable, dtype: torch.dtype, src_dtype: torch.dtype) -> str:
        raise NotImplementedError("flagos fused kernels: bitcast")

    @staticmethod
    def index_expr(expr: sympy.Expr, dtype: torch.dtype) -> str:
        idx = V.kernel.index_to_str(V.kernel.prepare_indexing(expr))
        var = V.kernel.cse.generate(
            V.kernel.compute, idx, bounds=get_bounds_index_expr(expr), dtype=torch.int64
        )
        return ops.to_dtype(var, dtype)

    @staticmethod
    def value_expr(expr: sympy.Expr, dtype: torch.dtype) -> str:
        return FlagosOverrides.index_expr(expr, dtype)

    @staticmethod
    def masked(mask: CSEVariable, body: Any, other: Any) -> str:
        # The body's lines go inside an if, so its loads run only where the
        # mask holds (padding, out-of-range gathers).
        scoped = IndentedBuffer()
        with V.kernel.swap_buffers(scoped), scoped.indent():
            result = body()
        key = f"{mask}:{scoped.getvalue()}:{other}"
        var = V.kernel.cse.try_get(key)
        if var:
            return var
        var = V.kernel.cse.newvar(dtype=result.dtype)
        V.kernel.cse.put(key, var)
        other = constant(other, result.dtype) if isinstance(other, (int, float)) else other
        V.kernel.compute.writeline(f"if ({mask}) {{")
        V.kernel.compute.splice(scoped)
        with V.kernel.compute.indent():
            V.kernel.compute.writeline(f"{var} = {result};")
        V.kernel.compute.writeline(f"}} else {var} = {other};")
        return var

    @staticmethod
    def where(a: Any, b: Any, c: Any) -> str:
        return f"({a} ? {b} : {c})"

    @staticmethod
    def truediv(a: Any, b: Any) -> str:
        return f"{a} / {b}"

    @staticmethod
    def floordiv(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"floor({a} / {b})"
        return f"flagos_ifloordiv({a}, {b})"

    @staticmethod
    def truncdiv(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"trunc({a} / {b})"
        return f"{a} / {b}"

    @staticmethod
    def mod(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"fmod({a}, {b})"
        return f"{a} % {b}"

    @staticmethod
    def remainder(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"flagos_fpymod{_suffix(a, b)}({a}, {b})"
        return f"flagos_ipymod({a}, {b})"

    @staticmethod
    def pow(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"pow({a}, {b})"
        return f"flagos_ipow({a}, {b})"

    @staticmethod
    def maximum(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"flagos_max{_suffix(a, b)}({a}, {b})"
        return f"flagos_imax({a}, {b})"

    @staticmethod
    def minimum(a: Any, b: Any) -> str:
        if _is_float(a, b):
            return f"flagos_min{_suffix(a, b)}({a}, {b})"
        return f"flagos_imin({a}, {b})"

    @staticmethod
    def abs(x: Any) -> str:
        return f"fabs({x})" if _is_float(x) else f"flagos_iabs({x})"

    @staticmethod
    def neg(x: Any) -> str:
        return f"-{OpOverrides.paren(x)}"

    @staticmethod
    def sign(x: Any) -> str:
        if _is_float(x):
            t = dtypes.compute_type(_float_dtype(x))
            return f"({x} != {x} ? {x} : ({t})(({x} > 0) - ({x} < 0)))"
        return f"(({x} > 0) - ({x} < 0))"

    @staticmethod
    def signbit(x: Any) -> str:
        return f"(signbit({x}) != 0)" if _is_float(x) else f"({x} < 0)"

    @staticmethod
    def isnan(x: Any) -> str:
        return f"(isnan({x}) != 0)" if _is_float(x) else "0"

    @staticmethod
    def isinf(x: Any) -> str:
        return f"(isinf({x}) != 0)" if _is_float(x) else "0"

    @staticmethod
    def logical_and(a: Any, b: Any) -> str:
        return f"({a} && {b})"

    @staticmethod
    def logical_or(a: Any, b: Any) -> str:
        return f"({a} || {b})"

    @staticmethod
    def logical_xor(a: Any, b: Any) -> str:
        return f"(!({a}) != !({b}))"

    @staticmethod
    def logical_not(a: Any) -> str:
        return f"!({a})"

    @staticmethod
    def rsqrt(x: Any) -> str:
        return f"flagos_rsqrt({x})"

    @staticmethod
    def round(x: Any) -> str:
        return f"rint({x})"

    @staticmethod
    def erf(x: Any) -> str:
        # Note [Fast paths of the generator's math]: PyTorch's float erf formula
        # (PoCL's erff is 25x its exp); double keeps the library's.
        return f"erf({x})" if _suffix(x) == "d" else f"flagos_erf32({x})"

    @staticmethod
    def erfinv(x: Any) -> str:
        return f"flagos_erfinv{_suffix(x)}({x})"

    @staticmethod
    def digamma(x: Any) -> str:
        return f"flagos_digamma{_suffix(x)}({x})"

    @staticmethod
    def i0(x: Any) -> str:
        return f"flagos_i0{_suffix(x)}({x})"

    @staticmethod
    def int_truediv(a: Any, b: Any) -> str:
        return f"((float)({a}) / (float)({b}))"


def _libm(name: str):
    def fn(*args: Any) -> str:
        return f"{name}({', '.join(str(a) for a in args)})"

    fn.__name__ = name
    return staticmethod(fn)


# One C99 <tgmath.h> name each, the same in OpenCL C (Note [Fused kernel bodies]).
for _name in (
    "exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan asin acos atan sinh cosh tanh "
    "asinh acosh atanh erfc lgamma floor ceil trunc fmod atan2 hypot copysign nextafter"
).split():
    setattr(FlagosOverrides, _name, _libm(_name))


class FlagosKernel(SIMDKernel):
    """One fused kernel: its body, parameters and launch (Note [Fused kernels])."""

    overrides = FlagosOverrides  # type: ignore[assignment]
    suffix = ";"
    newvar_prefix = ""  # declared at the top with their types (codegen_kernel)
    pexpr = PythonPrinter().doprint
    sexpr = _printer.doprint
    kexpr = _printer.doprint

    # Set by the scheduling from the active backend (inductor/__init__.py).
    language: str = ""  # what the plugin's compiler takes; "" without one
    work_groups: bool = False
    group_size: int = 256
    fp64: bool = False

    def __init__(self, tiling: dict[str, sympy.Expr], **kwargs: Any) -> None:
        super().__init__(tiling, **kwargs)
        self.rindexing = IndentedBuffer()  # reduction-index entries of this stage
        self.acc_ids = 0
        self.contiguous_rows = True  # every load walks r0 with stride 1 (or 0)

    # --- types and indexing ---------------------------------------------

    def dtype_to_str(self, dtype: torch.dtype) -> str:
        return dtypes.compute_type(dtype)

    @property
    def index_dtype(self) -> str:
        return "flagos_i64"

    def codegen_iteration_ranges_entry(self, entry: Any) -> None:
        line = f"const flagos_i64 {entry.name} = {self.kexpr(self.rename_indexing(entry.expr))};"
        if entry.is_reduction:
            self.rindexing.writeline(line)
        else:
            self.indexing_code.writeline(line)

    def _note_stride(self, index: sympy.Expr) -> None:
        """Group reductions pay off when adjacent r0 items touch adjacent memory."""
        if not self.inside_reduction:
            return
        syms = [
            s
            for s in index.free_symbols
            if s in self.range_tree_nodes and self.range_tree_nodes[s].is_reduction
        ]
        if not syms:
            return
        for sym, stride in zip(syms, V.graph.sizevars.stride_vars(index, syms), strict=True):
            if self.range_tree_nodes[sym].divisor != 1 or stride not in (0, 1):
                self.contiguous_rows = False

    # --- checks inductor asks of a kernel ----------------------------------

    def check_bounds(self, expr: sympy.Expr, size: sympy.Expr, lower: bool, upper: bool) -> None:
        # No device-side error channel in the ABI yet: an out-of-range index
        # is not raised from a fused kernel (eager raises it); masked loads
        # keep padding in range.
        return None

    def device_assert_async(self, cond: CSEVariable, msg: str) -> None:
        return None

    # --- loads and stores -------------------------------------------------

    def load(self, name: str, index: sympy.Expr) -> CSEVariable:
        var = self.args.input(name)
        index = self.prepare_indexing(index)
        self._note_stride(index)
        dtype = V.graph.get_dtype(name)
        line = dtypes.load(dtype, var, self.index_to_str(index))
        if dtype in (torch.float16, torch.bfloat16):
            dtype = torch.float32
        return self.cse.generate(self.loads, line, dtype=dtype)

    def store(self, name: str, index: sympy.Expr, value: CSEVariable, mode: Any = None) -> None:
        if mode not in (None, "atomic_add"):
            raise NotImplementedError(f"flagos fused kernels: store mode {mode}")
        var = self.args.output(name)
        index = self.prepare_indexing(index)
        self._note_stride(index)
        write = dtypes.store if mode is None else dtypes.atomic_add
        line = write(V.graph.get_dtype(name), var, self.index_to_str(index), value)
        buffer = self.compute if self.inside_reduction else self.stores
        # A segment past the last row recomputes it and stores nothing (fused.h).
        buffer.writeline(DeferredLine(name, f"if (FLAGOS_STORE_OK) {line}"))

    def store_reduction(self, name: str, index: sympy.Expr, value: CSEVariable) -> None:
        var = self.args.output(name)
        index = self.prepare_indexing(index)
        line = dtypes.store(V.graph.get_dtype(name), var, self.index_to_str(index), value)
        self.stores.writeline(DeferredLine(name, f"if (FLAGOS_GROUP_LEADER) {line}"))

    # --- reductions -------------------------------------------------------

    def _accumulator(self, ctype: str, init: str) -> str:
        name = f"acc{self.acc_ids}"
        self.acc_ids += 1
        self.indexing_code.writeline(f"{ctype} {name} = {init};")
        return name

    def reduction(
        self,
        dtype: torch.dtype,
        src_dtype: torch.dtype,
        reduction_type: str,
        value: CSEVariable | tuple[CSEVariable, ...],
    ) -> CSEVariable | tuple[CSEVariable, ...]:
        key = (src_dtype, reduction_type, value)
        if key in self.cse.reduction_cache:
            return self.cse.reduction_cache[key]
        result = self._reduction(dtype, src_dtype, reduction_type, value)
        self.cse.reduction_cache[key] = result  # type: ignore[assignment]
        return result

    def _reduction(
        self,
        dtype: torch.dtype,
        src_dtype: torch.dtype,
        reduction_type: str,
        value: Any,
    ) -> CSEVariable | tuple[CSEVariable, ...]:
        assert self.inside_reduction
        if reduction_type not in REDUCTIONS:
            raise NotImplementedError(f"flagos fused kernels: reduction {reduction_type}")
        acc_dtype = dtypes.accumulate_dtype(src_dtype, reduction_type)
        ctype, s = dtypes.compute_type(acc_dtype), dtypes.suffix(acc_dtype)
        if reduction_type in ("welford_reduce", "welford_combine"):
            # Mean, M2 and weight accumulate and combine in double where the
            # device has it: float means of rows with a large offset lost
            # var's precision in the work-group combine (8e-4 relative at an
            # offset of 1e3), and Note [Shifted sums] wants double sums.
            wide = "double" if self.fp64 and ctype == "float" else ctype
            ws = "d" if wide == "double" else s
            mean, m2, weight = (self._accumulator(wide, "0") for _ in range(3))
            if reduction_type == "welford_reduce":
                # Note [Shifted sums]
                # ~~~~~~~~~~~~~~~~~~~
                # A work item's elements as sums of their distance to its
                # first element (mean and M2 follow after the loop): no
                # division per element, unlike Welford's update, so the loop
                # vectorizes. The first element's distance to the mean
                # multiplies the sums' rounding error, which double keeps
                # below float32's own (test_compile.py: rows whose first
                # element is 5 sigma out, offsets up to 1e4). Layer norm
                # 4096x1024: host 15.9 -> 3.9 ms, opencl 15.2 -> 10.3 ms.
                shift, s1, s2 = (self._accumulator(wide, "0") for _ in range(3))
                d = f"acc{self.acc_ids}"
                self.acc_ids += 1
                self.compute.writeline(
                    f"{shift} = {weight} == 0 ? ({wide})({value}) : {shift}; "
                    f"{{ const {wide} {d} = ({wide})({value}) - {shift}; "
                    f"{s1} += {d}; {s2} += {d} * {d}; {weight} += 1; }}"
                )
                self.stores.writeline(
                    f"if ({weight} > 0) {{ const {wide} {d} = {s2} - {s1} * {s1} / {weight}; "
                    f"{m2} = {d} < 0 ? 0 : {d}; {mean} = {shift} + {s1} / {weight}; }}"
                )
            else:
                part = ", ".join(f"({wide})({v})" for v in value)
                self.compute.writeline(
                    f"flagos_welford_combine{ws}(&{mean}, &{m2}, &{weight}, {part});"
                )
            self.stores.writeline(f"FLAGOS_GROUP_WELFORD({ws}, {mean}, {m2}, {weight});")
            return OpsWrapper._unwrap(
                tuple(
                    self.cse.generate(self.stores, f"(({ctype})({v}))", dtype=acc_dtype)
                    for v in (mean, m2, weight)
                )
            )
        if reduction_type in ("argmax", "argmin"):
            best = self._accumulator(ctype, dtypes.identity(reduction_type, acc_dtype))
            at = self._accumulator("flagos_i64", dtypes.INT64_MAX)
            self.compute.writeline(
                f"if (flagos_{reduction_type}_better{s}({best}, {at}, ({ctype})({value}), "
                f"r0_index)) {{ {best} = ({ctype})({value}); {at} = r0_index; }}"
            )
            op = reduction_type.upper()
            self.stores.writeline(f"FLAGOS_GROUP_{op}({s}, {best}, {at});")
            return self.cse.generate(self.stores, at, dtype=torch.int64)
        acc = self._accumulator(ctype, dtypes.identity(reduction_type, acc_dtype))
        v = f"({ctype})({value})"
        step = {
            "sum": f"{acc} = {acc} + {v};",
            "prod": f"{acc} = {acc} * {v};",
            "max": f"{acc} = {dtypes.max_fn(acc_dtype)}({acc}, {v});",
            "min": f"{acc} = {dtypes.min_fn(acc_dtype)}({acc}, {v});",
            "any": f"{acc} = {acc} | ({value} != 0);",
        }[reduction_type]
        self.compute.writeline(step)
        group = {"sum": "SUM", "prod": "PROD", "max": "MAX", "min": "MIN", "any": "MAX"}
        combined = f"FLAGOS_GROUP_{group[reduction_type]}({s}, {acc})"
        return self.cse.generate(self.stores, combined, dtype=acc_dtype)

    # --- body -------------------------------------------------------------

    def codegen_body(self) -> None:
        """Flushes this stage: a reduction stage becomes one FLAGOS_RLOOP."""
        if self.inside_reduction and (self.loads or self.compute):
            numel = self._numel_str(self.range_trees[-1])
            self.body.writeline(f"FLAGOS_RLOOP(r0_index, {numel}) {{")
            with self.body.indent():
                self.body.splice(self.rindexing)
                self.body.splice(self.loads)
                self.body.splice(self.compute)
            self.body.writeline("}")
            # Values made in the loop die with it; reduced values live on.
            keep = {
                v
                for item in self.cse.reduction_cache.values()
                for v in (item if isinstance(item, tuple) else (item,))
            }
            self.cse.invalidate(keep)
            for node in self.range_tree_nodes.values():
                if node.root.is_reduction:
                    node.cache_clear()
        else:
            self.body.splice(self.loads)
            self.body.splice(self.compute)
        self.body.splice(self.stores)
        self.rindexing.clear()
        self.loads.clear()
        self.compute.clear()
        self.stores.clear()

    def _numel_args(self) -> list[tuple[str, sympy.Expr]]:
        """The symbolic reduction length, passed after the kernel's own arguments."""
        if not self.features.is_reduction():
            return []
        tree = self.range_trees[-1]
        if isinstance(tree.numel, (int, sympy.Integer)):
            return []
        return [(f"{tree.prefix}numel", V.graph.sizevars.simplify(tree.numel))]

    @staticmethod
    def _numel_str(tree: Any) -> str:
        if isinstance(tree.numel, (int, sympy.Integer)):
            return str(int(tree.numel))
        return f"{tree.prefix}numel"

    # Note [Reduction layouts of fused kernels]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # Measured on PoCL (2 cores, AVX-512), compiled softmax / layer norm /
    # RMS norm over rows of 32, 64 and 1024 floats: a work-group per row of
    # 256 lanes ran 2-6x slower than 16-lane segments, 16 rows to a work-group
    # (layer norm 4096x1024: 17 -> 9 ms); rows of 64 or fewer ran as fast or
    # faster as one work item each (RMS norm 8192x64: 1.8 ms against 3.3).
    # A dynamic row length takes segments (one kernel serves every length).
    SEGMENT_LANES = 16
    SHORT_ROW = 64

    def mode(self) -> str:
        if not self.features.is_reduction():
            return "pointwise"
        rnumel = self.range_trees[-1].numel
        short = isinstance(rnumel, (int, sympy.Integer)) and int(rnumel) <= self.SHORT_ROW
        return "group" if self.work_groups and self.contiguous_rows and not short else "item"

    def group(self) -> int:
        """Lanes per row of a group reduction: the row length, up to SEGMENT_LANES."""
        lanes = min(self.group_size, self.SEGMENT_LANES)
        rnumel = self.range_trees[-1].numel
        if isinstance(rnumel, (int, sympy.Integer)):
            return max(1, min(lanes, 1 << max(0, int(rnumel) - 1).bit_length()))
        return lanes

    def rows(self) -> int:
        """Rows per work-group: short rows share one (a work-group costs PoCL more than a lane).

        One row a work-group where the kernel reads and writes one buffer: a
        segment past the last row must then not touch it at all, and PoCL 3.1
        was seen to run guarded stores of items past the work (Note
        [Reduction strategies] in csrc/jit/gen/reduce_layout.cpp).
        """
        if self.args.inplace_buffers:
            return 1
        return max(1, self.group_size // self.group())

    def params(self) -> list[tuple[str, str, int, bool]]:
        """(kind, name, flagos dtype, read-only) in launch order, for fused_bindings.cpp."""
        arg_defs, _, precompile_args, _ = self.args.python_argdefs()
        out = []
        for name, arg in zip(arg_defs, precompile_args, strict=True):
            name = str(getattr(name, "name", name))
            dtype = getattr(arg, "dtype", None)
            if hasattr(arg, "buffer"):
                out.append(("ptr", name, dtypes.flagos_code(dtype), name.startswith("in_ptr")))
            else:
                out.append(("int64", name, 0, False))
        out += [("int64", name, 0, False) for name, _ in self._numel_args()]
        out.append(("int64", "xnumel", 0, False))
        return out

    def codegen_kernel(self, name: str | None = None) -> str:
        if not self.language:
            raise RuntimeError(
                f"torch.compile on flagos: backend '{_state.backend_name}' has no compiler "
                "(include/flagos/compiler.h), so inductor cannot build this graph's fused "
                "kernels; compile with backend='aot_eager' (the same graphs, eager kernels)"
            )
        self.codegen_body()
        declared = []
        for var in self.cse.varname_map.values():
            declared.append(f"{dtypes.compute_type(var.dtype)} {var};")
        body = IndentedBuffer()
        with body.indent():
            body.writelines(declared)
            body.splice(self.indexing_code)
            body.splice(self.body)
        text = body.getvalue()
        spec = {
            "params": self.params(),
            "body": text,
            "mode": self.mode(),
            "group": self.group() if self.mode() == "group" else 1,
            "rows": self.rows() if self.mode() == "group" else 1,
            "fp64": "double" in text,
        }
        return f"flagos_fused_kernel(KERNEL_NAME, {spec!r})"

    def call_kernel(self, name: str, node: Any = None, deallocate_ws: bool = True) -> None:
        wrapper = V.graph.wrapper_code
        for v in self.args.sizevars:
            wrapper.ensure_size_computed(v)
        _, call_args, _, _ = self.args.python_argdefs()

        def numel(tree: Any) -> str:
            if isinstance(tree.numel, (int, sympy.Integer)):
                return str(int(tree.numel))
            if isinstance(tree.numel, sympy.Symbol):
                return str(tree.numel)
            return str(wrapper.generate_numel_expr(name, tree).inner)

        args = [str(a) for a in call_args]
        args += [numel(self.range_trees[-1]) for _ in self._numel_args()]
        args.append(numel(self.range_trees[0]))
        wrapper.generate_kernel_call(
            name, args, device=V.graph.get_current_device_or_throw(), triton=False
        )
