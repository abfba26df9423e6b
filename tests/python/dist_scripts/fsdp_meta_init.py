"""FSDP2 as pytorch/examples' distributed/FSDP2 example uses it: meta-device init.

The model is built on the meta device, sharded with fully_shard, then
materialized with to_empty(device=...) and initialized by reset_parameters():
every init is a DTensor random op, which DTensor's random-op tracker runs
with the device generator's (seed, offset) state rewritten per shard (Note
[Generators of the flagos device]). Then a few Adam steps on random tokens.
As in the example, the current device is never set: it calls
torch.accelerator.device_index(rank) without `with` (a no-op) and
torch.manual_seed(0) before fully_shard, whose DeviceMesh must then pick the
device from LOCAL_RANK (seeding must not bring the device up early).

Reported: the losses (each rank's), whether every parameter is finite and
was actually initialized (not the zeros or garbage of to_empty), and a
checksum of the full (gathered) parameters, which must agree across ranks.
"""

from __future__ import annotations

import datetime

import _common
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

VOCAB, DIM, SEQ, BATCH, LAYERS = 64, 16, 8, 4, 2


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, 2, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm(x))

    def reset_parameters(self) -> None:
        self.norm.reset_parameters()
        self.attn._reset_parameters()
        self.attn.out_proj.reset_parameters()
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                m.reset_parameters()


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.out = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        h = self.embed(tokens) + self.pos(positions)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)

    def reset_parameters(self) -> None:
        self.embed.reset_parameters()
        self.pos.reset_parameters()
        for layer in self.layers:
            layer.reset_parameters()
        self.out.reset_parameters()


rank, world, dev = _common.setup(set_device=False)
torch.accelerator.device_index(rank)  # as the example has it: not entered, so a no-op
dist.init_process_group(backend="nccl", device_id=dev, timeout=datetime.timedelta(seconds=60))
torch.manual_seed(0)
with torch.device("meta"):
    model = Transformer()
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
model.to_empty(device=dev)
model.reset_parameters()

checks = _common.Checks()
checks.true("current device from LOCAL_RANK", torch.flagos.current_device() == rank)
for name, p in model.named_parameters():
    checks.true(f"{name} on {dev}", p.device == dev, str(p.device))
    local = p.to_local().detach().cpu()
    checks.true(f"{name} finite", bool(torch.isfinite(local).all()))
    if "weight" in name and "norm" not in name and local.numel() > 0:
        checks.true(f"{name} initialized", float(local.std()) > 1e-3, f"std {float(local.std())}")

optim = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
gen = torch.Generator().manual_seed(rank)
for _ in range(3):
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen).to(dev)
    logits = model(tokens)
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1))
    loss.backward()
    optim.step()
    optim.zero_grad()
    losses.append(loss.item())

full = [p.full_tensor().detach().cpu() for p in model.parameters()]
checksum = float(sum(t.double().abs().sum() for t in full))
_common.report(
    rank=rank,
    failed=checks.failed,
    passed=checks.passed,
    losses=losses,
    checksum=checksum,
    backend=dist.get_backend(),
    backend_config=dist.get_backend_config(),
)
dist.destroy_process_group()
