"""Kernels against the memory roofline (issue 16): fraction of copy bandwidth.

Memory-bound operators cannot beat the device's own copy bandwidth, so that
is the yardstick: in each process, a plain device-to-device copy of the same
size is timed right next to every operator repetition, and the operator's
fraction is

    (bytes the operator must move / its time) / (2 * size / copy time)

"Bytes it must move" is each eager kernel's inputs read once plus its output
written once (a chain of eager ops counts each op). The copy yardstick is the
faster of the flagos device copy and native CPU's `copy_` in the same run
(the host plugin's copy is one memcpy thread; PoCL's is its own), so a
fraction is never flattered by a slow copy.

Configurations, each in its own process: native CPU (PyTorch's kernels, for
reference), host with its native kernels, host with the operators routed to
the generated tier (the C dialect), and opencl (PoCL). Reported per operator:
the median and the WORST fraction over --repeat interleaved repetitions, and
the tier that ran it (op_stats). Targets: pointwise >= 0.6, reductions and
row operators >= 0.4, dropout >= 0.6, randn >= 0.5.

    python3 benchmarks/bench_roofline.py [--configs cpu,host,host-generated,opencl]
        [--repeat 15] [--rows 4096] [--cols 4096] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from _run import run_json

BODY = r"""
import json, statistics, sys, time, torch
import torch.nn.functional as F
config, rows, cols, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if config == "cpu":
    dev, sync, stats = torch.device("cpu"), (lambda: None), (lambda: {})
else:
    import flagos_torchfl as ft
    ft.initialize(config.split("-")[0])
    dev, sync = torch.device("flagos"), torch.flagos.synchronize
    stats = ft.op_stats
torch.manual_seed(0)
N = rows * cols
x = torch.randn(rows, cols, device=dev)
y = torch.randn(rows, cols, device=dev)
w = torch.randn(cols, device=dev)
b = torch.randn(cols, device=dev)
dst = torch.empty_like(x)
xc, dstc = x.cpu(), torch.empty(rows, cols)

# name -> (family, fn, bytes moved by the eager kernels, in elements)
cases = {
    "add": ("pointwise", lambda: x + y, 3 * N),
    "mul": ("pointwise", lambda: x * y, 3 * N),
    "gelu": ("pointwise", lambda: F.gelu(x), 2 * N),
    "sigmoid": ("pointwise", lambda: torch.sigmoid(x), 2 * N),
    "silu": ("pointwise", lambda: F.silu(x), 2 * N),
    "(x*w+b).sigmoid()*x": ("pointwise", lambda: (x * w + b).sigmoid() * x, 9 * N),
    "sum(-1)": ("reduction", lambda: x.sum(-1), N),
    "sum(0)": ("reduction", lambda: x.sum(0), N),
    "softmax(-1)": ("reduction", lambda: torch.softmax(x, -1), 2 * N),
    "log_softmax(-1)": ("reduction", lambda: torch.log_softmax(x, -1), 2 * N),
    "layer_norm": ("reduction", lambda: F.layer_norm(x, (cols,), w, b), 2 * N),
    "rms_norm pattern": (
        "reduction",
        lambda: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        7 * N,
    ),
    # Random kernels (issue 32): dropout reads x and writes out and a bool
    # mask (a quarter of a float each); randn only writes.
    "dropout(p=0.1)": ("dropout", lambda: torch.ops.aten.native_dropout(x, 0.1, True), 2.25 * N),
    "randn": ("random", lambda: torch.randn(rows, cols, device=dev), N),
}

def timed(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0

def copy_time():
    # The faster of the device copy and native CPU's copy (see the docstring).
    return min(timed(lambda: dst.copy_(x)), timed(lambda: dstc.copy_(xc)))

def tiers_of(fn):
    if config == "cpu":
        return "cpu"
    before = stats()
    fn(); sync()
    after = stats()
    used = set()
    for op, row in after.items():
        prev = before.get(op, {})
        for tier in ("native", "generated", "decomposed", "fallback"):
            if row.get(tier, 0) > prev.get(tier, 0):
                used.add(tier)
    return "+".join(sorted(used)) or "none"

out = {"copy_gbps": [], "cases": {}}
for name, (family, fn, elems) in cases.items():
    for _ in range(3):                     # first calls, specializations
        fn()
    if config != "cpu":
        ft.wait_for_specializations()
    tier = tiers_of(fn)
    fractions, times = [], []
    for _ in range(repeat):
        tc = copy_time()
        t = timed(fn)
        fractions.append((elems / t) / (2 * N / tc))
        times.append(t)
        out["copy_gbps"].append(2 * N * 4 / tc / 1e9)
    out["cases"][name] = {
        "family": family, "tier": tier, "median": statistics.median(fractions),
        "worst": min(fractions), "ms": statistics.median(times) * 1e3,
    }
print(json.dumps(out))
"""

# Every operator the cases use, routed to the generated tier on host (it has
# native kernels for them otherwise). layer_norm has no generator recipe and
# stays native; the table shows the tier that really ran.
GENERATED_ROUTES = ("ADD", "MUL", "GELU", "SIGMOID", "SILU", "SUM", "SOFTMAX", "LOG_SOFTMAX")
GENERATED_ROUTES += ("POW_SCALAR", "MEAN", "RSQRT")

TARGET = {"pointwise": 0.6, "reduction": 0.4, "dropout": 0.6, "random": 0.5}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--configs", default="cpu,host,host-generated,opencl")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args()
    results = {}
    for config in args.configs.split(","):
        env = dict(os.environ)
        if config == "host-generated":
            env.update({f"FLAGOS_OP_{op}": "generated" for op in GENERATED_ROUTES})
        r = run_json(
            BODY,
            config,
            str(args.rows),
            str(args.cols),
            str(args.repeat),
            env=env,
            what=config,
        )
        results[config] = r
        gbps = sorted(r["copy_gbps"])
        print(
            f"\n## {config}: copy yardstick {gbps[len(gbps) // 2]:.1f} GB/s "
            f"(min {gbps[0]:.1f}, max {gbps[-1]:.1f}), {args.rows}x{args.cols} float32\n"
        )
        print("| operator | family | tier | ms | fraction (median) | worst | target |")
        print("|---|---|---|---|---|---|---|")
        for name, c in r["cases"].items():
            target = TARGET[c["family"]]
            mark = "met" if c["worst"] >= target else "**missed**"
            print(
                f"| {name} | {c['family']} | {c['tier']} | {c['ms']:.2f} | {c['median']:.2f} | "
                f"{c['worst']:.2f} | ≥ {target} {mark} |"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
