"""flagos on a real GPU (the cuda plugin) against native CUDA, in one process
(issue 30's targets). Every ratio's yardstick is measured in the same run:
native CUDA's time for the same work, or the device's own copy bandwidth.

    python benchmarks/bench_cuda.py OUT.json [--sections a,b,...] [--quick]

Sections (each in its own try block: a failure is recorded, the rest run):
  copy        device-to-device copy bandwidth, flagos and native (the yardstick)
  eager       time per op of tiny add / relu / mm in a launch-bound loop
  pointwise   gelu on 256M floats, as a fraction of the copy bandwidth
  reductions  sum of the last dim, softmax, layer_norm on 16384 x 16384 floats
  new_shape   worst first call / steady time over 16 never-seen shapes
  resnet50    training step, batch 64, 224 x 224, float32 and bf16 autocast
  gpt2        GPT-2 small (124M) training step, seq 512, batch 8, bf16 autocast, AdamW
  compile     torch.compile of a transformer block: flagos vs inductor on native CUDA

Timing: wall clock around N calls with the device synchronized before and
after (tests/device/common.py timed()), the best of three runs, the same on
both devices.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "device"))

import common  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEVICES = [common.NATIVE, common.FLAGOS]
# Sections with an autograd backward or torch.compile: their native CUDA half
# runs in a child process that never loads flagos (pytorch/pytorch#161129:
# with a PrivateUse1 backend registered, a native CUDA backward trips an
# assert in the autograd engine; tests/device/zoo_vs_cuda.py says more).
SEPARATE = ("compile", "gpt2", "resnet50")


def copy_bandwidth(n: int) -> dict:
    out = {}
    for dev in DEVICES:
        x = torch.empty(n, device=dev).fill_(1.0)
        y = torch.empty_like(x)
        t = common.best_of(dev, lambda x=x, y=y: y.copy_(x), iters=20)
        out[dev] = 2 * 4 * n / t / 1e9  # GB/s, read + write
    return out


def section_copy(quick: bool) -> dict:
    n = (64 if quick else 256) << 20
    bw = copy_bandwidth(n)
    return {"elements": n, "GBps": bw, "flagos_over_native": bw[common.FLAGOS] / bw[common.NATIVE]}


def section_eager(quick: bool) -> dict:
    iters = 500 if quick else 2000
    out = {}
    for name, make in {
        "add": lambda d: lambda a=torch.ones(16, device=d): torch.add(a, a),
        "relu": lambda d: lambda a=torch.randn(16, device=d): torch.relu(a),
        "mm": lambda d: lambda a=torch.randn(8, 8, device=d): torch.mm(a, a),
    }.items():
        us = {dev: common.best_of(dev, make(dev), iters) * 1e6 for dev in DEVICES}
        out[name] = {
            "us_per_op": us,
            "ratio": us[common.FLAGOS] / us[common.NATIVE],
            "extra_us": us[common.FLAGOS] - us[common.NATIVE],
        }
    return out


def section_pointwise(quick: bool) -> dict:
    n = (64 if quick else 256) << 20
    bw = copy_bandwidth(n)
    out = {"elements": n, "copy_GBps": bw}
    for dev in DEVICES:
        x = torch.randn(n, device=dev)
        t = common.best_of(dev, lambda x=x: F.gelu(x), iters=10)
        gbps = 2 * 4 * n / t / 1e9
        out[dev] = {"GBps": gbps, "fraction_of_copy": gbps / bw[dev]}
        x = None
    return out


def section_reductions(quick: bool) -> dict:
    rows = cols = 8192 if quick else 16384
    bw = copy_bandwidth(rows * cols)
    out = {"shape": [rows, cols], "copy_GBps": bw}
    for dev in DEVICES:
        x = torch.randn(rows, cols, device=dev)
        w = torch.ones(cols, device=dev)
        b = torch.zeros(cols, device=dev)
        cases = {
            "sum_last": (lambda x=x: x.sum(-1), 4 * rows * cols),
            "softmax": (lambda x=x: torch.softmax(x, -1), 8 * rows * cols),
            "layer_norm": (lambda x=x, w=w, b=b: F.layer_norm(x, (cols,), w, b), 8 * rows * cols),
        }
        for name, (fn, nbytes) in cases.items():
            t = common.best_of(dev, fn, iters=10)
            gbps = nbytes / t / 1e9
            out.setdefault(name, {})[dev] = {"GBps": gbps, "fraction_of_copy": gbps / bw[dev]}
        x = cases = None
    return out


def section_new_shape(quick: bool) -> dict:
    """The first call of gelu on each of 16 never-seen shapes against its
    steady time (median of 20 later calls), each call synchronized."""
    out = {}
    for dev in DEVICES:
        warm = torch.randn(1000, device=dev)
        F.gelu(warm)
        common.synchronize(dev)
        worst, rows = 0.0, []
        for k in range(16):
            n = 4096 + 97 * k * (k + 3)
            x = torch.randn(n, device=dev)
            common.synchronize(dev)
            start = time.perf_counter()
            F.gelu(x)
            common.synchronize(dev)
            first = time.perf_counter() - start
            steady = []
            for _ in range(20):
                start = time.perf_counter()
                F.gelu(x)
                common.synchronize(dev)
                steady.append(time.perf_counter() - start)
            ratio = first / statistics.median(steady)
            worst = max(worst, ratio)
            rows.append(
                {"n": n, "first_us": first * 1e6, "steady_us": statistics.median(steady) * 1e6}
            )
        out[dev] = {"worst_first_over_steady": worst, "shapes": rows}
    return out


def train_step_time(model, batch, dev, dtype, optimizer_ctor, iters: int) -> float:
    model = model.to(dev)
    opt = optimizer_ctor(model.parameters())
    inputs, target_fn = batch(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=dtype, enabled=dtype is not None):
            loss = target_fn(model, inputs)
        loss.backward()
        opt.step()

    return common.best_of(dev, step, iters=iters, repeats=1)


def section_resnet50(quick: bool) -> dict:
    import torchvision

    batch_size = 16 if quick else 64
    out = {}
    for label, dtype in (("fp32", None), ("bf16_autocast", torch.bfloat16)):
        times = {}
        for dev in DEVICES:
            torch.manual_seed(0)
            model = torchvision.models.resnet50()

            def batch(d):
                x = torch.randn(batch_size, 3, 224, 224, device=d)
                y = torch.randint(0, 1000, (batch_size,), device=d)
                return x, lambda m, xs: F.cross_entropy(m(xs), y)

            times[dev] = train_step_time(
                model,
                batch,
                dev,
                dtype,
                lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
                iters=2 if quick else 3,
            )
        out[label] = {"seconds": times}
    return out


def section_gpt2(quick: bool) -> dict:
    import transformers as tf

    seq, batch_size = (128, 4) if quick else (512, 8)
    times = {}
    for dev in DEVICES:
        torch.manual_seed(0)
        config = tf.GPT2Config(n_positions=max(seq, 1024))
        model = tf.GPT2LMHeadModel(config)

        def batch(d, vocab=config.vocab_size):
            ids = torch.randint(0, vocab, (batch_size, seq), device=d)
            return ids, lambda m, x: m(input_ids=x, labels=x).loss

        times[dev] = train_step_time(
            model,
            batch,
            dev,
            torch.bfloat16,
            lambda p: torch.optim.AdamW(p, lr=1e-4),
            iters=2 if quick else 3,
        )
    return {"seq": seq, "batch": batch_size, "seconds": times}


class Block(torch.nn.Module):
    def __init__(self, d: int = 768, heads: int = 12):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        shape = (b, s, self.heads, d // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def section_compile(quick: bool) -> dict:
    seq = 256 if quick else 512
    times = {}
    for dev in DEVICES:
        torch.manual_seed(0)
        block = Block().to(dev).eval()
        compiled = torch.compile(block)
        x = torch.randn(8, seq, 768, device=dev)
        with torch.no_grad():
            compiled(x)  # compile
            times[dev] = common.best_of(dev, lambda c=compiled, x=x: c(x), iters=10)
    return {"seq": seq, "seconds": times}


SECTIONS = {
    "copy": section_copy,
    "eager": section_eager,
    "pointwise": section_pointwise,
    "reductions": section_reductions,
    "new_shape": section_new_shape,
    "compile": section_compile,
    "gpt2": section_gpt2,
    "resnet50": section_resnet50,
}


def native_half(sections: list[str], quick: bool) -> dict:
    """SEPARATE sections' native CUDA times, from a child without flagos."""
    path = os.path.join(tempfile.gettempdir(), f"flagos-bench-native-{os.getpid()}.json")
    cmd = [sys.executable, __file__, path, "--native-only", "--sections", ",".join(sections)]
    env = {k: v for k, v in os.environ.items() if k != "FLAGOS_BACKEND"}
    subprocess.run(cmd + (["--quick"] if quick else []), env=env, check=False, timeout=600)
    try:
        return json.loads(Path(path).read_text())["records"]
    except (OSError, ValueError, KeyError):
        return {}


def merge(native: dict, mine: dict) -> dict:
    """Native's per-device entries into `mine` (both nested the same way)."""
    for key, value in native.items():
        if isinstance(value, dict) and isinstance(mine.get(key), dict):
            merge(value, mine[key])
        elif key not in mine:
            mine[key] = value
    return mine


def ratios(name: str, record: dict) -> None:
    """flagos's speed against native's (native time / flagos time), per measure."""
    key = "flagos_speed_vs_inductor" if name == "compile" else "flagos_speed_vs_native"
    for target in [record, *(v for v in record.values() if isinstance(v, dict))]:
        sec = target.get("seconds")
        if isinstance(sec, dict) and common.NATIVE in sec and common.FLAGOS in sec:
            target[key] = sec[common.NATIVE] / sec[common.FLAGOS]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--native-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sections = args.sections.split(",")
    if args.native_only:  # the child of native_half()
        DEVICES[:] = [common.NATIVE]
        results = common.Results(args.out, common.meta())
        for name in sections:
            try:
                results.add(name, SECTIONS[name](args.quick))
            except Exception as err:  # noqa: BLE001 - the parent reports it
                results.add(name, {"error": f"native: {type(err).__name__}: {err}"[:400]})
                traceback.print_exc()
        return 0
    native = None  # made before the first SEPARATE section: the others run first
    info = common.init()
    import flagos_torchfl as ft

    meta = {**common.meta(), "backend": info["backend"], "quick": args.quick}
    results = common.Results(args.out, meta)
    for name in sections:
        start = time.perf_counter()
        DEVICES[:] = [common.FLAGOS] if name in SEPARATE else [common.NATIVE, common.FLAGOS]
        if name in SEPARATE and native is None:
            native = native_half([s for s in sections if s in SEPARATE], args.quick)
        try:
            ft.reset_op_stats()
            record = SECTIONS[name](args.quick)
            stats = ft.op_stats()
            record["fallback"] = {op: t["fallback"] for op, t in stats.items() if t.get("fallback")}
        except Exception as err:  # noqa: BLE001 - recorded, the next section runs
            record = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
            traceback.print_exc()
        if name in SEPARATE:
            record = merge(native.get(name, {"native": "missing"}), record)
            ratios(name, record)
        record["section_seconds"] = round(time.perf_counter() - start, 1)
        results.add(name, record)
        print(f"{name}: {record}", flush=True)
        if common.NATIVE == "cuda":
            torch.cuda.empty_cache()
        torch.flagos.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
