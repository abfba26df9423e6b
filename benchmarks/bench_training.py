"""flagos (host plugin, or --backend opencl) vs native CPU, in one process: ResNet-18-like
inference and training step, a small transformer training step, and per-op
micro-benchmarks (tiny tensors: dispatch overhead; large: throughput).

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 PYTHONPATH=<pkg dir> python benchmarks/bench_training.py [--quick] [--backend opencl]

Each case: warm-up, then the median of timed repetitions (CPU and flagos
interleaved, each flagos repetition ending with a device synchronize). `speed` = CPU time / flagos time (1.0: as fast as native
CPU; higher is better). The fallback column counts host-fallback calls seen
during the flagos runs of that case (op_stats tier "fallback").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import flagos_torchfl as ft
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import ResNet, Transformer, cnn_loss, lm_loss  # noqa: E402


def sync(device: str) -> None:
    if device != "cpu":
        torch.flagos.synchronize()


def timeit_pair(fc, ff, reps: int, warmup: int) -> tuple[float, float]:
    """Median seconds of fc (CPU) and ff (flagos), interleaved rep by rep so
    that load from other processes hits both alike."""
    for _ in range(warmup):
        fc()
        ff()
    sync("flagos")
    # Steady state: specialized kernels queued during the warm-up are in.
    ft.wait_for_specializations()
    tc, tf = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fc()
        t1 = time.perf_counter()
        ff()
        sync("flagos")
        t2 = time.perf_counter()
        tc.append(t1 - t0)
        tf.append(t2 - t1)
    return statistics.median(tc), statistics.median(tf)


def fallbacks() -> int:
    return sum(t.get("fallback", 0) for t in ft.op_stats().values())


def model_case(kind: str, train: bool, quick: bool):
    torch.manual_seed(0)
    if kind == "resnet18":
        model = ResNet(num_classes=1000)
        hw = 64 if quick else 112
        inputs = (torch.randn(8, 3, hw, hw), torch.randint(0, 1000, (8,)))
        loss_fn = cnn_loss
    else:
        model = Transformer(vocab=1000, d=256, heads=4, layers=4, seq=128)
        inputs = (torch.randint(0, 1000, (8, 128)), torch.randint(0, 1000, (8, 128)))
        loss_fn = lm_loss

    def make(device: str):
        m = (
            ResNet(num_classes=1000)
            if kind == "resnet18"
            else Transformer(vocab=1000, d=256, heads=4, layers=4, seq=128)
        )
        m.load_state_dict(model.state_dict())
        m = m.to(device)
        args = [t.to(device) for t in inputs]
        if not train:
            m.eval()

            def step():
                with torch.no_grad():
                    m(args[0])

            return step
        opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

        def step():
            opt.zero_grad()
            loss_fn(m, *args).backward()
            opt.step()

        return step

    return make


def op_cases(quick: bool):
    big = 1 << (20 if quick else 22)
    return [
        # name, builder(device) -> zero-arg fn
        (
            "tiny add (4,4)",
            lambda d: lambda a=torch.randn(4, 4).to(d), b=torch.randn(4, 4).to(d): a + b,
        ),
        ("tiny relu (16)", lambda d: lambda a=torch.randn(16).to(d): torch.relu(a)),
        ("tiny mm (8x8)", lambda d: lambda a=torch.randn(8, 8).to(d): a @ a),
        ("tiny sum (64)", lambda d: lambda a=torch.randn(64).to(d): a.sum()),
        ("tiny add_ in-place (4,4)", lambda d: lambda a=torch.randn(4, 4).to(d): a.add_(1.0)),
        (
            f"add ({big})",
            lambda d: lambda a=torch.randn(big).to(d), b=torch.randn(big).to(d): a + b,
        ),
        (f"gelu ({big})", lambda d: lambda a=torch.randn(big).to(d): F.gelu(a)),
        ("mm (1024^3)", lambda d: lambda a=torch.randn(1024, 1024).to(d): a @ a),
        ("softmax (4096x1024)", lambda d: lambda a=torch.randn(4096, 1024).to(d): a.softmax(-1)),
        ("sum dim=1 (4096x1024)", lambda d: lambda a=torch.randn(4096, 1024).to(d): a.sum(1)),
        (
            "layer_norm (4096x1024)",
            lambda d: lambda a=torch.randn(4096, 1024).to(d): F.layer_norm(a, (1024,)),
        ),
        (
            "conv3x3 64->64 (8,64,56,56)",
            lambda d: (
                lambda x=torch.randn(8, 64, 56, 56).to(d), w=torch.randn(64, 64, 3, 3).to(d): (
                    F.conv2d(x, w, padding=1)
                )
            ),
        ),
        (
            "conv3x3 fwd+bwd (8,64,56,56)",
            lambda d: (
                lambda x=torch.randn(8, 64, 56, 56).to(d).requires_grad_(), w=torch.randn(64, 64, 3, 3).to(d).requires_grad_(): (
                    F.conv2d(x, w, padding=1).sum().backward()
                )
            ),
        ),
        (
            "max_pool2d 3/2 (8,64,112,112)",
            lambda d: lambda x=torch.randn(8, 64, 112, 112).to(d): F.max_pool2d(x, 3, 2, 1),
        ),
        (
            "batch_norm train (8,64,56,56)",
            lambda d: (
                lambda x=torch.randn(8, 64, 56, 56).to(d), w=torch.ones(64).to(d), b=torch.zeros(64).to(d): (
                    F.batch_norm(x, None, None, w, b, True)
                )
            ),
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer repetitions")
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--backend", default="host", help="flagos backend to compare with CPU")
    args = ap.parse_args()
    ft.initialize(backend=args.backend)
    reps, warm = (3, 1) if args.quick else (9, 2)
    rows = []

    def run(name, make, reps, warm, unit):
        if args.only and args.only not in name:
            return
        fc = make("cpu")
        ff = make("flagos")
        ft.reset_op_stats()
        tc, tf = timeit_pair(fc, ff, reps, warm)
        scale = 1e3 if unit == "ms" else 1e6
        rows.append(
            (
                name,
                f"{tc * scale:.3f} {unit}",
                f"{tf * scale:.3f} {unit}",
                f"{tc / tf:.2f}x",
                str(fallbacks()),
            )
        )
        print(" | ".join(rows[-1]), flush=True)

    print(
        f"torch {torch.__version__}, CPU threads {torch.get_num_threads()}, flagos backend: {args.backend}"
    )
    print("case | cpu | flagos | speed (cpu/flagos) | fallbacks")
    for kind, train in (("resnet18", False), ("resnet18", True), ("transformer", True)):
        name = f"{kind} {'train step (SGD)' if train else 'inference'}"
        run(name, model_case(kind, train, args.quick), max(2, reps // 2), warm, "ms")
    for name, make in op_cases(args.quick):
        tiny = name.startswith("tiny")
        run(name, make, 200 if tiny else reps, 20 if tiny else warm, "us" if tiny else "ms")


if __name__ == "__main__":
    main()
