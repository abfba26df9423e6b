"""Custom kernels (issue 20) against the eager composition of the same math, in the same run.

For each backend, in its own process: the fused RMSNorm and the
flash-attention forward of examples/ against the eager operators that compute
the same thing on the same device (examples' `reference`), forward and
forward + backward, timed interleaved (fused, eager, fused, ...) so machine
noise hits both. Native CPU eager (PyTorch's own kernels; SDPA for attention)
is the yardstick of the same shapes. Reported: median and WORST time of each,
and eager / fused as a speedup from the medians and from the worst times.

    python3 benchmarks/bench_extension.py [--backends host,opencl] [--repeat 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from _run import run_json

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

BODY = r"""
import json, statistics, sys, time, torch
backend, repeat, examples = sys.argv[1], int(sys.argv[2]), sys.argv[3]
import flagos_torchfl as ft
ft.initialize(backend)
sys.path.insert(0, examples)
import flash_attention as fa, fused_rmsnorm as rn
torch.manual_seed(0)
sync = torch.flagos.synchronize

def timed(fn):
    sync(); t = time.perf_counter(); fn(); sync()
    return time.perf_counter() - t

def cpu_timed(fn):
    t = time.perf_counter(); fn()
    return time.perf_counter() - t

def train(f, *inputs):
    def step():
        for t in inputs: t.grad = None
        f().sum().backward()
    return step

rows, cols = 4096, 1024
x = torch.randn(rows, cols, device="flagos", requires_grad=True)
w = torch.randn(cols, device="flagos", requires_grad=True)
xc, wc = x.detach().cpu().requires_grad_(), w.detach().cpu().requires_grad_()
b, h, s, d = 1, 8, 512, 64
q, k, v = (torch.randn(b, h, s, d, device="flagos", requires_grad=True) for _ in range(3))
qc, kc, vc = (t.detach().cpu().requires_grad_() for t in (q, k, v))
sdpa = torch.nn.functional.scaled_dot_product_attention
cases = {
    f"rms_norm {rows}x{cols}": (
        lambda: rn.rms_norm(x, w), lambda: rn.reference(x, w), lambda: rn.reference(xc, wc)),
    f"rms_norm {rows}x{cols} fwd+bwd": (
        train(lambda: rn.rms_norm(x, w), x, w), train(lambda: rn.reference(x, w), x, w),
        train(lambda: rn.reference(xc, wc), xc, wc)),
}
for causal in (False, True):
    tag = f"attention {b}x{h}x{s}x{d}" + (" causal" if causal else "")
    cases[tag] = (
        lambda c=causal: fa.flash_attention(q, k, v, causal=c),
        lambda c=causal: fa.reference(q, k, v, causal=c),
        lambda c=causal: sdpa(qc, kc, vc, is_causal=c))
    cases[tag + " fwd+bwd"] = (
        train(lambda c=causal: fa.flash_attention(q, k, v, causal=c), q, k, v),
        train(lambda c=causal: fa.reference(q, k, v, causal=c), q, k, v),
        train(lambda c=causal: sdpa(qc, kc, vc, is_causal=c), qc, kc, vc))
out = {}
for name, (fused, eager, cpu) in cases.items():
    with torch.no_grad() if "bwd" not in name else torch.enable_grad():
        for _ in range(2):  # compile, warm the caches
            timed(fused); timed(eager); cpu_timed(cpu)
        tf, te, tc = [], [], []
        for _ in range(repeat):
            tf.append(timed(fused)); te.append(timed(eager)); tc.append(cpu_timed(cpu))
    med = statistics.median
    out[name] = {"fused_ms": [med(tf) * 1e3, max(tf) * 1e3],
                 "eager_ms": [med(te) * 1e3, max(te) * 1e3],
                 "cpu_ms": [med(tc) * 1e3, max(tc) * 1e3]}
print(json.dumps({"backend": backend, "language": ft.extension.language(), "cases": out}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="host,opencl")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    results = []
    for backend in args.backends.split(","):
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_")}
        if "FLAGOS_CACHE_DIR" in os.environ:
            env["FLAGOS_CACHE_DIR"] = os.environ["FLAGOS_CACHE_DIR"]
        r = run_json(BODY, backend, str(args.repeat), str(EXAMPLES), env=env, what=backend)
        results.append(r)
        print(
            f"\n{backend} ({r['language']}), {args.repeat} interleaved repetitions, ms median / worst"
        )
        print(f"{'case':38} {'fused':>15} {'eager':>15} {'native CPU':>15} {'eager/fused':>18}")
        for name, c in r["cases"].items():
            f, e, n = c["fused_ms"], c["eager_ms"], c["cpu_ms"]
            print(
                f"{name:38} {f[0]:7.2f} /{f[1]:6.2f} {e[0]:7.2f} /{e[1]:6.2f} {n[0]:7.2f} /{n[1]:6.2f}"
                f"   {e[0] / f[0]:5.2f}x / {e[1] / f[1]:5.2f}x"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
