"""torch.fft through the FFT library slot (include/flagos/fft.h) against
native CPU and against the same calls sent to the host tier.

For each case (c2c, r2c and c2r rows, a 2-D transform, stft): P50 per call
on the device through the slot, on native CPU (torch's own FFT), and on the
device with the three primitives routed to the host tier
(FLAGOS_OP_FFT_*=fallback), each configuration in its own process, the CPU
yardstick measured in the same process as the slot. Ratios: CPU / slot
(1.0 = CPU's speed) and host tier / slot.

    python3 benchmarks/bench_fft.py [--backend host] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os

from _run import run_json

BODY = """
import json, statistics, sys, time, torch, flagos_torchfl as ft
ft.initialize(sys.argv[1])
repeat = int(sys.argv[2])
dev = torch.device("flagos")
def p50(fn):
    fn(); torch.flagos.synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); fn(); torch.flagos.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
g = torch.Generator().manual_seed(0)
rows = torch.randn(64, 4096, generator=g)
crows = torch.complex(rows, torch.randn(64, 4096, generator=g))
image = torch.randn(512, 512, generator=g)
audio = torch.randn(4, 16000, generator=g)
window = torch.hann_window(512)
half = torch.fft.rfft(rows)
cases = {
    "fft c2c 64x4096": (torch.fft.fft, crows),
    "rfft r2c 64x4096": (torch.fft.rfft, rows),
    "irfft c2r 64x2049": (torch.fft.irfft, half),
    "fft2 512x512 (real input)": (torch.fft.fft2, image),
    "stft 4x16000, n_fft 512": (
        lambda t, w=None: torch.stft(t, 512, hop_length=128, window=w, return_complex=True),
        audio,
    ),
}
out = {}
for name, (fn, x) in cases.items():
    xd = x.to(dev)
    if name.startswith("stft"):
        wd = window.to(dev)
        out[name] = {"device": p50(lambda: fn(xd, wd)), "cpu": p50(lambda: fn(x, window))}
    else:
        out[name] = {"device": p50(lambda: fn(xd)), "cpu": p50(lambda: fn(x))}
ft.reset_op_stats()
cases["fft c2c 64x4096"][0](crows.to(dev))
out["_tiers"] = ft.op_stats().get("aten::_fft_c2c", {})
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="host")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    env = dict(os.environ)
    slot = run_json(BODY, args.backend, str(args.repeat), env=env, what="slot")
    fallback_env = dict(env, **{f"FLAGOS_OP_FFT_{k}": "fallback" for k in ("C2C", "R2C", "C2R")})
    host = run_json(BODY, args.backend, str(args.repeat), env=fallback_env, what="host tier")
    print(
        f"backend {args.backend}: tiers of fft c2c, slot run {slot['_tiers']}, "
        f"fallback run {host['_tiers']}; P50 per call, {args.repeat} calls"
    )
    print(
        f"{'case':28} {'slot ms':>9} {'CPU ms':>9} {'host tier ms':>13} {'CPU/slot':>9} "
        f"{'host/slot':>10}"
    )
    for name, r in slot.items():
        if name.startswith("_"):
            continue
        h = host[name]["device"]
        print(
            f"{name:28} {r['device'] * 1e3:9.3f} {r['cpu'] * 1e3:9.3f} {h * 1e3:13.3f} "
            f"{r['cpu'] / r['device']:9.2f} {h / r['device']:10.2f}"
        )


if __name__ == "__main__":
    main()
