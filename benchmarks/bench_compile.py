"""torch.compile (issue 19): inductor's fused kernels against eager, in the same run.

For each configuration, in its own process: the same model run eagerly and
through torch.compile's default backend, timed interleaved (eager, compiled,
eager, ...) after warm-up, so machine noise hits both. On flagos, compiled
means inductor's fused kernels through the plugin's compiler slot (Note
[Fused kernels]); on native CPU (the yardstick) it means inductor's own C++
backend against PyTorch's eager CPU kernels. Reported: median and WORST
time of each, and eager / compiled from the medians and from the worst times.

Cases: a LayerNorm + GELU MLP block and an RMSNorm + SiLU-gated MLP block
(forward, inference), and a training step (forward, backward, SGD) of the
small transformer language model of benchmarks/models.py. On flagos each
case also reports one step's device time (torch.profiler with PrivateUse1
activity) split into GEMMs (the eager CLBlast/OpenBLAS kernels in both
runs) and the rest (what fusion replaces), and the rest's eager / compiled.

    python3 benchmarks/bench_compile.py [--configs cpu,host,opencl] [--repeat 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from _run import run_json

HERE = Path(__file__).resolve().parent

BODY = r"""
import json, statistics, sys, time, torch
config, repeat, here = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, here)
import models
if config == "cpu":
    dev, sync, pending = torch.device("cpu"), (lambda: None), (lambda: 0)
else:
    import flagos_torchfl as ft
    ft.initialize(config)
    dev, sync = torch.device("flagos"), torch.flagos.synchronize
    pending = lambda: ft.kernel_cache_stats()["async_pending"]
torch.manual_seed(0)

def timed(fn):
    sync(); t = time.perf_counter(); fn(); sync()
    return time.perf_counter() - t

GEMM = ("mm", "addmm", "bmm", "baddbmm")

def device_split(step):
    # Device time of one step (torch.profiler, PrivateUse1 activity): GEMMs and the rest.
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step(); sync()
    split = {"gemm": 0.0, "other": 0.0}
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.PrivateUse1:
            gemm = e.key in GEMM or "gemm" in e.key.lower()
            split["gemm" if gemm else "other"] += e.self_device_time_total / 1e3
    return split

def forward(model, x):
    def run():
        with torch.no_grad():
            model(x)
    return run

def train(model, idx, y):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    def run():
        opt.zero_grad(set_to_none=True)
        models.lm_loss(model, idx, y).backward()
        opt.step()
    return run

tokens, d = 8192, 64
x = torch.randn(tokens // 64, 64, d, device=dev)
idx = torch.randint(0, 256, (8, 32), device=dev)
y = torch.randint(0, 256, (8, 32), device=dev)
cases = {
    f"LayerNorm+GELU MLP fwd ({tokens}x{d}, hidden {4 * d})": (
        lambda: models.MLPBlock(d, 4 * d).to(dev), lambda m: forward(m, x)),
    f"RMSNorm+SiLU-gated MLP fwd ({tokens}x{d}, hidden {3 * d})": (
        lambda: models.GatedBlock(d, 3 * d).to(dev), lambda m: forward(m, x)),
    "transformer LM train step (2 layers, d 64, 8x32 tokens)": (
        lambda: models.Transformer(vocab=256, d=64, heads=4, layers=2, seq=32).to(dev),
        lambda m: train(m, idx, y)),
}
out = {}
for name, (make, step) in cases.items():
    torch.manual_seed(0)
    eager_model = make()
    compiled_model = make()
    compiled_model.load_state_dict(eager_model.state_dict())
    eager = step(eager_model)
    t = time.perf_counter()
    compiled = step(torch.compile(compiled_model))
    for _ in range(3):  # compile, then the first launches
        compiled(); eager()
    sync()
    first = time.perf_counter() - t
    # The eager generated tier specializes kernels in the background (and
    # PoCL compiles their work-group functions): steady state is after that.
    deadline = time.perf_counter() + 120
    while pending() and time.perf_counter() < deadline:
        compiled(); eager(); sync()
    for _ in range(3):
        compiled(); eager()
    times = {"eager": [], "compiled": []}
    for _ in range(repeat):
        times["eager"].append(timed(eager))
        times["compiled"].append(timed(compiled))
    row = {"warmup_s": first}
    for k, v in times.items():
        row[k] = {"median_ms": 1e3 * statistics.median(v), "worst_ms": 1e3 * max(v)}
    row["speedup_median"] = row["eager"]["median_ms"] / row["compiled"]["median_ms"]
    row["speedup_worst"] = row["eager"]["worst_ms"] / row["compiled"]["worst_ms"]
    if config != "cpu" and ft.backend_info(verbose=False).get("device_activity"):
        row["device_ms"] = {k: device_split(f) for k, f in (("eager", eager), ("compiled", compiled))}
    out[name] = row
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="cpu,host,opencl")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    results = {}
    for config in args.configs.split(","):
        env = dict(os.environ)
        results[config] = run_json(
            BODY, config, str(args.repeat), str(HERE), env=env, what=f"bench_compile {config}"
        )
    for config, rows in results.items():
        print(f"\n{config}: eager vs torch.compile, median / worst ms, speedup eager/compiled")
        for name, r in rows.items():
            e, c = r["eager"], r["compiled"]
            print(
                f"  {name:58s} eager {e['median_ms']:8.2f} / {e['worst_ms']:8.2f}  "
                f"compiled {c['median_ms']:8.2f} / {c['worst_ms']:8.2f}  "
                f"speedup {r['speedup_median']:.2f}x / {r['speedup_worst']:.2f}x  "
                f"(warm-up {r['warmup_s']:.1f} s)"
            )
            if "device_ms" in r:
                de, dc = r["device_ms"]["eager"], r["device_ms"]["compiled"]
                ratio = de["other"] / dc["other"] if dc["other"] else float("nan")
                print(
                    f"  {'':58s} device ms, GEMM / rest: eager {de['gemm']:.2f} / "
                    f"{de['other']:.2f}  compiled {dc['gemm']:.2f} / {dc['other']:.2f}  "
                    f"rest {ratio:.2f}x"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    sys.exit(main())
