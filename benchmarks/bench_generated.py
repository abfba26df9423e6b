"""Benchmarks of the generated tier (kernel generator + kernel cache), per
backend with a compiler table (host: the system C compiler; opencl: PoCL):

  1. generic vs specialized kernel, and native CPU, on large tensors
     (pointwise add, GELU, row softmax, sum over a dim): P50 per call;
  2. a new shape's first call (generic kernel already built) vs the steady
     state of that shape — target <= 3x;
  3. a fresh process's first iteration of a training step with a warm disk
     cache vs its steady state — target <= 1.3x; and with a cold cache; for
     a small MLP (~1 ms a step) and a small CNN (--fresh-models). Two
     variants: raw (the flagos iteration is the process's first torch work)
     and torch-warmed (one iteration of the same model on CPU first, so that
     PyTorch's own cold start is not counted), on opencl each with the SDK
     warm-up on and off (FLAGOS_OPENCL_WARMUP); medians of --fresh-runs
     processes, the variants interleaved.

Every configuration runs in its own process (the environment selects backend,
specialization policy and cache folder). Ratios are against the same run.

    python3 benchmarks/bench_generated.py [--backends host,opencl] [--repeat 30]
        [--sections kernels,new-shape,fresh] [--fresh-runs 5] [--fresh-models mlp,cnn]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _run import run_json

COMMON = """
import json, time, statistics, torch, flagos_torchfl as ft
T_INIT = time.perf_counter()
ft.initialize(BACKEND)
dev = torch.device("flagos")
def sync():
    torch.flagos.synchronize()
def p50(fn, repeat):
    fn(); sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); sync(); times.append(time.perf_counter() - t0)
    return statistics.median(times)
"""

KERNELS = """
torch.manual_seed(0)
n = 1 << 20
x, y = torch.randn(1024, 1024), torch.randn(1024)
cases = {
    "add (1024x1024 + row)": lambda a, b: a + b,
    "gelu (1M)": lambda a, b: torch.nn.functional.gelu(a),
    "softmax rows (1024x1024)": lambda a, b: torch.softmax(a, dim=-1),
    "sum dim=0 (1024x1024)": lambda a, b: a.sum(dim=0),
}
out = {}
xd, yd = x.to(dev), y.to(dev)
for name, fn in cases.items():
    for _ in range(4):          # reach the specialization threshold, let it build
        fn(xd, yd)
    ft.wait_for_specializations()
    dev_t = p50(lambda: fn(xd, yd), REPEAT)
    cpu_t = p50(lambda: fn(x, y), REPEAT)
    out[name] = {"flagos": dev_t, "cpu": cpu_t}
out["_stats"] = ft.kernel_cache_stats()
print(json.dumps(out))
"""

NEW_SHAPE = """
torch.manual_seed(0)
def step(a):
    return torch.softmax(torch.nn.functional.gelu(a * 2 + 1), dim=-1).sum(dim=0)
step(torch.randn(16, 64, device=dev)); sync()            # generic kernels built
firsts, steadies = [], []
for rows in (100, 200, 300, 400, 500, 600, 700, 800):
    a = torch.randn(rows, 257, device=dev); sync()
    t0 = time.perf_counter(); step(a); sync(); firsts.append(time.perf_counter() - t0)
    steadies.append(p50(lambda: step(a), REPEAT))
builds = ft.kernel_cache_stats()["sync_builds"]
print(json.dumps({"first": statistics.median(firsts), "steady": statistics.median(steadies),
                  "sync_builds": builds}))
"""

FRESH = """
torch.manual_seed(0)
def make():
    torch.manual_seed(0)
    return MODEL
def step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward(); opt.step()
cpu_first = 0.0
if WARM_TORCH:  # torch's own cold start, on CPU, before anything runs on flagos
    cm = make(); co = torch.optim.SGD(cm.parameters(), lr=0.1)
    cx, cy = torch.randn(INPUT), torch.randint(0, 10, (BATCH,))
    t0 = time.perf_counter(); step(cm, co, cx, cy); cpu_first = time.perf_counter() - t0
model = make().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(INPUT, device=dev), torch.randint(0, 10, (BATCH,), device=dev)
def it():
    step(model, opt, x, y)
sync()
t0 = time.perf_counter(); it(); sync(); first = time.perf_counter() - t0
second_t0 = time.perf_counter(); it(); sync(); second = time.perf_counter() - second_t0
steady = p50(it, REPEAT)
s = ft.kernel_cache_stats()
print(json.dumps({"first": first, "second": second, "steady": steady, "cpu_first": cpu_first,
                  "since_init": time.perf_counter() - T_INIT,
                  "sync_builds": s["sync_builds"], "disk_hits": s["disk_hits"]}))
"""

# The fresh-process models: (module expression, input shape, batch).
NN = "torch.nn."
FRESH_MODELS = {
    # ~1 ms a step on opencl: fixed per-process costs dominate.
    "mlp": (f"{NN}Sequential({NN}Linear(64, 128), {NN}GELU(), {NN}Linear(128, 10))", "32, 64", 32),
    # ~16 ms a step on opencl (convolutions as im2col + GEMM, batch norm, pooling).
    "cnn": (
        f"{NN}Sequential({NN}Conv2d(3, 16, 3, padding=1), {NN}BatchNorm2d(16), {NN}ReLU(), "
        f"{NN}MaxPool2d(2), {NN}Conv2d(16, 32, 3, padding=1), {NN}BatchNorm2d(32), {NN}ReLU(), "
        f"{NN}AdaptiveAvgPool2d(1), {NN}Flatten(), {NN}Linear(32, 10))",
        "8, 3, 32, 32",
        8,
    ),
}


def fresh_code(model: str) -> str:
    module, shape, batch = FRESH_MODELS[model]
    return FRESH.replace("MODEL", module).replace("INPUT", shape).replace("BATCH", str(batch))


# The same step on native CPU in a fresh process: PyTorch's own first
# iteration is far above its steady state (lazy initialization everywhere),
# so the fair yardstick for a fresh flagos process is CPU's first iteration.
def cpu_fresh(repeat: int, warm_torch: bool = False, model: str = "mlp") -> dict:
    cpu_code = fresh_code(model).replace(".to(dev)", "").replace(", device=dev", "")
    script = (
        "import json, time, statistics, torch\n"
        "T_INIT = time.perf_counter()\n"
        "def sync():\n    pass\n"
        + COMMON.split("def p50", 1)[1].join(["def p50", ""])
        + cpu_code.replace("REPEAT", str(repeat))
        .replace("WARM_TORCH", repr(warm_torch))
        .replace("s = ft.kernel_cache_stats()", "s = {'sync_builds': 0, 'disk_hits': 0}")
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(code: str, backend: str, repeat: int, warm_torch: bool = False, **env: str) -> dict:
    script = COMMON.replace("BACKEND", repr(backend)) + code.replace("REPEAT", str(repeat)).replace(
        "WARM_TORCH", repr(warm_torch)
    )
    return run_json(script, env={**os.environ, **env}, what=f"{backend}: benchmark")


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us" if seconds < 0.1 else f"{seconds * 1e3:,.1f} ms"


def fresh_section(backend: str, model: str, repeat: int, runs: int, cpu: dict) -> None:
    """Fresh processes on one warm disk cache: raw (the flagos iteration is the
    process's first torch work) and torch-warmed (one CPU iteration of the
    same model first, so torch's own cold start is not counted), each with
    the opencl SDK warm-up on and off; medians over --fresh-runs processes."""
    code = fresh_code(model)
    print(f"\n### {model}\n")
    with tempfile.TemporaryDirectory() as cache:
        env = {"FLAGOS_CACHE_DIR": cache, "FLAGOS_SPECIALIZE": "off"}
        cold = run(code, backend, repeat, **env)
        print(
            f"fresh process, cold cache: first iteration {us(cold['first'])}, steady "
            f"{us(cold['steady'])}: first/steady {cold['first'] / cold['steady']:.2f}x "
            f"({cold['sync_builds']} compiles, {cold['disk_hits']} disk hits)"
        )
        warmups = ("on", "off") if backend == "opencl" else ("on",)
        variants = [(w, t) for w in warmups for t in (False, True)]
        results: dict[tuple[str, bool], list[dict]] = {v: [] for v in variants}
        for _ in range(runs):  # interleaved: every variant sees the same machine
            for warmup, warm_torch in variants:
                r = run(code, backend, repeat, warm_torch, FLAGOS_OPENCL_WARMUP=warmup, **env)
                results[(warmup, warm_torch)].append(r)
        print(
            "\n| SDK warm-up | torch warmed on CPU first | first iteration | second | steady "
            "| first/steady | compiles / disk hits | vs native CPU's first |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for (warmup, warm_torch), rs in results.items():
            med = {k: statistics.median(r[k] for r in rs) for k in ("first", "second", "steady")}
            ratio = statistics.median(r["first"] / r["steady"] for r in rs)
            label = warmup if backend == "opencl" else "n/a"
            print(
                f"| {label} | {'yes' if warm_torch else 'no (raw)'} | {us(med['first'])} | "
                f"{us(med['second'])} | {us(med['steady'])} | **{ratio:.2f}x** | "
                f"{rs[-1]['sync_builds']} / {rs[-1]['disk_hits']} | "
                f"{med['first'] / cpu['first']:.2f}x |"
            )
        print(f"\n(medians of {runs} fresh processes per row; target first/steady <= 1.3x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backends", default="host,opencl")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument(
        "--sections",
        default="kernels,new-shape,fresh",
        help="comma-separated subset of kernels,new-shape,fresh",
    )
    ap.add_argument("--fresh-runs", type=int, default=5, help="fresh processes per variant")
    ap.add_argument(
        "--fresh-models",
        default="mlp,cnn",
        help=f"models of the fresh section: comma-separated subset of {','.join(FRESH_MODELS)}",
    )
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    models = args.fresh_models.split(",")
    cpus = {}
    for model in models if "fresh" in sections else ["mlp"]:
        cpu = cpus[model] = cpu_fresh(args.repeat, model=model)
        print(
            f"native CPU, {model}, fresh process: first iteration {us(cpu['first'])}, second "
            f"{us(cpu['second'])}, steady {us(cpu['steady'])}: first/steady "
            f"{cpu['first'] / cpu['steady']:.1f}x"
        )
        if "fresh" not in sections:
            continue
        # PyTorch's own floor for the "torch warmed" rows: the same protocol on
        # CPU (one iteration of a first model, then a new model's first one).
        warm = [cpu_fresh(args.repeat, True, model) for _ in range(args.fresh_runs)]
        ratio = statistics.median(r["first"] / r["steady"] for r in warm)
        print(
            f"native CPU, {model}, torch warmed on CPU first, new model: first iteration "
            f"{us(statistics.median(r['first'] for r in warm))}, steady "
            f"{us(statistics.median(r['steady'] for r in warm))}: first/steady {ratio:.2f}x "
            f"(median of {args.fresh_runs} processes)"
        )
    for backend in args.backends.split(","):
        print(f"\n## {backend}\n")
        with tempfile.TemporaryDirectory() as cache:
            env = {"FLAGOS_CACHE_DIR": cache}
            # host has native kernels for these ops: route them to the generator.
            routes = {
                f"FLAGOS_OP_{op}": "generated"
                for op in ("ADD", "GELU", "SOFTMAX", "SUM", "MUL", "MEAN", "NEG", "EXP")
            }
            if backend != "host":
                routes = {}
            if "kernels" in sections:
                generic = run(
                    KERNELS, backend, args.repeat, FLAGOS_SPECIALIZE="off", **env, **routes
                )
                special = run(
                    KERNELS, backend, args.repeat, FLAGOS_SPECIALIZE="after:3", **env, **routes
                )
                print("| kernel | native CPU | generic | specialized | specialized vs CPU |")
                print("|---|---|---|---|---|")
                for name in generic:
                    if name.startswith("_"):
                        continue
                    g, s = generic[name], special[name]
                    print(
                        f"| {name} | {us(g['cpu'])} | {us(g['flagos'])} | {us(s['flagos'])} | "
                        f"{g['cpu'] / s['flagos']:.2f}x |"
                    )
                print(f"\n(specialized run: {special['_stats']['async_builds']} background builds)")
            if "new-shape" in sections:
                ns = run(
                    NEW_SHAPE, backend, args.repeat, FLAGOS_SPECIALIZE="after:3", **env, **routes
                )
                print(
                    f"\nnew shape, first call {us(ns['first'])} vs steady {us(ns['steady'])}: "
                    f"{ns['first'] / ns['steady']:.2f}x (target <= 3x); "
                    f"compiles on the calling thread in total: {ns['sync_builds']}"
                )
        if "fresh" in sections:
            for model in models:
                fresh_section(backend, model, args.repeat, args.fresh_runs, cpus[model])


if __name__ == "__main__":
    main()
