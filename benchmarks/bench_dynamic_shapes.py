"""Dynamic shapes, measured the hard way (issue 16): the worst first call.

For each backend (and native CPU as the yardstick), one fresh process per
cache state (cold: an empty FLAGOS_CACHE_DIR; warm: the folder the cold run
left) builds the generic kernels on two warm-up shapes, then calls the probe
on 16 never-seen shapes of mixed kinds (1-D primes, odd 2-D shapes, a
transformer's batch x sequence, a CNN's batch):

    probe(x) = gelu(x * 1.5 + 2).sigmoid() * x, softmax over the last dim,
               and the sum over the last dim

timing each shape's first call and its steady state (median of 5 later
calls), all synchronized. Reported per configuration: the WORST first/steady
ratio over the 16 shapes (the target is <= 3x), the median, and the shape of
the worst; plus the kernel cache's synchronous builds during the new shapes
(should be 0: nothing on the call path waits for a compiler after an
operator's first generic build), and the background builds queued, running
or finishing while the worst shape's first call ran (a foreground launch
that waits behind a background compile inside the driver shows up there).

    python3 benchmarks/bench_dynamic_shapes.py [--backends host,opencl] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

from _run import run_json

PROBE = r"""
import json, statistics, sys, time, torch
BACKEND = sys.argv[1]
if BACKEND != "cpu":
    import flagos_torchfl as ft
    ft.initialize(BACKEND)
    dev = torch.device("flagos")
    sync = torch.flagos.synchronize
    stats = lambda: json.loads(torch.ops.flagos._kernel_cache_stats())
else:
    dev = torch.device("cpu")
    sync = lambda: None
    stats = lambda: {"devices": []}

def probe(x):
    y = torch.nn.functional.gelu(x * 1.5 + 2).sigmoid() * x
    return y.softmax(-1) + y.sum(-1, keepdim=True)

def timed(x):
    sync()
    t0 = time.perf_counter()
    probe(x)
    sync()
    return time.perf_counter() - t0

torch.manual_seed(0)
for shape in [(4096,), (64, 64), (2, 16, 32), (2, 3, 8, 8)]:  # the generic builds, each rank
    timed(torch.randn(shape, device=dev))
    timed(torch.randn(shape, device=dev))

def sync_builds():
    return sum(d.get("sync_builds", 0) for d in stats()["devices"])

def background():  # background builds finished, and queued or running
    devs = stats()["devices"]
    return (sum(d.get("async_builds", 0) for d in devs),
            sum(d.get("async_pending", 0) for d in devs))

SHAPES = [(3001,), (4099,), (65537,), (257, 129), (33, 1023), (7, 3001), (1, 9973),
          (2, 37, 64), (3, 129, 64), (5, 77, 64), (8, 250, 64), (7, 3, 17, 17), (13, 3, 17, 17),
          (5, 16, 9, 31), (131071,), (61, 61)]
before = sync_builds()
rows = []
for shape in SHAPES:
    x = torch.randn(shape, device=dev)
    done0, pending0 = background()
    first = timed(x)
    done1, _ = background()
    steady = statistics.median(timed(x) for _ in range(5))
    rows.append({"shape": list(shape), "first_ms": first * 1e3, "steady_ms": steady * 1e3,
                 "ratio": first / steady,
                 "background": pending0 + (done1 - done0)})
print(json.dumps({"rows": rows, "sync_builds_during_new_shapes": sync_builds() - before}))
"""


def run(backend: str, cache: str, extra_env: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_")}
    env.update({"FLAGOS_CACHE_DIR": cache, **extra_env})
    return run_json(PROBE, backend, env=env, what=backend, timeout=900)


def summary(name: str, r: dict) -> dict:
    ratios = [row["ratio"] for row in r["rows"]]
    worst = max(r["rows"], key=lambda row: row["ratio"])
    return {
        "config": name,
        "worst_ratio": max(ratios),
        "median_ratio": statistics.median(ratios),
        "worst_shape": worst["shape"],
        "worst_first_ms": worst["first_ms"],
        "worst_steady_ms": worst["steady_ms"],
        "sync_builds": r["sync_builds_during_new_shapes"],
        "worst_background": worst["background"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="host,opencl")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    results = [summary("cpu (native)", run("cpu", tempfile.mkdtemp(), {}))]
    for backend in args.backends.split(","):
        cache = tempfile.mkdtemp(prefix=f"flagos-dyn-{backend}-")
        results.append(summary(f"{backend} cold cache", run(backend, cache, {})))
        results.append(summary(f"{backend} warm cache", run(backend, cache, {})))
    print(
        "| configuration | worst first/steady | median | worst shape (first / steady ms) "
        "| sync builds | background builds at the worst first call |"
    )
    print("|---|---|---|---|---|---|")
    for s in results:
        print(
            f"| {s['config']} | {s['worst_ratio']:.1f}x | {s['median_ratio']:.1f}x | "
            f"{s['worst_shape']} ({s['worst_first_ms']:.2f} / {s['worst_steady_ms']:.2f}) | "
            f"{s['sync_builds']} | {s['worst_background']} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
