"""A transformer training step with dropout on against the same step with it off (issue 32).

Target: dropout on costs no more than the bytes it adds. Its yardstick is
measured in the same process, next to every repetition: a device copy of
the same size as the activations. The bytes dropout adds, per element that
goes through a dropout layer (nn.Dropout and attention's), are the fused
forward kernel's (read x, write out and a bool mask: 9 bytes) and the
backward's (read grad and mask, write grad: 9 bytes); with p = 0 PyTorch
skips the layer. So

    ratio = (step time with p = 0.1 - step time with p = 0) / (added bytes / copy bandwidth)

and the target is ratio <= 1 (a ratio above 1 is time beyond the bytes:
the random numbers' compute). The model: 4 nn.TransformerEncoderLayer
(d_model 256, 4 heads, FFN 1024, batch 8 x 128 tokens), SGD.

    python3 benchmarks/bench_dropout_step.py [--configs host,opencl] [--repeat 9]
"""

from __future__ import annotations

import argparse
import os
import sys

from _run import run_json

BODY = r"""
import json, statistics, sys, time, torch
import flagos_torchfl as ft
config, repeat = sys.argv[1], int(sys.argv[2])
ft.initialize(config)
sync = torch.flagos.synchronize

def build(p):
    torch.manual_seed(0)
    layers = [torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=p, batch_first=True)
              for _ in range(4)]
    return torch.nn.Sequential(*layers).to("flagos").train()

x = torch.randn(8, 128, 256).to("flagos")
models = {p: build(p) for p in (0.0, 0.1)}
opts = {p: torch.optim.SGD(m.parameters(), lr=1e-3) for p, m in models.items()}
big = torch.empty(8 * 128 * 1024, device="flagos")  # FFN activations, the largest
dst = torch.empty_like(big)

def step(p):
    models[p](x).square().mean().backward()
    opts[p].step()
    opts[p].zero_grad()

def timed(fn):
    sync(); t0 = time.perf_counter(); fn(); sync()
    return time.perf_counter() - t0

for p in (0.0, 0.1):
    for _ in range(3):
        step(p)
ft.wait_for_specializations()
ft.reset_op_stats()
step(0.1)
calls = ft.op_stats().get("aten::native_dropout", {})
assert calls == {"generated": 16}, calls  # 4 dropouts a layer, all on the device
# Per layer: attention weights (8*4*128*128), after attention and after the
# FFN (8*128*256 each), inside the FFN (8*128*1024).
per_layer = 8 * 4 * 128 * 128 + 2 * 8 * 128 * 256 + 8 * 128 * 1024
elements = 4 * per_layer
added_bytes = 18 * elements
on, off, copy_bw = [], [], []
for _ in range(repeat):
    tc = timed(lambda: dst.copy_(big))
    copy_bw.append(2 * big.numel() * 4 / tc)
    off.append(timed(lambda: step(0.0)))
    on.append(timed(lambda: step(0.1)))
bw = statistics.median(copy_bw)
extra = statistics.median(on) - statistics.median(off)
print(json.dumps({
    "dropout_calls": calls, "elements": elements, "added_mb": added_bytes / 1e6,
    "copy_gbps": bw / 1e9, "off_ms": statistics.median(off) * 1e3,
    "on_ms": statistics.median(on) * 1e3, "extra_ms": extra * 1e3,
    "bytes_ms": added_bytes / bw * 1e3, "ratio": extra / (added_bytes / bw),
}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--configs", default="host,opencl")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    print(
        "| backend | step, p = 0 (ms) | step, p = 0.1 (ms) | extra (ms) | dropout's bytes at copy "
        "speed (ms) | ratio (target ≤ 1) |"
    )
    print("|---|---|---|---|---|---|")
    for config in args.configs.split(","):
        r = run_json(BODY, config, str(args.repeat), env=dict(os.environ), what=config)
        mark = "met" if r["ratio"] <= 1 else "**missed**"
        print(
            f"| {config} | {r['off_ms']:.1f} | {r['on_ms']:.1f} | {r['extra_ms']:.1f} | "
            f"{r['bytes_ms']:.1f} ({r['added_mb']:.0f} MB at {r['copy_gbps']:.1f} GB/s) | "
            f"{r['ratio']:.2f} {mark} |"
        )


if __name__ == "__main__":
    sys.exit(main())
