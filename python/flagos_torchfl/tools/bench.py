"""`flagos-torchfl bench MODEL`: latency, throughput, peak memory and a per-operator
time table that says which tier each operator took.

    bench(model, steps=20, warmup=5, train=False, compare=None, profile=False) -> dict

Each step is one forward (with --train also the loss's backward and zeroing
the gradients) followed by a device synchronize. After the timed steps, one
more step runs under a dispatch mode that synchronizes around every ATen call
and times it. The tier of each operator is what op_stats() counted during
that step; an operator the core never saw by that name (a composite such as
aten::t, which ran as other operators) shows the predicted tier marked '*'.

profile=True (--profile) runs one more step under PyTorch's profiler with
device time per operator ("FLAGOS" columns of key_averages()). Where the
core has its Kineto child profiler and the plugin a tracing table
(backend_info()["device_activity"]), that is torch.profiler.profile(
activities=[CPU, PrivateUse1]): the plugin's own records of each kernel,
copy and fill, linked to the operator that launched them
(csrc/runtime/profiler.cpp, flagos/trace.h). Otherwise it falls back to the
legacy torch.autograd.profiler.profile(use_device="flagos"), whose
ProfilerStubs time every operator with a pair of vendor events on the
current stream (docs/tools.md, "bench").
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from typing import Any

from . import _model, _output, coverage, ops
from ._output import add_output_arguments, render, write_json

DEVICE = "flagos"


def _sync(device: str) -> None:
    import torch

    if device != "cpu":
        torch.flagos.synchronize()


def _step_fn(case: _model.ModelCase, device: str, train: bool):
    import torch

    model = copy.deepcopy(case.model).to(device)
    inputs = _model.to_device(case.inputs, device)
    if not train:
        model.eval()

    def step():
        if train:
            loss = case.loss_fn(model(*inputs))
            loss.backward()
            for p in model.parameters():
                p.grad = None
        else:
            with torch.no_grad():
                model(*inputs)
        _sync(device)

    return step


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _time_steps(step, steps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        step()
    times = []
    for _ in _output.progress(range(steps), "timing"):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def _latency(times: list[float], batch: int) -> dict[str, float]:
    mean = statistics.fmean(times)
    return {
        "p50_ms": _percentile(times, 0.5) * 1e3,
        "p95_ms": _percentile(times, 0.95) * 1e3,
        "mean_ms": mean * 1e3,
        "steps_per_s": 1.0 / mean if mean else 0.0,
        "samples_per_s": batch / mean if mean else 0.0,
    }


def _op_times(step, device: str) -> dict[str, dict[str, float]]:
    """{overload: {calls, total_ms}} for one step, synchronizing around each call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    times: dict[str, dict[str, float]] = {}

    class Timer(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            _sync(device)
            t0 = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            _sync(device)
            entry = times.setdefault(func.name(), {"calls": 0, "total_ms": 0.0})
            entry["calls"] += 1
            entry["total_ms"] += (time.perf_counter() - t0) * 1e3
            return out

    with Timer():
        step()
    return times


_PROFILE_SORT = {"device": "self_device_time_total", "cpu": "self_cpu_time_total"}


def _profile(step, sort: str, top: int) -> dict[str, Any]:
    """One step under torch's profiler with flagos device time per operator."""
    import torch
    from torch.profiler import ProfilerActivity

    from .. import backend as _backend
    from .. import config

    config.quiet_kineto()  # Kineto's gpuGetDeviceCount ERROR: noise here
    if _backend.backend_info(verbose=False).get("device_activity"):
        via = "torch.profiler, CPU + PrivateUse1 activity"
        activities = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
        with torch.profiler.profile(activities=activities) as prof:
            step()
    else:  # no tracing table (or a torch without the registry): the legacy stubs
        via = f"use_device='{DEVICE}'"
        with torch.autograd.profiler.profile(use_device=DEVICE) as prof:
            step()
    averages = prof.key_averages()
    rows = [
        {
            "op": e.key,
            "calls": e.count,
            "cpu_total_us": e.cpu_time_total,
            "self_cpu_us": e.self_cpu_time_total,
            "device_total_us": e.device_time_total,
            "self_device_us": e.self_device_time_total,
        }
        for e in averages
    ]
    key = "self_device_us" if sort == "device" else "self_cpu_us"
    rows.sort(key=lambda r: -r[key])
    table = averages.table(sort_by=_PROFILE_SORT[sort], row_limit=top)
    return {"sort": sort, "rows": rows, "table": table, "via": via}


def bench(
    model: str | _model.ModelCase,
    steps: int = 20,
    warmup: int = 5,
    train: bool = False,
    compare: str | None = None,
    backend: str | None = None,
    op_table: bool = True,
    profile: bool = False,
    profile_sort: str = "device",
) -> dict[str, Any]:
    """Benchmark `model` on the flagos device (and on `compare`="cpu" in this process)."""
    import torch

    from .. import backend_info, initialize, op_stats, reset_op_stats

    if steps < 1 or warmup < 0:
        raise ValueError("bench: --steps must be >= 1 and --warmup >= 0")
    if profile_sort not in _PROFILE_SORT:
        raise ValueError(f"bench: --profile-sort must be one of {sorted(_PROFILE_SORT)}")
    initialize(backend)
    info = backend_info(verbose=False)
    case = _model.load(model) if isinstance(model, str) else model
    first = _model.first_tensor(case.inputs)
    batch = int(first.shape[0]) if first is not None and first.dim() else 1

    step = _step_fn(case, DEVICE, train)
    step()  # allocate and compile before the peak-memory window opens
    torch.flagos.reset_peak_memory_stats()
    times = _time_steps(step, steps, warmup)
    result: dict[str, Any] = {
        "model": case.name,
        "backend": info["backend"],
        "mode": "train" if train else "inference",
        "steps": steps,
        "warmup": warmup,
        "batch": batch,
        "latency": _latency(times, batch),
        "peak_memory_bytes": int(torch.flagos.max_memory_allocated()),
    }
    if op_table:
        reset_op_stats()
        timed = _op_times(step, DEVICE)
        observed = op_stats()
        support = ops.support_list()
        total = sum(t["total_ms"] for t in timed.values()) or 1.0
        rows = []
        for name, t in sorted(timed.items(), key=lambda kv: -kv[1]["total_ms"]):
            seen = coverage.observed_tier(name, observed)
            if seen:  # by its own name, or as its structured out= kernel
                (tier, via), predicted = seen, False
            else:
                via, tier, predicted = None, coverage.tier_of(name, support), True
            rows.append(
                {
                    "op": name,
                    "calls": t["calls"],
                    "total_ms": t["total_ms"],
                    "share": t["total_ms"] / total,
                    "tier": tier,
                    "predicted": predicted,
                    "counted_as": via,
                }
            )
        result["ops"] = rows
        result["op_stats"] = observed
    if profile:
        result["profile"] = _profile(step, profile_sort, top=25)
    if compare:
        if compare != "cpu":
            raise ValueError(f"bench --compare: only 'cpu' is supported, not {compare!r}")
        cpu = _latency(_time_steps(_step_fn(case, "cpu", train), steps, warmup), batch)
        result["compare"] = {
            "device": "cpu",
            "latency": cpu,
            "ratio_mean": result["latency"]["mean_ms"] / cpu["mean_ms"] if cpu["mean_ms"] else 0,
        }
    return result


def format_result(r: dict[str, Any], top: int = 25) -> str:
    lat = r["latency"]
    lines = [
        f"model {r['model']} on {r['backend']} ({r['mode']}, batch {r['batch']}, "
        f"{r['warmup']} warm-up + {r['steps']} steps)",
    ]
    rows = [["", "P50 ms", "P95 ms", "mean ms", "steps/s", "samples/s"]]
    rows.append(
        [
            "flagos",
            f"{lat['p50_ms']:.3f}",
            f"{lat['p95_ms']:.3f}",
            f"{lat['mean_ms']:.3f}",
            f"{lat['steps_per_s']:.1f}",
            f"{lat['samples_per_s']:.1f}",
        ]
    )
    if "compare" in r:
        c = r["compare"]["latency"]
        rows.append(
            [
                "cpu",
                f"{c['p50_ms']:.3f}",
                f"{c['p95_ms']:.3f}",
                f"{c['mean_ms']:.3f}",
                f"{c['steps_per_s']:.1f}",
                f"{c['samples_per_s']:.1f}",
            ]
        )
    lines.append(render(rows))
    if "compare" in r:
        lines.append(f"flagos / cpu mean latency: {r['compare']['ratio_mean']:.2f}x")
    lines.append(f"peak device memory: {r['peak_memory_bytes']} bytes")
    if r.get("ops"):
        rows = [["operator", "calls", "total ms", "share", "tier"]]
        for op in r["ops"][:top]:
            rows.append(
                [
                    op["op"],
                    str(op["calls"]),
                    f"{op['total_ms']:.3f}",
                    f"{op['share'] * 100:.1f}%",
                    op["tier"] + ("*" if op["predicted"] else ""),
                ]
            )
        lines += ["", "per operator (one step, synchronized around each call):"]
        lines.append(render(rows, colour_column=4))
        if len(r["ops"]) > top:
            lines.append(f"  ... {len(r['ops']) - top} more in --json")
        lines.append("  * predicted tier (the core counted no call by this name)")
    if r.get("profile"):
        lines += [
            "",
            f"torch profiler (one step, {r['profile'].get('via', 'use_device=flagos')}, "
            f"by self {r['profile']['sort']} time):",
            r["profile"]["table"].rstrip(),
        ]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="FILE.py[:FUNC], MODULE:FUNC, torchvision:NAME or timm:NAME (docs/tools.md)"
    )
    parser.add_argument("--backend", default=None, help="plugin (default: $FLAGOS_BACKEND/auto)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up steps (default 5)")
    parser.add_argument("--train", action="store_true", help="forward + backward per step")
    parser.add_argument("--compare", choices=["cpu"], default=None, help="also run on CPU")
    parser.add_argument("--no-op-table", action="store_true", help="skip the per-operator pass")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also one step under torch's profiler: its key_averages table, device time per op",
    )
    parser.add_argument(
        "--profile-sort",
        choices=sorted(_PROFILE_SORT),
        default="device",
        help="sort the profiler table by self device or CPU time (default device)",
    )
    add_output_arguments(parser)


def command(args: argparse.Namespace) -> int:
    result = bench(
        args.model,
        steps=args.steps,
        warmup=args.warmup,
        train=args.train,
        compare=args.compare,
        backend=args.backend,
        op_table=not args.no_op_table,
        profile=args.profile,
        profile_sort=args.profile_sort,
    )
    write_json(args.json, result)
    if args.json != "-":
        print(format_result(result))
    return 0
