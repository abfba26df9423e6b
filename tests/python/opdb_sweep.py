"""The whole of PyTorch's op_db on the flagos device: does each operator match
CPU, and does it run without the host fallback (issue 34)?

    PYTHONPATH=python python3 tests/python/opdb_sweep.py [--dtype float32] [--samples 3]
        [--json build/opdb-sweep.json] [--only NAME,...] [--write-list tests/python/opdb_fallbacks.txt]

Every OpInfo whose dtype the CPU supports runs its first --samples samples
(made for the device, as PyTorch's device tests make them: index arguments
that must stay on CPU stay there) on the device and, copied, on CPU.
Results are compared at the OpInfo catalog sweep's float32 tolerance
(rtol 1e-4, atol 1e-5: GEMMs and convolutions sum in other orders;
tests/python/test_opinfo_catalog.py) and torch.testing's own for other
dtypes. Around each device call op_stats() counts the calls that took the
host fallback, by overload. Random OpInfos (dropout, normal, ...) draw
other numbers than CPU, as CUDA does, and empty* ones leave memory
uninitialized: both are compared by shape and dtype only, and so is any
OpInfo PyTorch runs under wrapper_set_seed (attention with dropout).

An OpInfo *matches* when every sample the CPU accepts gives CPU's result
(and at least one does); it is *device-only* when, besides, no sample took
the host fallback. The summary prints both counts over the OpInfos that
ran, then the overloads that still took the fallback, most OpInfos first.
tests/python/test_opdb_sweep.py runs it and holds the floor.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten

# Names that draw random numbers or leave memory uninitialized: compared by
# shape and dtype only.
RANDOM = (
    "dropout",
    "bernoulli",
    "normal",
    "rand",
    "uniform",
    "multinomial",
    "rrelu",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "poisson",
    "fractional_max_pool",
    "empty",
)
TOLERANCE = {torch.float32: {"rtol": 1e-4, "atol": 1e-5}}


def opinfo_id(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def fallback_calls() -> Counter:
    import flagos_torchfl as ft

    return Counter({op: t.get("fallback", 0) for op, t in ft.op_stats().items()})


def _same(actual, expected, random: bool, dtype: torch.dtype) -> None:
    got, _ = tree_flatten(actual)
    want, _ = tree_flatten(expected)
    assert len(got) == len(want), f"{len(got)} results, CPU has {len(want)}"
    for g, w in zip(got, want, strict=True):
        if not isinstance(w, torch.Tensor):
            if not random:
                torch.testing.assert_close(g, w, equal_nan=True, **TOLERANCE.get(dtype, {}))
            continue
        assert isinstance(g, torch.Tensor), f"{type(g).__name__} where CPU gives a tensor"
        assert g.device.type == "flagos", f"result on {g.device}"
        if random:
            assert (g.shape, g.dtype) == (w.shape, w.dtype), f"{g.shape} {g.dtype} vs {w.shape}"
        else:
            torch.testing.assert_close(g.cpu(), w, equal_nan=True, **TOLERANCE.get(dtype, {}))


def _on(sample, device: str):
    """@p sample with its tensors and its `device` argument on @p device;
    tensors the sample keeps on CPU (index lists) stay there."""

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.clone() if t.device.type == "cpu" else t.to(device)

    def names_a_device(a):
        return isinstance(a, torch.device) or (
            isinstance(a, str) and a.startswith(("cpu", "flagos"))
        )

    moved = sample.transform(move)
    moved.args = tuple(device if names_a_device(a) else a for a in moved.args)
    if "device" in moved.kwargs:
        moved.kwargs["device"] = device
    return moved


def _seeded(op) -> bool:
    """Whether PyTorch runs the OpInfo under wrapper_set_seed: it draws from
    the generator (attention with dropout, lowrank SVD's projections)."""
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def _first_samples(op, device: str, dtype: torch.dtype, samples: int):
    """The OpInfo's first @p samples samples made for @p device, or why not."""
    chosen = []
    try:
        for sample in op.sample_inputs(device, dtype, requires_grad=False):
            chosen.append(sample)
            if len(chosen) == samples:
                break
    except Exception as err:  # noqa: BLE001 - the OpInfo cannot make samples there
        return str(err).splitlines()[0][:120] if str(err) else type(err).__name__
    return chosen


def sweep_one(op, dtype: torch.dtype, samples: int) -> dict:
    """One OpInfo: {"status", "passed", "failed", "fallback": {overload: calls}, "errors"}."""
    record = {"status": "ran", "passed": 0, "failed": 0, "fallback": {}, "errors": []}
    random = any(r in op.name for r in RANDOM) or _seeded(op)
    chosen, made_on = _first_samples(op, "flagos", dtype, samples), "flagos"
    if isinstance(chosen, str):  # made on CPU and moved, where the device could not make them
        chosen, made_on = _first_samples(op, "cpu", dtype, samples), "cpu"
        if isinstance(chosen, str):
            record["status"] = f"no samples: {chosen}"
            return record
    fallbacks: Counter = Counter()
    for i, sample in enumerate(chosen):
        try:
            cpu = _on(sample, "cpu")
            expected = op(cpu.input, *cpu.args, **cpu.kwargs)
        except Exception:  # noqa: BLE001 - CPU rejects it: not a test
            continue
        before = fallback_calls()
        try:
            dev = sample if made_on == "flagos" else _on(sample, "flagos")  # sparse: raises
            actual = op(dev.input, *dev.args, **dev.kwargs)
            fallbacks.update(fallback_calls() - before)
            _same(actual, expected, random, dtype)
            record["passed"] += 1
        except Exception as err:  # noqa: BLE001 - recorded
            fallbacks.update(fallback_calls() - before)
            record["failed"] += 1
            record["errors"].append(f"sample {i}: {type(err).__name__}: {str(err)[:200]}")
    record["fallback"] = dict(fallbacks)
    if record["passed"] + record["failed"] == 0:
        record["status"] = "CPU rejects every sample"
    if random:
        record["random"] = True
    return record


def sweep(dtype: torch.dtype, samples: int, only: set[str] | None = None) -> dict[str, dict]:
    from torch.testing._internal.common_methods_invocations import op_db

    records = {}
    for op in op_db:
        name = opinfo_id(op)
        if only and name not in only and op.name not in only:
            continue
        if dtype not in op.supported_dtypes("cpu"):
            continue
        records[name] = sweep_one(op, dtype, samples)
    return records


def summary(records: dict[str, dict]) -> dict:
    ran = {n: r for n, r in records.items() if r["status"] == "ran"}
    matched = [n for n, r in ran.items() if r["failed"] == 0]
    device_only = [n for n in matched if not ran[n]["fallback"]]
    by_overload: Counter = Counter()
    for r in ran.values():
        by_overload.update(set(r["fallback"]))
    return {
        "ran": len(ran),
        "matched": len(matched),
        "device_only": len(device_only),
        "mismatched": sorted(n for n, r in ran.items() if r["failed"]),
        "with_fallback": sorted(n for n, r in ran.items() if r["fallback"]),
        "fallback_overloads": dict(by_overload.most_common()),
    }


LIST_HEADER = """\
# OpInfos of PyTorch's op_db that still take the host fallback on host
# (float32, 3 samples), each with the overloads that fell back. Written by
# `tests/python/opdb_sweep.py --write-list`; test_opdb_sweep.py holds it.
# The list only shrinks: an OpInfo leaves it when its operators run on the
# device (issue 34); one that joins it is a regression.
"""


def write_list(path: Path, records: dict[str, dict]) -> None:
    names = sorted(n for n, r in records.items() if r["status"] == "ran" and r["fallback"])
    width = max((len(n) for n in names), default=0)
    lines = [f"{n.ljust(width)}  # {', '.join(sorted(records[n]['fallback']))}" for n in names]
    path.write_text(LIST_HEADER + "\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--json", type=Path, help="write every OpInfo's record here")
    ap.add_argument("--only", help="comma-separated OpInfo names")
    ap.add_argument("--write-list", type=Path, help="write the OpInfos that fell back here")
    args = ap.parse_args()
    import flagos_torchfl as ft

    ft.initialize()  # FLAGOS_BACKEND's, else the best usable plugin

    records = sweep(
        getattr(torch, args.dtype), args.samples, set(args.only.split(",")) if args.only else None
    )
    s = summary(records)
    if args.write_list:
        write_list(args.write_list, records)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"summary": s, "records": records}, indent=1))
    ran = max(s["ran"], 1)
    print(
        f"{args.dtype}, {args.samples} samples: {s['ran']} OpInfos ran; "
        f"{s['matched']} match CPU ({100 * s['matched'] / ran:.1f}%); "
        f"{s['device_only']} with no host fallback ({100 * s['device_only'] / ran:.1f}%)"
    )
    for name in s["mismatched"]:
        print("mismatch:", name, "|", records[name]["errors"][0] if records[name]["errors"] else "")
    for overload, n in s["fallback_overloads"].items():
        print(f"fallback: {overload} ({n} OpInfos)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
