"""DDP on 2 processes gives the parameters of single-process training on the combined batch.

A small CNN, SGD, a few steps. Each rank trains on its half of a fixed batch
with DistributedDataParallel (tiny buckets, so several all-reduces are in
flight during backward); rank 0 also trains a CPU copy on the whole batch
and reports the largest parameter difference.
"""

from __future__ import annotations

import copy
import datetime

import _common
import torch
import torch.distributed as dist
import torch.nn as nn
from flagos_torchfl import distributed as fd
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 3
BATCH = 8  # combined; each rank takes BATCH // world


def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 10),
    )


def train(model: nn.Module, xs, ys, device) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for x, y in zip(xs, ys, strict=True):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


rank, world, dev = _common.setup()
dist.init_process_group("fccl", timeout=datetime.timedelta(seconds=60))
g = torch.Generator().manual_seed(1)
xs = [torch.randn(BATCH, 1, 8, 8, generator=g) for _ in range(STEPS)]
ys = [torch.randint(0, 10, (BATCH,), generator=g) for _ in range(STEPS)]
per = BATCH // world

reference = make_model()
model = DDP(copy.deepcopy(reference).to(dev), bucket_cap_mb=0.001)
train(
    model,
    [x[rank * per : (rank + 1) * per] for x in xs],
    [y[rank * per : (rank + 1) * per] for y in ys],
    dev,
)

diff = None
if rank == 0:
    train(reference, xs, ys, "cpu")
    diff = max(
        (p.detach().cpu() - q.detach()).abs().max().item()
        for p, q in zip(model.module.parameters(), reference.parameters(), strict=True)
    )
# Every rank holds the same parameters.
flat = torch.cat([p.detach().reshape(-1) for p in model.module.parameters()])
gathered = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
spread = max((t - gathered[0]).abs().max().item() for t in gathered)
_common.report(rank=rank, max_diff=diff, spread=spread, route=fd.comm_info()["route"])
dist.destroy_process_group()
