"""Zoo models on flagos against native CPU, in the same process: one training step.

    python3 benchmarks/bench_zoo.py [--models convnext_tiny] [--backend host]
        [--input 2x3x64x64] [--steps 8]

For each model (torchvision classes with random weights): forward + backward
of one batch, timed per step after 2 warm-up steps, on native CPU (the
yardstick) and on the flagos device, interleaved step by step so both see the
same machine load. Reported: median and worst step for each, the ratio
CPU / flagos of the medians and of the worst steps (>= 1: flagos is as fast
as CPU), and the operator calls of one flagos step (launches, by tier).
Needs torchvision (scripts/torch_env.sh 2.14.1 has it).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import flagos_torchfl as ft
import torch


def build(name: str) -> torch.nn.Module:
    import torchvision

    return getattr(torchvision.models, name)(weights=None)


def step(model, x):
    model.zero_grad(set_to_none=True)
    model(x).float().pow(2).mean().backward()


def timed(model, x, sync) -> float:
    start = time.perf_counter()
    step(model, x)
    sync()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="convnext_tiny")
    parser.add_argument("--backend", default="host")
    parser.add_argument("--input", default="2x3x64x64")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    ft.initialize(args.backend)
    shape = [int(v) for v in args.input.split("x")]
    print(
        f"backend {args.backend}, input {args.input}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"{'model':16s} {'cpu p50':>9s} {'cpu max':>9s} {'flagos p50':>11s} {'flagos max':>11s}"
        f" {'ratio p50':>10s} {'ratio max':>10s}  launches/step"
    )
    for name in args.models.split(","):
        torch.manual_seed(0)
        cpu_model = build(name).train()
        dev_model = copy.deepcopy(cpu_model).to("flagos")
        x = torch.randn(*shape)
        xd = x.to("flagos")
        for _ in range(2):
            step(cpu_model, x)
            step(dev_model, xd)
        torch.flagos.synchronize()
        cpu_t, dev_t = [], []
        for _ in range(args.steps):
            cpu_t.append(timed(cpu_model, x, lambda: None))
            dev_t.append(timed(dev_model, xd, torch.flagos.synchronize))
        ft.reset_op_stats()
        step(dev_model, xd)
        torch.flagos.synchronize()
        tiers: dict[str, int] = {}
        for per_tier in ft.op_stats().values():
            for tier, n in per_tier.items():
                tiers[tier] = tiers.get(tier, 0) + n
        launches = ", ".join(f"{t} {n}" for t, n in sorted(tiers.items()))
        cp, cm = statistics.median(cpu_t), max(cpu_t)
        dp, dm = statistics.median(dev_t), max(dev_t)
        print(
            f"{name:16s} {cp * 1e3:8.1f}ms {cm * 1e3:8.1f}ms {dp * 1e3:10.1f}ms {dm * 1e3:10.1f}ms"
            f" {cp / dp:10.2f} {cm / dm:10.2f}  {sum(tiers.values())} ({launches})"
        )


if __name__ == "__main__":
    main()
