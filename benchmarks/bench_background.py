"""How much background kernel builds slow the foreground (issue 16; Note [Background priority]).

Each configuration runs in a fresh process with a cold kernel cache:

1. warm-up: a small MLP training step (fixed shapes) until its kernels are
   built and the pool is idle; then its steady step time, alone (baseline);
2. background work: a pointwise chain on 24 never-seen shapes, once each,
   with FLAGOS_SPECIALIZE=eager, so the pool gets 24+ specialized builds;
3. at once, the same training step again, timed step by step while the pool
   still has builds pending.

Reported: median and worst step while the pool was busy, each over the
baseline's median, with the pool at the process's priority
(FLAGOS_BACKGROUND_NICE=0) and at the default nice 10. Target: <= 1.3x.
On host the chain is routed to the generated tier (C through cc), so the
background work is real compiles; the MLP's ops stay native.

    python3 benchmarks/bench_background.py [--backends host,opencl] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _run import run_json

BODY = r"""
import json, statistics, sys, time, torch
import flagos_torchfl as ft
from flagos_torchfl.backend import wait_for_specializations
ft.initialize(sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to("flagos")
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 256, device="flagos")
def step():
    t = time.perf_counter()
    opt.zero_grad(); model(x).square().mean().backward(); opt.step(); torch.flagos.synchronize()
    return time.perf_counter() - t
for _ in range(20): step()
wait_for_specializations()
base = [step() for _ in range(60)]
pending = lambda: ft.kernel_cache_stats()["devices"][0]["async_pending"]
for i in range(24):  # 24 new shapes: specialized builds queued on the pool
    y = torch.randn(3001 + 7 * i, device="flagos")
    (y * 1.5 + 2.0).sigmoid()
busy = []
while pending() > 0 and len(busy) < 5000:
    busy.append(step())
print(json.dumps({"base": base, "busy": busy}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="host,opencl")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = []
    for backend in args.backends.split(","):
        for nice in ("0", "10"):
            with tempfile.TemporaryDirectory() as cache:
                env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_")}
                env.update(FLAGOS_CACHE_DIR=cache, FLAGOS_SPECIALIZE="eager", FLAGOS_PRELOAD="0")
                env["FLAGOS_BACKGROUND_NICE"] = nice
                if backend == "host":
                    env.update({f"FLAGOS_OP_{op}": "generated" for op in ("MUL", "ADD", "SIGMOID")})
                r = run_json(BODY, backend, env=env, what=f"{backend} nice {nice}")
            base = statistics.median(r["base"])
            busy = r["busy"]
            row = {
                "backend": backend,
                "nice": int(nice),
                "base_ms": base * 1e3,
                "busy_steps": len(busy),
                "busy_median_x": statistics.median(busy) / base if busy else None,
                "busy_worst_x": max(busy) / base if busy else None,
            }
            rows.append(row)
            if busy:
                print(
                    f"{backend:7} nice {nice:>2}: alone {row['base_ms']:.2f} ms/step; while the pool "
                    f"builds ({len(busy)} steps): median {row['busy_median_x']:.2f}x, "
                    f"worst {row['busy_worst_x']:.2f}x"
                )
            else:
                print(f"{backend:7} nice {nice:>2}: the pool finished before the first step")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
