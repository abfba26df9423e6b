"""``flagos-torchfl selftest allreduce``: is the communication plane right, and how fast?

Run it under torchrun before any model::

    torchrun --nproc-per-node=2 -m flagos_torchfl selftest allreduce
    torchrun --nproc-per-node=2 -m flagos_torchfl selftest allreduce \\
        --routes vendor,host,gloo --max-bytes 64M --json result.json

Every rank brings the flagos device up (``--backend``, default FLAGOS_BACKEND
or auto), makes ``flagos:<local rank>`` its device, joins a process group
(``cpu:gloo,flagos:fccl``, unless one exists) and then:

1. correctness: all_reduce of each dtype (float32, float16, bfloat16, int32,
   int64) with each operator (sum, avg (floating types), min, max, product)
   at each size, against the value computed on the host;
2. bandwidth: all_reduce of float32 per size, timed over ``--iters``
   iterations after ``--warmup``; algbw = bytes / time and busbw = algbw *
   2 (n - 1) / n, the formulas of nccl-tests, with the slowest rank's time.

``--routes`` compares routes in one run: ``default`` (the group as
FLAGOS_COMM makes it), ``vendor`` and ``host`` (fccl groups forced onto a
route) and ``gloo`` (gloo on plain CPU tensors, the baseline). Rank 0 prints a
table (and writes JSON with ``--json``). A rank that does not arrive ends the
run after ``--timeout`` seconds with the error naming it; ``--expect-route``
fails the run when the default group took another route.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import Any

import torch

from . import config
from ._text import format_bytes, table

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}
OPS = ("sum", "avg", "min", "max", "product")
ROUTES = ("default", "vendor", "host", "gloo")


def _sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    sizes, size = [], max(1, min_bytes)
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return sizes


def _red_op(name: str):
    import torch.distributed as dist

    return {
        "sum": dist.ReduceOp.SUM,
        "avg": dist.ReduceOp.AVG,
        "min": dist.ReduceOp.MIN,
        "max": dist.ReduceOp.MAX,
        "product": dist.ReduceOp.PRODUCT,
    }[name]


def _rank_input(rank: int, count: int, dtype: torch.dtype, op: str) -> torch.Tensor:
    """Small integers, so every dtype holds inputs and results exactly (product: 1 or 2)."""
    i = torch.arange(count, dtype=torch.int64)
    values = (i + rank) % 2 + 1 if op == "product" else (i * 7 + rank * 3) % 11 + 1
    return values.to(dtype)


def _expected(world: int, count: int, dtype: torch.dtype, op: str) -> torch.Tensor:
    xs = torch.stack([_rank_input(r, count, dtype, op).double() for r in range(world)])
    out = {
        "sum": lambda: xs.sum(0),
        "avg": lambda: xs.mean(0),
        "min": lambda: xs.amin(0),
        "max": lambda: xs.amax(0),
        "product": lambda: xs.prod(0),
    }[op]()
    return out.to(dtype)


def _sync(device: torch.device) -> None:
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


class _Failure(Exception):
    """Ends the run with a diagnosis."""


def _check(group: Any, device: torch.device, sizes: list[int], dtypes, ops, world, rank):
    import torch.distributed as dist

    failures, cases = [], 0
    for name in dtypes:
        dtype = DTYPES[name]
        esize = torch.empty((), dtype=dtype).element_size()
        for op in ops:
            if op == "avg" and not dtype.is_floating_point:
                continue  # avg of integers truncates differently per library
            for nbytes in sizes:
                count = max(1, nbytes // esize)
                x = _rank_input(rank, count, dtype, op).to(device)
                dist.all_reduce(x, op=_red_op(op), group=group)
                got, want = x.cpu(), _expected(world, count, dtype, op)
                cases += 1
                tol = {} if dtype.is_floating_point else {"atol": 0, "rtol": 0}
                if dtype in (torch.float16, torch.bfloat16):
                    tol = {"atol": 1e-2, "rtol": 1e-2}
                if not torch.allclose(got.double(), want.double(), **tol):
                    bad = (got.double() - want.double()).abs().argmax().item()
                    failures.append(
                        f"{name} {op} {format_bytes(count * esize)}: element {bad} is "
                        f"{got[bad].item()}, expected {want[bad].item()}"
                    )
    return cases, failures


def _bench(group, device, sizes, dtype, iters, warmup, world):
    import torch.distributed as dist

    rows = []
    esize = torch.empty((), dtype=dtype).element_size()
    for nbytes in sizes:
        count = max(1, nbytes // esize)
        x = torch.zeros(count, dtype=dtype, device=device)
        for _ in range(warmup):
            dist.all_reduce(x, group=group)
        _sync(device)
        dist.barrier(group=group)
        start = time.perf_counter()
        works = [dist.all_reduce(x, group=group, async_op=True) for _ in range(iters)]
        for work in works:
            work.wait()
        _sync(device)
        elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        seconds = _max_over(elapsed, group, device)  # the slowest rank's time
        algbw = count * esize / seconds / 1e9
        rows.append(
            {
                "bytes": count * esize,
                "count": count,
                "time_us": seconds * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (world - 1) / world,
            }
        )
    return rows


def _max_over(value: torch.Tensor, group, device) -> float:
    import torch.distributed as dist

    t = value.to(device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def _make_groups(routes: list[str]):
    """route name -> (group, device type, comm info); created in the same order on every rank."""
    import torch.distributed as dist

    from . import distributed as fd

    groups = {}
    for route in routes:
        if route == "default":
            groups[route] = (None, "flagos", fd.comm_info())
        elif route == "gloo":
            # The default group's CPU backend when it has one (new_group(backend="gloo")
            # fails on a group bound to a flagos device_id: torch asks it for a flagos backend).
            default = dist.distributed_c10d._get_default_group()
            has_cpu = torch.device("cpu") in default._device_types
            group = None if has_cpu else dist.new_group(backend="gloo")
            groups[route] = (group, "cpu", {"route": "cpu", "library": "gloo"})
        else:
            group = dist.new_group(backend=fd.BACKEND_NAME, pg_options=fd.Options(route=route))
            groups[route] = (group, "flagos", fd.comm_info(group))
    return groups


def selftest_allreduce(
    *,
    backend: str | None = None,
    min_bytes: int = 4,
    max_bytes: int = 64 << 20,
    factor: int = 4,
    check_max_bytes: int | None = None,
    dtypes: list[str] | None = None,
    ops: list[str] | None = None,
    routes: list[str] | None = None,
    iters: int = 20,
    warmup: int = 5,
    bench_dtype: str = "float32",
    timeout: float = 60.0,
    expect_route: str | None = None,
    check: bool = True,
    bench: bool = True,
) -> dict[str, Any]:
    """Run the self-test on this rank (under torchrun); returns this rank's result.

    The result has ``ok``, ``rank``, ``world_size``, ``routes`` (route -> comm info),
    ``correctness`` (route -> {cases, failures}), ``bandwidth`` (route ->
    rows of bytes, count, time_us, algbw_gbps, busbw_gbps) and, on failure,
    ``error`` and ``diagnosis``.
    """
    import torch.distributed as dist

    from . import _core
    from . import backend as backend_module
    from . import distributed as fd

    dtypes = list(dtypes or DTYPES)
    ops = list(ops or OPS)
    routes = list(routes or ["default"])
    for name in dtypes:
        if name not in DTYPES:
            raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    for name in ops:
        if name not in OPS:
            raise ValueError(f"unknown operator {name!r}; choose from {', '.join(OPS)}")
    for name in routes:
        if name not in ROUTES:
            raise ValueError(f"unknown route {name!r}; choose from {', '.join(ROUTES)}")
    backend_module.initialize(backend)
    fd.register()
    created_group = False
    if not dist.is_initialized():
        local = dist.get_node_local_rank(fallback_rank=0)
        device = torch.device("flagos", local % max(1, torch.flagos.device_count()))
        torch.flagos.set_device(device)
        group_args: dict[str, Any] = {}
        if not config.under_launcher():
            # Outside torchrun: a single-process run (world size 1), as
            # nccl-tests' one-process mode, instead of torch's raw "RANK
            # expected" error. N ranks: run under torchrun.
            group_args = {"store": dist.HashStore(), "rank": 0, "world_size": 1}
        dist.init_process_group(
            backend=f"cpu:gloo,flagos:{fd.BACKEND_NAME}",
            timeout=datetime.timedelta(seconds=timeout),
            **group_args,
        )
        created_group = True
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("flagos", torch.flagos.current_device())
    result: dict[str, Any] = {
        "ok": False,
        "rank": rank,
        "world_size": world,
        "backend": _core.C()._backend_info()["name"],
        "torch": torch.__version__,
        "routes": {},
        "correctness": {},
        "bandwidth": {},
    }
    try:
        groups = _make_groups(routes)
        for name, (_, _, info) in groups.items():
            result["routes"][name] = {"route": info.get("route"), "library": info.get("library")}
        default_route = result["routes"].get("default", {}).get("route")
        if expect_route and "default" in groups and default_route != expect_route:
            info = groups["default"][2]
            raise _Failure(
                f"the default group took the {default_route} route "
                f"({info.get('library')}), expected {expect_route}; FLAGOS_COMM="
                f"{info.get('mode')}, plugin collectives: "
                f"{_core.C()._comm_vendor_library() or 'none'}"
            )
        sizes = _sizes(min_bytes, max_bytes, factor)
        check_sizes = [s for s in sizes if check_max_bytes is None or s <= check_max_bytes]
        for name, (group, dev_type, _) in groups.items():
            dev = torch.device("cpu") if dev_type == "cpu" else device
            if check:
                cases, failures = _check(group, dev, check_sizes, dtypes, ops, world, rank)
                result["correctness"][name] = {"cases": cases, "failures": failures}
            if bench:
                result["bandwidth"][name] = _bench(
                    group, dev, sizes, DTYPES[bench_dtype], iters, warmup, world
                )
        failed = [n for n, c in result["correctness"].items() if c["failures"]]
        result["ok"] = not failed
        if failed:
            result["diagnosis"] = (
                f"wrong all_reduce results on route(s) {', '.join(failed)}: the collective "
                "library computes wrong values; compare with --routes host,gloo"
            )
    except (_Failure, RuntimeError) as err:
        result["error"] = str(err)
        result["diagnosis"] = _diagnose(str(err))
    finally:
        if created_group and result["ok"]:
            dist.destroy_process_group()
    return result


def _diagnose(message: str) -> str:
    if "did not arrive" in message or "did not join" in message or "timed out" in message:
        return (
            "a rank did not take part in time (named above): check that every rank runs the "
            "self-test, that none crashed or is stuck elsewhere; --timeout sets the wait"
        )
    if "route" in message:
        return "the routing is not what was expected: see FLAGOS_COMM and backend_info()"
    if "different" in message:
        return "the ranks called different operations: run the same self-test options on every rank"
    return "the communication plane failed; the message above says where"


def format_result(result: dict[str, Any]) -> str:
    """Rank 0's report: routes, correctness, the bandwidth table."""
    lines = [
        f"flagos-torchfl all_reduce self-test: {result['world_size']} ranks, backend "
        f"{result['backend']}, torch {result['torch']}"
    ]
    for name, info in result["routes"].items():
        lines.append(f"  {name:8s} route {info['route']} ({info['library']})")
    for name, c in result["correctness"].items():
        status = "all passed" if not c["failures"] else f"{len(c['failures'])} FAILED"
        lines.append(f"  correctness [{name}]: {c['cases']} dtype/op/size cases, {status}")
        lines += [f"    {f}" for f in c["failures"][:20]]
    rows = [["route", "size", "count", "time (us)", "algbw (GB/s)", "busbw (GB/s)"]]
    for name, bench in result["bandwidth"].items():
        for row in bench:
            rows.append(
                [
                    name,
                    format_bytes(row["bytes"]),
                    str(row["count"]),
                    f"{row['time_us']:.1f}",
                    f"{row['algbw_gbps']:.3f}",
                    f"{row['busbw_gbps']:.3f}",
                ]
            )
    if len(rows) > 1:
        lines.append(table(rows, "  "))
    if "error" in result:
        lines += [
            f"FAILED on rank {result['rank']}: {result['error']}",
            f"diagnosis: {result['diagnosis']}",
        ]
    else:
        lines.append("OK" if result["ok"] else f"FAILED: {result.get('diagnosis', '')}")
    return "\n".join(lines)


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default=None, help="flagos backend (default FLAGOS_BACKEND)")
    parser.add_argument("--min-bytes", default="4", help="smallest message (default 4)")
    parser.add_argument("--max-bytes", default="64M", help="largest message (default 64M)")
    parser.add_argument(
        "--factor", type=int, default=4, help="size step factor (default 4: 4 B ... 64 MiB)"
    )
    parser.add_argument(
        "--check-max-bytes", default=None, help="largest size checked for correctness (default all)"
    )
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="dtypes checked")
    parser.add_argument("--ops", default=",".join(OPS), help="operators checked")
    parser.add_argument(
        "--routes", default="default", help=f"comma-separated, from {', '.join(ROUTES)}"
    )
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--bench-dtype", default="float32", choices=list(DTYPES))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a rank")
    parser.add_argument("--expect-route", choices=["vendor", "host"], default=None)
    parser.add_argument("--no-check", action="store_true", help="skip correctness")
    parser.add_argument("--no-bench", action="store_true", help="skip bandwidth")
    parser.add_argument("--json", default=None, help="write the result as JSON here ('-': stdout)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``selftest`` subcommand's arguments (``flagos-torchfl selftest allreduce ...``)."""
    parser.add_argument("test", choices=["allreduce"], help="what to test")
    _add_options(parser)


def command(args: argparse.Namespace) -> int:
    """Run the self-test the parsed arguments describe; print on rank 0; exit status."""
    split = lambda text: [t.strip() for t in text.split(",") if t.strip()]  # noqa: E731
    result = selftest_allreduce(
        backend=args.backend,
        min_bytes=config.parse_bytes(args.min_bytes),
        max_bytes=config.parse_bytes(args.max_bytes),
        factor=args.factor,
        check_max_bytes=config.parse_bytes(args.check_max_bytes) if args.check_max_bytes else None,
        dtypes=split(args.dtypes),
        ops=split(args.ops),
        routes=split(args.routes),
        iters=args.iters,
        warmup=args.warmup,
        bench_dtype=args.bench_dtype,
        timeout=args.timeout,
        expect_route=args.expect_route,
        check=not args.no_check,
        bench=not args.no_bench,
    )
    rank = result["rank"]
    if rank == 0 or "error" in result:
        if args.json == "-":
            from .tools._output import json_stdout

            print(json.dumps(result), file=json_stdout(), flush=True)  # one line
        else:
            print(format_result(result), flush=True)
            if args.json and rank == 0:
                with open(args.json, "w") as out:
                    json.dump(result, out, indent=1)
    return 0 if result["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """``flagos-torchfl selftest allreduce [options]``: `argv` is what follows "allreduce"."""
    parser = argparse.ArgumentParser(
        prog="flagos-torchfl selftest allreduce",
        description="all_reduce correctness and bandwidth of the flagos communication plane "
        "(run under torchrun)",
    )
    _add_options(parser)
    return command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
