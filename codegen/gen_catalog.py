#!/usr/bin/env python3
"""Generate the catalog bridge's registration table and the vendor header.

Run at build time by codegen/catalog.cmake (never by hand, never committed):

    python3 codegen/gen_catalog.py --catalog ops/catalog.yaml --out-dir BUILD/generated

Reads ops/catalog.yaml and the operator schemas of the *installed* torch
(torch.ops.aten.<op>.<overload>._schema), validates every entry, and writes

    <out-dir>/catalog_table.cpp    the table the bridge registers (one
                                   TORCH_LIBRARY_IMPL(aten, PrivateUse1) block)
    <out-dir>/include/flagos/ops.h vendor-facing: one documented block and a
                                   FLAGOS_OP_<ID> constant per semantic ID
    <out-dir>/catalog_report.txt   what was skipped for this torch, and why

Validation errors (unknown field, family, dtype, overload or argument; an
output count that does not match the schema; a CompositeImplicitAutograd
overload) fail the build with one line per problem. An overload listed under
`optional:` that this torch lacks is skipped with a note, so one source tree
builds against several torch minors.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover - a build-environment problem
    sys.exit("gen_catalog.py: PyYAML is needed to read ops/catalog.yaml: pip install pyyaml")

FAMILIES = {
    "pointwise", "reduction", "normalization", "gemm", "convolution", "pooling",
    "index", "shape", "random", "loss", "optimizer", "fft", "linalg",
}
DTYPES = [
    "bool", "uint8", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
]
OP_FIELDS = {
    "id", "family", "aten", "outputs", "inputs", "scalars", "dtypes", "expr",
    "promote", "optional", "decompose", "host", "mutates",
}
SCALAR_FIELDS = {"name", "as", "enum", "len"}
ENCODINGS = {"dims", "dim", "length", "philox"}
ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# The bridge's Family/Encoding enums (csrc/dispatch/bridge/catalog.h).
FAMILY_ENUM = {f: "Family::" + "".join(p.capitalize() for p in f.split("_")) for f in FAMILIES}


class CatalogError(Exception):
    pass


def load_torch():
    import torch  # noqa: F401  (the installed torch defines the schemas)

    return torch


def schema_of(torch, overload: str):
    """The FunctionSchema of aten::<overload>, or None if this torch lacks it."""
    name, _, ov = overload.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return None
    try:
        return getattr(packet, ov or "default")._schema
    except (AttributeError, RuntimeError):
        return None


def has_kernel(torch, overload: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + overload, key)


def is_tensor_type(t: str) -> bool:
    return t in ("Tensor", "Tensor?", "Tensor[]", "List[Tensor]", "Optional[Tensor]",
                 "List[Optional[Tensor]]", "Tensor?[]")


def is_list_type(t: str) -> bool:
    if t.startswith("Optional[") and t.endswith("]"):
        t = t[len("Optional["):-1]
    return t.startswith("List[") or t.endswith("[]")


def classify_outputs(schema):
    """Number of outputs the bridge will find for this overload (mirrors
    Note [Finding the outputs] in csrc/dispatch/bridge/schema.cpp)."""
    args = list(schema.arguments)
    out_args = [a for a in args if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]
    if out_args:
        return "out", len(out_args)
    rets = list(schema.returns)
    aliased = [r for r in rets if r.alias_info is not None]
    if aliased:
        return "inplace", len(aliased)
    if not rets:
        mut = [a for a in args if a.alias_info is not None and a.alias_info.is_write]
        return "void", len(mut)
    return "functional", len(rets)


def expand_dtypes(spec, groups, where):
    out = []
    for d in spec:
        if d in groups:
            out.extend(expand_dtypes(groups[d], groups, where))
        elif d in DTYPES:
            out.append(d)
        else:
            raise CatalogError(f"{where}: unknown dtype or group '{d}'")
    return sorted(set(out), key=DTYPES.index)


def normalize_scalar(s, where):
    if isinstance(s, str):
        return {"name": s}
    if not isinstance(s, dict) or "name" not in s:
        raise CatalogError(f"{where}: a scalar is a name or a mapping with 'name'")
    unknown = set(s) - SCALAR_FIELDS
    if unknown:
        raise CatalogError(f"{where}: scalar '{s['name']}': unknown field(s) {sorted(unknown)}")
    if "as" in s and s["as"] not in ENCODINGS:
        raise CatalogError(f"{where}: scalar '{s['name']}': unknown encoding '{s['as']}'")
    if "len" in s and (not isinstance(s["len"], int) or not 1 <= s["len"] <= 16):
        raise CatalogError(f"{where}: scalar '{s['name']}': len must be 1..16")
    return dict(s)


def validate(catalog, torch):
    """Returns (ops, notes); raises CatalogError listing every problem."""
    errors, notes = [], []
    if not isinstance(catalog, dict) or catalog.get("version") != 1:
        raise CatalogError("catalog: expected a mapping with 'version: 1'")
    groups = catalog.get("dtype_groups", {})
    ops = []
    seen_ids, seen_overloads = set(), {}
    for i, op in enumerate(catalog.get("ops", [])):
        where = f"ops[{i}]"
        try:
            if not isinstance(op, dict):
                raise CatalogError(f"{where}: not a mapping")
            oid = op.get("id")
            where = f"op '{oid}'"
            unknown = set(op) - OP_FIELDS
            if unknown:
                raise CatalogError(f"{where}: unknown field(s) {sorted(unknown)}")
            if not isinstance(oid, str) or not ID_RE.match(oid):
                raise CatalogError(f"{where}: id must match {ID_RE.pattern}")
            if oid in seen_ids:
                raise CatalogError(f"{where}: duplicate id")
            seen_ids.add(oid)
            if op.get("family") not in FAMILIES:
                raise CatalogError(f"{where}: unknown family '{op.get('family')}' (one of {sorted(FAMILIES)})")
            for f in ("aten", "outputs", "inputs", "dtypes"):
                if not isinstance(op.get(f), list) or (f != "inputs" and not op[f]):
                    raise CatalogError(f"{where}: '{f}' must be a non-empty list")
            scalars = [normalize_scalar(s, where) for s in op.get("scalars", [])]
            dtypes = expand_dtypes(op["dtypes"], groups, where)
            promote = op.get("promote", op["inputs"] if op["family"] == "pointwise" else [])
            for p in promote:
                if p not in op["inputs"]:
                    raise CatalogError(f"{where}: promote names '{p}', which is not an input")
            for m in op.get("mutates", []):
                if m not in op["inputs"]:
                    raise CatalogError(f"{where}: mutates names '{m}', which is not an input")
            optional = set(op.get("optional", []))
            overloads = []
            for ov in op["aten"]:
                if ov in seen_overloads:
                    raise CatalogError(f"{where}: overload {ov} already belongs to '{seen_overloads[ov]}'")
                seen_overloads[ov] = oid
                schema = schema_of(torch, ov)
                if schema is None:
                    if ov in optional:
                        notes.append(f"skipped aten::{ov} ({oid}): not in torch {torch.__version__}")
                        continue
                    raise CatalogError(f"{where}: aten::{ov} does not exist in torch {torch.__version__} "
                                       "(list it under 'optional:' if it only exists in some minors)")
                if has_kernel(torch, ov, "CompositeImplicitAutograd"):
                    raise CatalogError(f"{where}: aten::{ov} is CompositeImplicitAutograd: it decomposes "
                                       "above the device and must not get a PrivateUse1 kernel; list the "
                                       "ops it decomposes into instead")
                args = {a.name: a for a in schema.arguments}
                for name in op["inputs"]:
                    a = args.get(name)
                    if a is None:
                        raise CatalogError(f"{where}: input '{name}' is not an argument of aten::{ov}: {schema}")
                    if not is_tensor_type(str(a.type)):
                        raise CatalogError(f"{where}: input '{name}' of aten::{ov} is {a.type}, not a tensor")
                for s in scalars:
                    a = args.get(s["name"])
                    if a is None:
                        continue  # absent in this overload: passed as an absent scalar
                    if is_tensor_type(str(a.type)):
                        raise CatalogError(f"{where}: scalar '{s['name']}' of aten::{ov} is a tensor")
                    t = str(a.type)
                    if (s.get("as") == "philox") != ("Generator" in t):
                        raise CatalogError(f"{where}: scalar '{s['name']}' of aten::{ov} is {t}: "
                                           "a Generator takes `as: philox`, and only a Generator does")
                    if "enum" in s and "str" not in t:
                        raise CatalogError(f"{where}: scalar '{s['name']}' has an enum but is {t}")
                    listy = is_list_type(t)
                    if ("len" in s or s.get("as") == "length") and not listy:
                        raise CatalogError(f"{where}: scalar '{s['name']}' of aten::{ov} is {t}, not a list")
                    if "str" in t and "enum" not in s:
                        raise CatalogError(f"{where}: str scalar '{s['name']}' needs an enum")
                    if listy and not ("len" in s or s.get("as") in ("dims", "length")):
                        if "bool" not in t:
                            raise CatalogError(f"{where}: list scalar '{s['name']}' ({t}) needs len or as")
                        s["len"] = 3  # output_mask: bool[3] (or bool[2])
                kind, nout = classify_outputs(schema)
                if nout != len(op["outputs"]):
                    raise CatalogError(f"{where}: aten::{ov} ({kind}) has {nout} output(s), the entry "
                                       f"names {len(op['outputs'])}: {schema}")
                # Only true composites: a CompositeExplicitAutogradNonFunctional
                # kernel (structured functional ops) just calls the out=
                # variant, which the bridge serves anyway.
                decomposable = op.get("decompose", True) and has_kernel(
                    torch, ov, "CompositeExplicitAutograd")
                overloads.append({"name": ov, "kind": kind, "decomposable": decomposable,
                                  "schema": str(schema)})
            ops.append({**op, "scalars": scalars, "dtypes": dtypes, "promote": promote,
                        "overloads": overloads})
        except CatalogError as e:
            errors.append(str(e))
    if errors:
        raise CatalogError("\n".join(errors))
    return ops, notes


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def enc_name(s):
    if "enum" in s:
        return "Encoding::Enum"
    if "len" in s:
        return "Encoding::List"
    return {"dims": "Encoding::Dims", "dim": "Encoding::Dim", "length": "Encoding::Length",
            "philox": "Encoding::Philox"}.get(s.get("as"), "Encoding::Plain")


def write_table(ops, path, torch_version):
    lines = [
        "// GENERATED by codegen/gen_catalog.py from ops/catalog.yaml against torch "
        f"{torch_version}. Do not edit.",
        '#include "dispatch/bridge/catalog.h"',
        "",
        "namespace flagos::semantic {",
        "namespace {",
    ]
    for k, op in enumerate(ops):
        oid = op["id"]
        lines.append(f"// {oid}")
        ins = ", ".join(c_str(n) for n in op["inputs"]) or "nullptr"
        lines.append(f"const char* const kIn_{k}[] = {{{ins}}};")
        for j, s in enumerate(op["scalars"]):
            if "enum" in s:
                lines.append(f"const char* const kEnum_{k}_{j}[] = {{{', '.join(c_str(e) for e in s['enum'])}}};")
        if op["scalars"]:
            rows = []
            for j, s in enumerate(op["scalars"]):
                enum = f"kEnum_{k}_{j}" if "enum" in s else "nullptr"
                n = len(s["enum"]) if "enum" in s else s.get("len", 1)
                rows.append(f"{{{c_str(s['name'])}, {enc_name(s)}, {n}, {enum}}}")
            lines.append(f"const ScalarSpec kSc_{k}[] = {{{', '.join(rows)}}};")
    lines.append("}  // namespace")
    lines.append("")
    lines.append("const OpSpec kOps[] = {")
    for k, op in enumerate(ops):
        mask = 0
        for p in op["promote"]:
            mask |= 1 << op["inputs"].index(p)
        mut = 0
        for m in op.get("mutates", []):
            mut |= 1 << op["inputs"].index(m)
        sc = f"kSc_{k}" if op["scalars"] else "nullptr"
        host = c_str(op["host"]) if op.get("host") else "nullptr"
        expr = c_str(op["expr"]) if op.get("expr") else "nullptr"
        integral = "true" if "int64" in op["dtypes"] else "false"
        lines.append(
            f"  {{{c_str(op['id'])}, {FAMILY_ENUM[op['family']]}, kIn_{k}, {len(op['inputs'])}, "
            f"{sc}, {len(op['scalars'])}, {len(op['outputs'])}, {mask}u, {mut}u, {host}, {expr}, "
            f"{integral}}},")
    lines.append("};")
    lines.append(f"const int kNumOps = {len(ops)};")
    lines.append("")
    lines.append("const OverloadSpec kOverloads[] = {")
    n = 0
    for k, op in enumerate(ops):
        for ov in op["overloads"]:
            lines.append(f"  {{{c_str(ov['name'])}, {k}, {'true' if ov['decomposable'] else 'false'}}},")
            n += 1
    lines.append("};")
    lines.append(f"const int kNumOverloads = {n};")
    lines.append("}  // namespace flagos::semantic")
    lines.append("")
    lines.append("TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { flagos::semantic::registerCatalog(m); }")
    write_if_changed(path, "\n".join(lines) + "\n")
    return n


def describe_scalar(s):
    if "enum" in s:
        return f"int64 index into {{{', '.join(s['enum'])}}}"
    if "len" in s:
        return f"int[] expanded to {s['len']} int64 scalars"
    return {"dims": "int64 bitmask of normalized dims (all dims when empty/None)",
            "dim": "int64 normalized dim", "length": "int64 length of the list",
            "philox": "the generator (the device's default when absent) as two int64 scalars: "
                      "its seed, then the Philox counter of the call's first element; the core "
                      "advances the generator by the output's elements (docs/architecture.md, "
                      "Reproducible random numbers)"}.get(
        s.get("as"), "value as given (Scalar/float: f; int/bool/ScalarType: i)")


def write_header(ops, path, torch_version):
    out = [
        "/*",
        " * flagos vendor ABI — the operator catalog as C constants.",
        " *",
        f" * GENERATED by codegen/gen_catalog.py from ops/catalog.yaml (torch {torch_version}).",
        " * Do not edit; it is rebuilt with the core and never committed.",
        " *",
        " * A native kernel (kernel.h, flagosKernelFn) for semantic ID <id> receives",
        " *   outputs[] in the order listed under 'outputs', already allocated with",
        " *             their final shape and dtype (in-place: the destination itself);",
        " *   inputs[]  in the order listed under 'inputs'; an absent optional tensor",
        " *             has data == NULL and ndim == 0; a Tensor[] expands in place;",
        " *             pointwise ops get inputs broadcast to the output shape",
        " *             (stride 0) and cast to the promoted dtype;",
        " *   scalars[] in the order listed under 'scalars'; an absent optional scalar",
        " *             has dtype 0.",
        " */",
        "#ifndef FLAGOS_OPS_H_",
        "#define FLAGOS_OPS_H_",
        "",
        "#include \"flagos/kernel.h\"",
        "",
        f"#define FLAGOS_CATALOG_NUM_OPS {len(ops)}",
        "",
    ]
    for op in ops:
        out.append("/**")
        out.append(f" * {op['id']} ({op['family']})")
        if op.get("expr"):
            out.append(f" *   expr:    {op['expr']}")
        out.append(f" *   outputs: {', '.join(op['outputs'])}")
        out.append(f" *   inputs:  {', '.join(op['inputs']) or '(none)'}")
        for s in op["scalars"]:
            out.append(f" *   scalar:  {s['name']}: {describe_scalar(s)}")
        if op.get("mutates"):
            out.append(f" *   writes:  {', '.join(op['mutates'])} (inputs the kernel updates in place)")
        out.append(f" *   dtypes:  {', '.join(op['dtypes'])}")
        out.append(f" *   aten:    {', '.join(o['name'] for o in op['overloads']) or '(none in this torch)'}")
        out.append(" */")
        out.append(f"#define FLAGOS_OP_{op['id'].upper()} \"{op['id']}\"")
        out.append("")
    out.append("#endif /* FLAGOS_OPS_H_ */")
    write_if_changed(path, "\n".join(out) + "\n")


def write_if_changed(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args(argv)
    torch = load_torch()
    with open(args.catalog) as f:
        catalog = yaml.safe_load(f)
    try:
        ops, notes = validate(catalog, torch)
    except CatalogError as e:
        for line in str(e).splitlines():
            print(f"{args.catalog}: error: {line}", file=sys.stderr)
        return 1
    n = write_table(ops, os.path.join(args.out_dir, "catalog_table.cpp"), torch.__version__)
    write_header(ops, os.path.join(args.out_dir, "include", "flagos", "ops.h"), torch.__version__)
    report = [f"torch {torch.__version__}: {len(ops)} semantic ops, {n} ATen overloads"] + notes
    write_if_changed(os.path.join(args.out_dir, "catalog_report.txt"), "\n".join(report) + "\n")
    print(f"gen_catalog: {report[0]}" + (f" ({len(notes)} skipped)" if notes else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
