"""`flagos-torchfl coverage MODEL`: which ATen operators a model uses, and the tier
each would take on each backend.

    record(case, backward=True) -> {overload: {"calls": n, "dtypes": [...]}}
    coverage(model, backends=None, supports=()) -> dict (the JSON report)

The model runs once, forward and backward, under a TorchDispatchMode that
counts every ATen overload (after autograd and CompositeImplicitAutograd
decompositions). Note [Recorded on the device]: the run happens on the
flagos device whenever the backend comes up, so the overloads are the ones
the device dispatches: on CPU, scaled_dot_product_attention picks
_scaled_dot_product_flash_attention_for_cpu, a kernel flagos never sees (it
takes the math path), and counting it made `--fail-on fallback` fail a model
that runs with no fallback. Without a backend the run is on CPU, and the
report says so. Each overload is then looked up in a support list
(`flagos-torchfl ops --json`; Note [Predicted tier] in ops.py); one outside
the catalog takes the tier its PrivateUse1 dispatch entry gives: the core's
own kernel ("core"), ATen's composite kernel ("decomposition"), or the host
fallback. `verify=True` compares each prediction with the tier op_stats()
counted during that same device run.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import _model, ops
from ._output import add_output_arguments, render, write_json

TIER_RANK = {"native": 0, "core": 0, "generated": 1, "decomposition": 2, "fallback": 3}


def overload_name(func) -> str:
    """torch.ops.aten.add.Tensor -> 'aten::add.Tensor' (the catalog's spelling)."""
    return func.name()


def record(
    case: _model.ModelCase, backward: bool = True, device: str = "cpu"
) -> dict[str, dict[str, Any]]:
    """Run the model once on `device` (forward, then backward of its loss) and count the ops."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: dict[str, dict[str, Any]] = {}

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            entry = seen.setdefault(overload_name(func), {"calls": 0, "dtypes": set()})
            entry["calls"] += 1
            for a in torch.utils._pytree.tree_leaves((args, kwargs or {})):
                if isinstance(a, torch.Tensor):
                    entry["dtypes"].add(str(a.dtype).replace("torch.", ""))
            return func(*args, **(kwargs or {}))

    import copy

    model = copy.deepcopy(case.model).to(device)
    inputs = _model.to_device(case.inputs, device)
    with Recorder():
        output = model(*inputs)
        if backward:
            loss = case.loss_fn(output)
            if loss.requires_grad:  # a model may have no parameters, or no derivative
                loss.backward()
    return {
        k: {"calls": v["calls"], "dtypes": sorted(v["dtypes"])} for k, v in sorted(seen.items())
    }


def tier_outside_catalog(name: str, support: dict[str, Any]) -> str:
    """The tier of an overload the catalog does not list, from its PrivateUse1 dispatch entry."""
    import torch

    from .. import _core

    _core.C()  # the core's own PrivateUse1 registrations
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        if has(name, "PrivateUse1"):
            return "core"
        cea, ceanf = (
            has(name, "CompositeExplicitAutograd"),
            has(name, "CompositeExplicitAutogradNonFunctional"),
        )
        if ceanf:
            out = support["overloads"].get(ops.out_overload(name))
            if out is not None:
                return "decomposition" if out == "native" else out
            return "fallback"  # structured: its .out overload runs on the host fallback
        if cea or has(name, "CompositeImplicitAutograd"):
            return "decomposition"
    except RuntimeError:  # not an ATen operator the dispatcher knows
        pass
    return "fallback"


def tier_of(name: str, support: dict[str, Any]) -> str:
    return support["overloads"].get(name) or tier_outside_catalog(name, support)


def coverage(
    model: str | _model.ModelCase,
    backends: list[str] | None = None,
    supports: list[str | dict[str, Any]] = (),
    backward: bool = True,
    verify: bool = False,
) -> dict[str, Any]:
    """The coverage report of `model` for each backend (default: the running or
    default one) and each support list given (a dict or a path of `ops --json`)."""
    case = _model.load(model) if isinstance(model, str) else model
    device, stats = _recording_device(backends)
    before = stats() if stats else {}
    used = record(case, backward=backward, device=device)
    counted = _delta(before, stats()) if stats else {}
    lists = [ops.load_support(s) if isinstance(s, str) else s for s in supports]
    if backends or not lists:
        lists = [ops.support_list(b) for b in (backends or [None])] + lists
    names = [s["backend"] for s in lists]
    catalog_dtypes = {
        overload: set(op["dtypes"])
        for op in lists[0].get("ops", [])
        if op["dtypes"]
        for overload in op["overloads"]
    }
    rows = []
    for name, entry in used.items():
        tiers = {s["backend"]: tier_of(name, s) for s in lists}
        row = {"op": name, **entry, "in_catalog": name in lists[0]["overloads"], "tiers": tiers}
        if device == "flagos":
            # Note [Recorded on the device]: the device run is the truth for the
            # backend it ran on. op_stats() counts every call that reaches a
            # tier of ours (the host fallback always); an op with no count ran
            # as the operators it decomposes into.
            row["predicted"] = tiers[names[0]]
            seen = _counted_for(name, counted)
            if seen:
                tiers[names[0]] = min(seen, key=lambda t: TIER_RANK.get(t, 9))
            elif tiers[names[0]] == "fallback":
                tiers[names[0]] = "decomposition"
        allowed = catalog_dtypes.get(name, set(entry["dtypes"]))
        used_dtypes = set(entry["dtypes"])
        if allowed and all(d.startswith(("float", "bfloat", "complex")) for d in allowed):
            # Indices and class targets (int64) ride along with float operands
            # (embedding, nll_loss): only the float operands have the op's dtype.
            used_dtypes = {d for d in used_dtypes if not d.startswith(("int", "uint", "bool"))}
        outside = sorted(used_dtypes - allowed)
        if outside:  # the semantic op is not defined for them: its kernels may refuse the call
            row["note"] = f"{', '.join(outside)} outside the catalog's dtypes"
        rows.append(row)
    summary = {}
    for backend in names:
        counts: dict[str, dict[str, int]] = {}
        for row in rows:
            c = counts.setdefault(row["tiers"][backend], {"ops": 0, "calls": 0})
            c["ops"] += 1
            c["calls"] += row["calls"]
        summary[backend] = counts
    report = {
        "model": case.name,
        "backends": names,
        "recorded_on": device,
        "ops": rows,
        "summary": summary,
    }
    if verify:
        report["verify"] = _verify(rows, counted, names[0], device)
    return report


def _recording_device(backends: list[str] | None):
    """("flagos", op_stats) when the first backend comes up in this process, else
    ("cpu", None) (Note [Recorded on the device])."""
    from .. import backend as _backend
    from .. import initialize, is_initialized, op_stats

    want = backends[0] if backends else None
    try:
        if not is_initialized():
            initialize(want)
        elif want not in (None, "auto", _backend._backend_name):
            return "cpu", None  # another backend runs here: predictions only
    except (RuntimeError, ValueError):
        return "cpu", None
    return "flagos", op_stats


def _delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    out = {}
    for op, row in after.items():
        prev = before.get(op, {})
        d = {t: n - prev.get(t, 0) for t, n in row.items() if n - prev.get(t, 0) > 0}
        if d:
            out[op] = d
    return out


def _counted_for(name: str, counted: dict) -> dict[str, int] | None:
    """op_stats()'s counts for an overload: its own row, else its .out overload's
    (a structured functional op reaches our tiers as its out= variant)."""
    if name in counted:
        return counted[name]
    out = ops.out_overload(name)
    return counted.get(out) if out and out != name else None


def _verify(rows, counted, backend: str, device: str) -> dict[str, Any]:
    """Predicted tier vs the tiers op_stats() counted in the device run. An op the
    core serves ("core") or whose predicted decomposition ran as other ops leaves
    no op_stats row of its own: only rows that exist are compared."""
    if device != "flagos":
        return {"ran": False, "reason": "no flagos backend in this process", "mismatches": []}
    mismatches = []
    for r in rows:
        seen = _counted_for(r["op"], counted)
        predicted = r.get("predicted", r["tiers"][backend])
        if seen and predicted not in seen:
            mismatches.append({"op": r["op"], "predicted": predicted, "ran": sorted(seen)})
        elif not seen and predicted == "fallback":  # a fallback is always counted
            mismatches.append({"op": r["op"], "predicted": predicted, "ran": ["decomposition"]})
    compared = sum(
        bool(_counted_for(r["op"], counted)) or r.get("predicted") == "fallback" for r in rows
    )
    return {"ran": True, "compared": compared, "mismatches": mismatches}


def worst(report: dict[str, Any]) -> int:
    return max((TIER_RANK[t] for r in report["ops"] for t in r["tiers"].values()), default=0)


def markdown(report: dict[str, Any]) -> str:
    names = report["backends"]
    lines = [
        f"# Operator coverage: `{report['model']}`",
        "",
        f"{len(report['ops'])} ATen overloads, forward and backward, recorded on "
        f"{report.get('recorded_on', 'cpu')}.",
        "",
        "| backend | " + " | ".join(TIER_RANK) + " |",
        "|---|" + "---|" * len(TIER_RANK),
    ]
    for b in names:
        s = report["summary"][b]
        cells = [f"{s[t]['ops']} ({s[t]['calls']} calls)" if t in s else "0" for t in TIER_RANK]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += ["", "| operator | calls | dtypes | " + " | ".join(names) + " |"]
    lines.append("|---|---|---|" + "---|" * len(names))
    for r in sorted(report["ops"], key=lambda r: (-worst({"ops": [r]}), r["op"])):
        tiers = " | ".join(r["tiers"][b] for b in names)
        lines.append(f"| `{r['op']}` | {r['calls']} | {', '.join(r['dtypes'])} | {tiers} |")
    return "\n".join(lines) + "\n"


def format_report(report: dict[str, Any]) -> str:
    names = report["backends"]
    rows = [["operator", "calls", "dtypes", *names]]
    for r in sorted(report["ops"], key=lambda r: (-worst({"ops": [r]}), r["op"])):
        rows.append(
            [r["op"], str(r["calls"]), ",".join(r["dtypes"]), *(r["tiers"][b] for b in names)]
        )
    out = [
        f"model {report['model']}: {len(report['ops'])} ATen overloads (forward + backward), "
        f"recorded on {report.get('recorded_on', 'cpu')}"
    ]
    out.append(render(rows, colour_column=3 if len(names) == 1 else None))
    out += [f"note: {r['op']}: {r['note']}" for r in report["ops"] if r.get("note")]
    for b in names:
        s = report["summary"][b]
        parts = ", ".join(
            f"{t} {s[t]['ops']} ops/{s[t]['calls']} calls" for t in TIER_RANK if t in s
        )
        out.append(f"{b}: {parts}")
    v = report.get("verify")
    if v:
        if not v["ran"]:
            out.append(f"verify: not run ({v['reason']})")
        elif not v["mismatches"]:
            out.append(f"verify: {v['compared']} predicted tiers match op_stats()")
        for m in v["mismatches"]:
            out.append(f"verify: {m['op']}: predicted {m['predicted']}, ran {'/'.join(m['ran'])}")
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="FILE.py[:FUNC], MODULE:FUNC, torchvision:NAME or timm:NAME (docs/tools.md)"
    )
    parser.add_argument(
        "--backend",
        default=None,
        help="comma-separated backends (default: $FLAGOS_BACKEND, else auto); "
        "others than the first are asked in a subprocess",
    )
    parser.add_argument(
        "--support",
        action="append",
        default=[],
        metavar="FILE",
        help="intersect with a support list from `ops --json FILE` (repeatable)",
    )
    parser.add_argument("--no-backward", action="store_true", help="forward only")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="compare each predicted tier with the tier op_stats() counts in the device run; "
        "exit 1 on a mismatch",
    )
    parser.add_argument("--markdown", metavar="FILE", default=None, help="write a markdown report")
    parser.add_argument(
        "--fail-on",
        choices=["fallback", "decomposition"],
        default=None,
        help="exit 1 when an operator would take this tier (or a worse one) anywhere",
    )
    add_output_arguments(parser)


def command(args: argparse.Namespace) -> int:
    backends = [b for b in (args.backend or "").split(",") if b] or None
    report = coverage(
        args.model, backends, args.support, backward=not args.no_backward, verify=args.verify
    )
    write_json(args.json, report)
    if args.markdown:
        Path(args.markdown).write_text(markdown(report))
    if args.json != "-":
        print(format_report(report))
    if args.fail_on and worst(report) >= TIER_RANK[args.fail_on]:
        bad = sorted(
            r["op"]
            for r in report["ops"]
            if any(TIER_RANK[t] >= TIER_RANK[args.fail_on] for t in r["tiers"].values())
        )
        print(
            f"coverage: {len(bad)} operator(s) would take {args.fail_on} or worse: "
            + ", ".join(bad)
        )
        return 1
    if args.verify and report["verify"]["mismatches"]:
        return 1
    return 0
