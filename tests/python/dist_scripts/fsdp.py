"""FSDP2 (fully_shard) on 2 processes tracks single-process training of a small transformer.

Each rank trains its half of a fixed batch with the model sharded over a
1-D DeviceMesh of the flagos device (all_gather_into_tensor for parameters,
reduce_scatter_tensor with avg for gradients); rank 0 also trains a CPU copy
on the whole batch. Reported: per-step losses (the mean of the ranks' losses
vs the reference) and the largest parameter difference at the end.
"""

from __future__ import annotations

import copy
import datetime

import _common
import torch
import torch.distributed as dist
import torch.nn as nn
from flagos_torchfl import distributed as fd
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

STEPS = 3
BATCH, SEQ, DIM = 4, 6, 16


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(DIM, DIM)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(DIM, 2, 32, dropout=0.0, batch_first=True) for _ in range(2)
        )
        self.head = nn.Linear(DIM, 1)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h).mean(dim=(1, 2))


def train(model, xs, ys, device) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for x, y in zip(xs, ys, strict=True):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


rank, world, dev = _common.setup()
dist.init_process_group(device_id=dev, timeout=datetime.timedelta(seconds=60))
mesh = init_device_mesh("flagos", (world,))
g = torch.Generator().manual_seed(2)
xs = [torch.randn(BATCH, SEQ, DIM, generator=g) for _ in range(STEPS)]
ys = [torch.randn(BATCH, generator=g) for _ in range(STEPS)]
per = BATCH // world

torch.manual_seed(0)
reference = Tiny()
model = copy.deepcopy(reference).to(dev)
for layer in model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
losses = train(
    model,
    [x[rank * per : (rank + 1) * per] for x in xs],
    [y[rank * per : (rank + 1) * per] for y in ys],
    dev,
)
mean_losses = []
for loss in losses:  # the combined-batch loss is the mean of the halves' losses
    dist.all_reduce(loss, op=dist.ReduceOp.AVG)
    mean_losses.append(loss.item())
full = [p.full_tensor().detach().cpu() for p in model.parameters()]

ref_losses, diff = None, None
if rank == 0:
    ref_losses = [x.item() for x in train(reference, xs, ys, "cpu")]
    diff = max(
        (p - q.detach()).abs().max().item()
        for p, q in zip(full, reference.parameters(), strict=True)
    )
_common.report(
    rank=rank,
    losses=mean_losses,
    ref_losses=ref_losses,
    max_diff=diff,
    route=fd.comm_info()["route"],
)
dist.destroy_process_group()
