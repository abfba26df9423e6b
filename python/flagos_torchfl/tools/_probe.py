"""The tier each catalog overload runs on, per dtype, found by calling it
(`flagos-torchfl ops --probe`).

Note [Probed tiers]
~~~~~~~~~~~~~~~~~~~
`ops` predicts one tier per overload from the kernel tables (Note [Predicted
tier]), but a native kernel may decline a dtype at run time
(FLAGOS_ERROR_NOT_SUPPORTED) and the call then takes another tier: the
prediction said "native" for float16/bfloat16 GEMMs that ran on the host.
The probe replaces the claim by an observation: it runs PyTorch's OpInfo
samples (torch.testing's op_db, CPU-made, moved to the device) in each dtype,
and a TorchDispatchMode sees each aten call that reaches the device with
its dtype; op_stats() before and after the call says which tier ran. A
call's own nested calls of the same overload (the half-GEMM composite's
float GEMM) are inside that window, so the worst tier of the window is the
call's own. Overloads no sample reaches stay unprobed (absent).
"""

from __future__ import annotations

from typing import Any

# Best to worst: a window's worst tier is the outer call's (see the Note).
TIER_ORDER = ("native", "core", "generated", "decomposition", "fallback")
PROBE_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool")
# Random OpInfos draw numbers; they probe as well as others, but their
# samples may take different paths per run: left out for stable reports.
_RANDOM = ("dropout", "bernoulli", "normal", "rand", "uniform", "multinomial", "rrelu")


def worst_tier(tiers: set[str]) -> str:
    """The worst of @p tiers (TIER_ORDER; unknown names count as worst)."""
    return max(tiers, key=lambda t: TIER_ORDER.index(t) if t in TIER_ORDER else len(TIER_ORDER))


def _dtype_of(args: Any, kwargs: Any):
    import torch
    from torch.utils._pytree import tree_flatten

    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    for t in tensors:  # the data, not an index tensor: the first floating one
        if t.is_floating_point():
            return t.dtype
    return tensors[0].dtype if tensors else None


def probe(
    overloads: dict[str, str],
    ids: set[str] | None = None,
    dtypes: tuple[str, ...] = PROBE_DTYPES,
    samples: int = 2,
) -> dict[str, dict[str, str]]:
    """overload -> dtype name -> the tier its calls ran on (the worst seen).

    @p overloads: aten overload -> semantic id (the catalog); @p ids limits
    the probe to OpInfos whose ATen name is an overload of those ids.
    """
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._python_dispatch import TorchDispatchMode

    import flagos_torchfl as ft

    wanted = {n for n, i in overloads.items() if ids is None or i in ids}
    packets = {n.split("::")[1].split(".")[0] for n in wanted}
    seen: dict[str, dict[str, set[str]]] = {}

    class Observe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = f"aten::{func._opname}" + (
                f".{func._overloadname}" if func._overloadname != "default" else ""
            )
            if name not in wanted:
                return func(*args, **kwargs)
            before = ft.op_stats().get(name, {})
            out = func(*args, **kwargs)
            after = ft.op_stats().get(name, {})
            ran = {t for t, n in after.items() if n > before.get(t, 0)}
            dtype = _dtype_of(args, kwargs)
            if ran and dtype is not None:
                seen.setdefault(name, {}).setdefault(str(dtype).removeprefix("torch."), set()).add(
                    worst_tier(ran)
                )
            return out

    def on_device(t):
        return t.to("flagos") if isinstance(t, torch.Tensor) else t

    for info in op_db:
        if any(r in info.name for r in _RANDOM):
            continue
        aten = (info.aten_name or info.name).split(".")[0]
        if aten not in packets and info.name.removeprefix("nn.functional.") not in packets:
            continue
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            if dtype not in info.supported_dtypes("cpu"):
                continue
            try:
                chosen = list(info.sample_inputs("cpu", dtype, requires_grad=False))[:samples]
            except Exception:  # noqa: BLE001 - an OpInfo that cannot make samples here
                continue
            for sample in chosen:
                s = sample.transform(on_device)
                try:
                    with Observe():
                        info.op(s.input, *s.args, **s.kwargs)
                except Exception:  # noqa: BLE001 - invalid on CPU too, or a device error: not a claim
                    continue
    return {name: {d: worst_tier(t) for d, t in by.items()} for name, by in sorted(seen.items())}


def dtype_tiers(probed: dict[str, dict[str, str]], names: list[str]) -> dict[str, str]:
    """dtype -> the worst tier over the overloads @p names (one semantic op's)."""
    merged: dict[str, set[str]] = {}
    for name in names:
        for dtype, tier in probed.get(name, {}).items():
            merged.setdefault(dtype, set()).add(tier)
    return {d: worst_tier(t) for d, t in merged.items()}
