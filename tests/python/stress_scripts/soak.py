"""A training-loop soak: memory must stay flat after warm-up (issue 15).

Trains a small CNN and a transformer layer on flagos, alternately, with the
batch size cycling through a few values (new shapes at first, then only
seen ones), for a given time. After a warm-up (the first quarter of the
run), it samples the process RSS and torch.flagos.memory_reserved() once
per cycle and prints one JSON line:

  {"backend": ..., "seconds": ..., "steps": ..., "rss_mib": [first, last, max],
   "reserved_mib": [first, last, max], "rss_growth_mib": ..., "reserved_growth_mib": ...}

growth = the last sample minus the first one after warm-up. Usage:
  python tests/python/stress_scripts/soak.py BACKEND SECONDS
(docs/reliability.md: 600 s per backend, by hand; the suite runs it short.)
"""

import json
import sys
import time

import flagos_torchfl as ft
import torch


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * 4096 / 2**20


def main(argv: list[str]) -> int:
    backend, seconds = argv[0], float(argv[1])
    ft.initialize(backend)
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 8 * 8, 10),
    ).to("flagos")
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).to("flagos")
    params = list(cnn.parameters()) + list(layer.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    sizes = [4, 6, 8, 5]
    start = time.monotonic()
    steps, samples = 0, []
    while time.monotonic() - start < seconds:
        for n in sizes:
            opt.zero_grad(set_to_none=True)
            x = torch.randn(n, 3, 16, 16, device="flagos")
            y = torch.randint(0, 10, (n,), device="flagos")
            seq = torch.randn(2, n + 3, 32, device="flagos")
            loss = torch.nn.functional.cross_entropy(cnn(x), y) + layer(seq).square().mean()
            loss.backward()
            opt.step()
            steps += 1
        loss.item()
        if time.monotonic() - start > seconds / 4:
            samples.append((rss_mib(), torch.flagos.memory_reserved() / 2**20))
    rss = [s[0] for s in samples] or [rss_mib()]
    res = [s[1] for s in samples] or [torch.flagos.memory_reserved() / 2**20]
    print(
        json.dumps(
            {
                "backend": backend,
                "seconds": round(time.monotonic() - start, 1),
                "steps": steps,
                "rss_mib": [round(rss[0], 1), round(rss[-1], 1), round(max(rss), 1)],
                "reserved_mib": [round(res[0], 2), round(res[-1], 2), round(max(res), 2)],
                "rss_growth_mib": round(rss[-1] - rss[0], 1),
                "reserved_growth_mib": round(res[-1] - res[0], 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
