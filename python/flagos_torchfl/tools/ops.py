"""`flagos-torchfl ops`: the operator catalog and the tier each overload takes here.

    support_list(backend=None, probe=False, family=None) -> dict
                                         the "vendor support list" (JSON-ready)

For each semantic operator of ops/catalog.yaml: its family, dtypes, whether
the backend has a native kernel, and for each ATen overload the route after
the FLAGOS_OP_<ID> / FLAGOS_FORCE_FALLBACK overrides and the tier a call
takes (Note [Predicted tier]). PrivateUse1 is set up once per process, so a
backend other than the one running here is asked in a subprocess.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._output import add_output_arguments, render, write_json

# Note [Predicted tier]
# ~~~~~~~~~~~~~~~~~~~~~
# The bridge (csrc/dispatch/bridge/bridge.cpp, Note [The semantic bridge])
# tries native, generated, decomposition, host. Without running anything we
# predict: route "fallback" -> fallback; a native kernel for the semantic ID
# (and a route that allows it: not "generated") -> native; a generator recipe
# on a backend with a compiler table -> generated (not for a functional or
# out= overload where the generator takes in-place calls only: opencl's
# atomic scatters, kernels::inPlaceOnly); our composite for the ID
# (csrc/dispatch/tiers/decomposition/, functional and out= overloads, and
# in-place ones where it is registered in_place) -> decomposition;
# else the overload's composite kernel when ATen has one and the catalog does
# not forbid it (decompose: false) -> decomposition; else fallback. A
# structured functional/in-place overload (add.Tensor, exp_) decomposes into
# its `.out` overload, so it takes that overload's tier ("decomposition" when
# that one is native). Kernels may still refuse a call at run time
# (NOT_SUPPORTED for a dtype, a shape the generator declines) and move on:
# op_stats() says what really ran, and `--probe` (Note [Probed tiers],
# tools/_probe.py) replaces the prediction by the tier each dtype ran on.

_CATALOG_CANDIDATES = (Path(__file__).resolve().parents[3] / "ops" / "catalog.yaml",)


def _catalog_yaml() -> dict[str, dict[str, Any]]:
    """id -> catalog entry with dtype groups expanded; {} when the yaml is not here
    (an installed package without the source tree) or PyYAML is missing."""
    try:
        import yaml
    except ImportError:
        return {}
    for path in _CATALOG_CANDIDATES:
        if path.is_file():
            data = yaml.safe_load(path.read_text())
            groups = data.get("dtype_groups", {})

            def expand(names, groups=groups):
                out = []
                for n in names:
                    out += expand(groups[n]) if n in groups else [n]
                return out

            return {op["id"]: {**op, "dtypes": expand(op.get("dtypes", []))} for op in data["ops"]}
    return {}


def _has_composite(name: str) -> tuple[bool, bool]:
    """(CompositeExplicitAutograd, CompositeExplicitAutogradNonFunctional) kernels of an overload."""
    import torch

    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(name, "CompositeExplicitAutograd"), has(
        name, "CompositeExplicitAutogradNonFunctional"
    )


@functools.cache
def out_overload(name: str) -> str:
    """The out= overload that a functional or in-place overload's composite calls:
    aten::add.Tensor / aten::add_.Tensor -> aten::add.out, aten::max.dim ->
    aten::max.dim_max, aten::hardshrink_backward -> ...grad_input, aten::_linalg_svd
    -> ...U. It is the out= schema whose other arguments are the overload's own
    (names and types); `name` itself when there is none."""
    import torch

    base, _, overload = name.partition(".")
    functional = base[:-1] if _in_place(name) else base
    get = torch._C._jit_get_schemas_for_operator
    try:
        schemas = {s.overload_name: s for s in get(functional)}
        own = next((s for s in get(base) if s.overload_name == overload), None)
    except RuntimeError:  # not an operator the JIT knows
        return name
    if own is None:
        return name

    def writes(a) -> bool:
        return a.kwarg_only and a.alias_info is not None and a.alias_info.is_write

    def signature(schema) -> list[tuple[str, str]]:
        return [(a.name, str(a.type)) for a in schema.arguments if not writes(a)]

    for candidate, schema in schemas.items():
        if any(writes(a) for a in schema.arguments) and signature(schema) == signature(own):
            return f"{functional}.{candidate}"
    return name


def through_out(out_tier: str) -> str:
    """The tier of a functional overload that runs as its out= overload: a native
    (or core) out= kernel makes it a decomposition, any other tier is its own."""
    return "decomposition" if out_tier in ("native", "core") else out_tier


def _catalog_tables() -> tuple[dict[str, str], dict[str, str], dict[str, set[str]]]:
    """(overload -> semantic id, overload -> route, {"native"|"generated"|"composite": ids});
    empty without the catalog."""
    import torch

    try:
        overloads = dict(r.split("=", 1) for r in torch.ops.flagos._catalog_overloads())
        routes = dict(r.split("=", 1) for r in torch.ops.flagos._catalog_routes())
        kernels = {
            "native": set(torch.ops.flagos._catalog_native_ids()),
            "generated": set(torch.ops.flagos._catalog_generated_ids()),
            "composite": set(torch.ops.flagos._catalog_composite_ids()),
            "in_place_only": set(torch.ops.flagos._catalog_generated_in_place_only_ids()),
            "in_place_composite": set(torch.ops.flagos._catalog_in_place_composite_ids()),
        }
    except (AttributeError, RuntimeError):  # core built with FLAGOS_ENABLE_CATALOG=OFF
        none: dict[str, set[str]] = {k: set() for k in ("native", "generated", "composite")}
        return {}, {}, {**none, "in_place_only": set(), "in_place_composite": set()}
    return overloads, routes, kernels


def _in_place(name: str) -> bool:
    """aten::add_.Tensor, aten::exp_ (composites do not serve these)."""
    base = name.split(".", 1)[0]
    return base.endswith("_") and not base.endswith("__")


# What `tier()` below can predict, and the catalog's families (ops/catalog.yaml).
PREDICTED_TIERS = ("native", "generated", "decomposition", "fallback")
FAMILIES = (
    "pointwise", "reduction", "normalization", "gemm", "convolution", "pooling", "index",
    "shape", "random", "loss", "optimizer", "fft", "linalg",
)  # fmt: skip
# The plugin's library slots (include/flagos/fft.h, linalg.h): backend_info()
# key -> what its operators take when the slot is empty.
LIBRARY_SLOTS = {
    "fft": "torch.fft takes the host tier",
    "linalg": "torch.linalg takes the host tier",
}
# The linear-algebra slot's members (all optional) each linalg composite
# calls (csrc/dispatch/tiers/decomposition/linalg_*.cpp): without them it
# takes the host tier.
LINALG_MEMBERS = {
    "linalg_lu_factor": ("getrf",),
    "linalg_lu": ("getrf",),
    "lu_unpack": (),
    "linalg_lu_solve": ("getrs",),
    "linalg_solve": ("getrf", "getrs"),
    "linalg_inv": ("getrf", "getrs"),
    "linalg_det": ("getrf",),
    "linalg_slogdet": ("getrf",),
    "linalg_cholesky": ("potrf",),
    "cholesky": ("potrf",),
    "cholesky_solve": ("trsm",),
    "cholesky_inverse": ("trsm",),
    "triangular_solve": ("trsm",),
    "linalg_solve_triangular": ("trsm",),
    "geqrf": ("geqrf",),
    "householder_product": ("orgqr",),
    "ormqr": ("ormqr",),
    "linalg_qr": ("geqrf", "orgqr"),
    "linalg_svd": ("gesvd",),
    "linalg_eigh": ("syevd",),
    "linalg_matrix_exp": (),
    "linalg_lstsq": ("gesvd",),
    "linalg_eig": ("geev",),
    "linalg_eigvals": ("geev",),
    "linalg_ldl_factor": ("sytrf",),
    "linalg_ldl_solve": ("sytrs",),
}


def slot_text(value: Any) -> str | None:
    """A backend_info() library-slot entry as one line (None: the slot is empty)."""
    if isinstance(value, dict):
        return f"{value['library']} ({', '.join(value['members']) or 'no members'})"
    return value


def _local_support(probe: bool = False, family: str | None = None) -> dict[str, Any]:
    from .. import backend_info, initialize, is_initialized

    if not is_initialized():
        initialize()
    info = backend_info(verbose=False)
    overloads, routes, kernels = _catalog_tables()
    native = kernels["native"]
    entries = _catalog_yaml()

    tiers: dict[str, str] = {}
    linalg_members = set((info.get("linalg") or {}).get("members", ()))

    def linalg_ready(op_id: str) -> bool:
        needs = LINALG_MEMBERS.get(op_id, ())
        return all(m in linalg_members for m in needs)

    def tier(name: str) -> str:
        if name in tiers:
            return tiers[name]
        op_id, route = overloads[name], routes.get(name, "auto")
        cea, ceanf = _has_composite(name)
        out = out_overload(name)
        if route == "fallback":
            result = "fallback"
        elif op_id in native and route != "generated":
            result = "native"
        elif op_id in kernels["generated"] and (
            _in_place(name) or op_id not in kernels["in_place_only"]
        ):
            result = "generated"
        elif op_id in kernels["composite"] and (
            not _in_place(name) or op_id in kernels["in_place_composite"]
        ):
            # A linalg composite without its slot members declines; ATen's own
            # composite kernel (linalg_lstsq's, say) is then the decomposition.
            result = "decomposition" if linalg_ready(op_id) or cea else "fallback"
        elif entries.get(op_id, {}).get("decompose", True) is False or not (cea or ceanf):
            result = "fallback"
        elif (cea or ceanf) and out in overloads and out != name:
            result = through_out(tier(out))
        else:
            result = "decomposition"
        tiers[name] = result
        return result

    by_id: dict[str, dict[str, Any]] = {}
    for name, op_id in overloads.items():
        entry = entries.get(op_id, {})
        row = by_id.setdefault(
            op_id,
            {
                "id": op_id,
                "family": entry.get("family", "?"),
                "dtypes": entry.get("dtypes", []),
                "native": op_id in native,
                "overloads": {},
            },
        )
        row["overloads"][name] = {"route": routes.get(name, "auto"), "tier": tier(name)}
    probed: dict[str, dict[str, str]] | None = None
    if probe:
        from ._probe import dtype_tiers
        from ._probe import probe as run_probe

        ids = {i for i, e in entries.items() if family in (None, e.get("family"))}
        probed = run_probe(overloads, ids if family else None)
        for row in by_id.values():
            row["dtype_tiers"] = dtype_tiers(probed, list(row["overloads"]))
    summary: dict[str, int] = {}
    for t in tiers.values():
        summary[t] = summary.get(t, 0) + 1
    return {
        "backend": info["backend"],
        "plugin_version": info["plugin_version"],
        "abi": info["abi"],
        "torch_version": info["torch_version"],
        "catalog": bool(overloads),
        "native_ids": sorted(native),
        "library_slots": {slot: slot_text(info.get(slot)) for slot in LIBRARY_SLOTS},
        "ops": list(by_id.values()),
        "overloads": dict(sorted(tiers.items())),
        "summary": {"semantic_ops": len(by_id), "overloads": len(tiers), "tiers": summary},
        "probed": probed,
    }


def support_list(
    backend: str | None = None, probe: bool = False, family: str | None = None
) -> dict[str, Any]:
    """The support list of `backend` (default: the running one, else FLAGOS_BACKEND/auto).

    In this process when nothing or the same backend is initialized; otherwise
    from `python -m flagos_torchfl ops --backend NAME --json -` in a subprocess.
    @p probe: also the tier each dtype runs on, by calling (Note [Probed
    tiers]; only the operators of @p family when given).
    """
    from .. import _state, initialize, is_initialized

    running = _state.backend_name
    if backend in (None, "auto") or backend == running:
        return _local_support(probe, family)
    if not is_initialized():
        initialize(backend)
        return _local_support(probe, family)
    extra = (["--probe"] if probe else []) + (["--family", family] if family else [])
    proc = subprocess.run(
        [sys.executable, "-m", "flagos_torchfl", "ops", "--backend", backend, "--json", "-", "-q"]
        + extra,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"ops --backend {backend} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


def load_support(path: str) -> dict[str, Any]:
    """A support list written by `ops --json FILE` (what coverage intersects with)."""
    data = json.loads(Path(path).read_text())
    if "overloads" not in data or "backend" not in data:
        raise ValueError(f"{path}: not a support list from `flagos-torchfl ops --json`")
    return data


def _overload_names(op: dict[str, Any], most: int = 2) -> str:
    """The ATen overloads a row stands for: a semantic ID is not an ATen name
    (semantic op `convolution` is aten::convolution_overrideable, which ATen
    calls only for devices with no aten::convolution kernel of their own)."""
    names = [n.removeprefix("aten::") for n in op["overloads"]]
    more = f", +{len(names) - most}" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _short(dtype: str) -> str:
    return dtype.replace("bfloat", "bf").replace("float", "f")


def _dtype_column(op: dict[str, Any]) -> str:
    """The catalog's dtypes; probed (Note [Probed tiers]): each dtype's tier,
    "f32,f64 native; f16,bf16 decomposition" (dtypes no sample reached: "?")."""
    probed = op.get("dtype_tiers")
    if probed is None:
        return ",".join(_short(d) for d in op["dtypes"])
    groups: dict[str, list[str]] = {}
    for d in op["dtypes"]:
        groups.setdefault(probed.get(d, "?"), []).append(_short(d))
    for d, t in probed.items():  # a dtype outside the catalog's list that ran
        if d not in op["dtypes"]:
            groups.setdefault(t, []).append(_short(d))
    return "; ".join(f"{','.join(ds)} {t}" for t, ds in groups.items())


def format_support(data: dict[str, Any], tier: str | None = None, family: str | None = None) -> str:
    rows = [["operator", "family", "tier", "dtypes", "overloads"]]
    for op in sorted(data["ops"], key=lambda o: (o["family"], o["id"])):
        if family and op["family"] != family:
            continue
        op_tiers = sorted({o["tier"] for o in op["overloads"].values()})
        if tier and tier not in op_tiers:
            continue
        dtypes = _dtype_column(op)
        rows.append([op["id"], op["family"], "/".join(op_tiers), dtypes, _overload_names(op)])
    s = data["summary"]
    tiers = ", ".join(f"{k} {v}" for k, v in sorted(s["tiers"].items()))
    head = (
        f"backend {data['backend']} {data['plugin_version']} (ABI {data['abi']}), "
        f"torch {data['torch_version']}\n"
        f"catalog: {s['semantic_ops']} semantic operators ({len(data['native_ids'])} with a native "
        f"kernel), {s['overloads']} ATen overloads: {tiers or 'none'}"
    )
    slots = data.get("library_slots", {})
    head += "\nlibrary slots: " + "; ".join(
        f"{slot} {slots[slot]}" if slots.get(slot) else f"{slot} empty ({why})"
        for slot, why in LIBRARY_SLOTS.items()
    )
    if data.get("probed") is None:
        head += "\n(tier: predicted per overload; dtypes: what each operator is defined for. "
        head += "--probe calls them and shows the tier each dtype runs on)"
    else:
        head += f"\nprobed: {len(data['probed'])} overloads called in OpInfo samples per dtype"
    if not data["catalog"]:
        head += "\n(the core was built without the catalog: every ATen op outside the core's own "
        head += "takes the host fallback)"
    return head + "\n\n" + render(rows, colour_column=2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend", default=None, help="plugin name (default: $FLAGOS_BACKEND, else auto)"
    )
    # Choices, so that a typo is a usage error (exit 2), never an empty table
    # that a CI script would read as "nothing on that tier".
    parser.add_argument(
        "--tier",
        default=None,
        choices=PREDICTED_TIERS,
        help="only operators with an overload on this tier",
    )
    parser.add_argument(
        "--family", default=None, choices=FAMILIES, help="only operators of this family"
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="call each operator in OpInfo samples of the floating, integer and bool dtypes and "
        "show the tier each dtype ran on (with --family: that family's operators only; the whole "
        "catalog takes about two minutes)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no table (with --json)")
    add_output_arguments(parser)


def command(args: argparse.Namespace) -> int:
    data = support_list(args.backend, probe=args.probe, family=args.family)
    write_json(args.json, data)
    if not args.quiet and args.json != "-":
        print(format_support(data, args.tier, args.family))
    return 0
