"""GEMM via flagos vs direct CLBlast on the opencl plugin.

torch.mm on the `flagos` device (FLAGOS_BACKEND=opencl, whose kernel table
runs CLBlast SGEMM) against the same SGEMM called straight from C++
(benchmarks/clblast_direct.cpp, built by CMake when CLBlast is found). Both
sides time one call + device synchronize, median of --iters after warmup.
ratio = flagos p50 / direct p50 (1.0: no adapter overhead).

    FLAGOS_BACKEND=opencl FLAGOS_PLUGIN_PATH=<build>/pkg/flagos_torchfl/plugins \\
        python3 benchmarks/bench_gemm_opencl.py --clblast-direct <build>/benchmarks/clblast_direct
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def find_direct(given: str | None) -> Path:
    candidates = [given] if given else []
    candidates += [os.environ.get("FLAGOS_CLBLAST_DIRECT", "")]
    candidates += [str(p) for p in sorted(ROOT.glob("build/*/benchmarks/clblast_direct"))]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    sys.exit("clblast_direct not found: build it (CMake, CLBlast found) or pass --clblast-direct")


def direct(binary: Path, n: int, iters: int, warmup: int) -> dict:
    out = subprocess.run(
        [str(binary), str(n), str(n), str(n), str(iters), str(warmup)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def flagos(n: int, iters: int, warmup: int) -> dict:
    import flagos_torchfl as ft
    import torch

    ft.initialize("opencl")  # also without torch's autoload (FLAGOS_BACKEND)
    dev = torch.device("flagos")
    a = torch.randn(n, n).to(dev)
    b = torch.randn(n, n).to(dev)
    for _ in range(warmup):
        torch.mm(a, b)
    torch.flagos.synchronize()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        torch.mm(a, b)
        torch.flagos.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"p50_ms": statistics.median(ms), "min_ms": min(ms)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 768, 1024])
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--clblast-direct", help="path of the clblast_direct executable")
    args = p.parse_args()
    if os.environ.get("FLAGOS_BACKEND") != "opencl":
        sys.exit("run with FLAGOS_BACKEND=opencl (the plugin whose mm is CLBlast)")
    binary = find_direct(args.clblast_direct)

    import flagos_torchfl as ft
    import torch  # noqa: F401  (after the environment checks)

    rows = []
    for n in args.sizes:
        ft.reset_op_stats()
        f = flagos(n, args.iters, args.warmup)
        native = ft.op_stats().get("aten::mm", {}).get("native", 0)
        d = direct(binary, n, args.iters, args.warmup)
        row = {
            "n": n,
            "flagos_p50_ms": round(f["p50_ms"], 3),
            "direct_p50_ms": d["p50_ms"],
            "ratio": round(f["p50_ms"] / d["p50_ms"], 3),
            "flagos_gflops": round(2 * n**3 / (f["p50_ms"] * 1e6), 2),
            "direct_gflops": d["gflops"],
            "mm_native_calls": native,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    geo = 1.0
    for r in rows:
        geo *= r["ratio"]
    print(json.dumps({"geomean_ratio": round(geo ** (1 / len(rows)), 3), "device": d["device"]}))


if __name__ == "__main__":
    main()
