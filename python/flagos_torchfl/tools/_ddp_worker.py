"""One rank of `validate --level 4` (started by torch.distributed.run; not a public API).

    python -m torch.distributed.run --nproc-per-node=N -m flagos_torchfl.tools._ddp_worker \\
        --model SPEC --out RESULT.json [--backend NAME] [--steps 20] [--warmup 3] [--lr 0.05]

Rank r uses device flagos:<local rank> and the fccl backend
(init_process_group(backend=None, device_id=...)).

Note [Level 4 shards]
~~~~~~~~~~~~~~~~~~~~~
Rank r trains on the model's example inputs with its own deterministic
perturbation (rank 0: none), so one DDP step averages N different gradients;
rank 0 checks them against one CPU process computing the mean loss over all N
shards (the combined batch).

Then rank 0 alone times non-distributed training steps while the others wait,
and every rank times the same steps under DDP: the ratio of samples/s is the
scaling. Rank 0 writes the result as JSON to --out.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import time
import traceback
from pathlib import Path
from typing import Any

from .. import config
from . import _model

NOISE = 0.1  # scale of the per-rank perturbation of floating inputs


def shard(inputs: tuple, rank: int) -> tuple:
    """Rank `rank`'s inputs: floating tensors perturbed by seeded noise (rank 0: as given)."""
    import torch

    if rank == 0:
        return inputs
    g = torch.Generator().manual_seed(1000 + rank)

    def perturb(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x + NOISE * torch.randn(x.shape, generator=g, dtype=x.dtype)
        return x

    return tuple(perturb(x) for x in inputs)


def _grads(model) -> list:
    import torch

    return [
        (p.grad if p.grad is not None else torch.zeros_like(p)).detach().cpu()
        for p in model.parameters()
    ]


def _sync() -> None:
    import torch

    torch.flagos.synchronize()


def _train_steps(module, params, case, inputs, steps: int, warmup: int, lr: float) -> float:
    """Seconds for `steps` SGD steps after `warmup` untimed ones (synchronized)."""
    import torch

    opt = torch.optim.SGD(params, lr=lr)

    def step():
        opt.zero_grad()
        case.loss_fn(module(*inputs)).backward()
        opt.step()

    for _ in range(warmup):
        step()
    _sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync()
    return time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .. import distributed as fd
    from .. import initialize

    initialize(args.backend)
    fd.register()
    rank, world, local = config.launcher_ranks()
    device = torch.device("flagos", local)
    torch.flagos.set_device(device)
    dist.init_process_group(
        backend=None, device_id=device, timeout=datetime.timedelta(seconds=args.timeout)
    )
    try:
        case = _model.load(args.model)
        shards = [shard(case.inputs, r) for r in range(world)]
        mine = _model.to_device(shards[rank], device)
        first = _model.first_tensor(case.inputs)
        # Samples per step: the batch dimension of the first input (--batch-dim;
        # 1 for a seq-first model, whose dim 0 is the sequence).
        bd = args.batch_dim
        batch = int(first.shape[bd]) if first is not None and first.dim() > bd else 1

        # One DDP step's gradients vs one CPU process on the combined batch.
        model = copy.deepcopy(case.model).to(device).train()
        ddp = DDP(model)
        case.loss_fn(ddp(*mine)).backward()
        grads = _grads(model)
        flat = torch.cat([g.reshape(-1) for g in grads]).to(device)
        gathered = [torch.empty_like(flat) for _ in range(world)]
        dist.all_gather(gathered, flat)
        spread = max(float((t - gathered[0]).abs().max().cpu()) for t in gathered)
        result: dict[str, Any] = {"world_size": world, "batch_per_rank": batch, "spread": spread}
        if rank == 0:
            reference = copy.deepcopy(case.model).train()
            loss = sum(case.loss_fn(reference(*s)) for s in shards) / world
            loss.backward()
            ref = _grads(reference)
            diffs = [
                (d - c).abs().max().item() if d.numel() else 0.0
                for d, c in zip(grads, ref, strict=True)
            ]
            result["max_abs_diff"] = max(diffs, default=0.0)
            result["max_abs_grad"] = max(
                (c.abs().max().item() for c in ref if c.numel()), default=0.0
            )
            result["grads_close"] = all(
                torch.isclose(d.double(), c.double(), args.rtol, args.atol).all().item()
                for d, c in zip(grads, ref, strict=True)
            )
            result["route"] = fd.comm_info()["route"]

        # Throughput: rank 0 alone (no DDP), then all ranks under DDP.
        dist.barrier()
        if rank == 0:
            single = copy.deepcopy(case.model).to(device).train()
            inputs0 = _model.to_device(shards[0], device)
            t1 = _train_steps(
                single, single.parameters(), case, inputs0, args.steps, args.warmup, args.lr
            )
            result["single_samples_per_s"] = batch * args.steps / t1
        dist.barrier()
        tn = _train_steps(ddp, ddp.parameters(), case, mine, args.steps, args.warmup, args.lr)
        dist.barrier()
        times = [None] * world
        dist.all_gather_object(times, tn)
        if rank == 0:
            slowest = max(times)
            result["ddp_samples_per_s"] = world * batch * args.steps / slowest
            result["scaling"] = result["ddp_samples_per_s"] / result["single_samples_per_s"]
            result["efficiency"] = result["scaling"] / world
            result["steps"] = args.steps
        return result
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flagos_torchfl.tools._ddp_worker")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--backend", default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--batch-dim", type=int, default=0)
    args = parser.parse_args(argv)
    rank = config.launcher_ranks()[0]
    try:
        result = run(args)
    except Exception as err:  # noqa: BLE001 - reported to the parent through --out
        result = {
            "error": f"rank {rank}: {type(err).__name__}: {err}",
            "traceback": traceback.format_exc(),
        }
        if rank == 0:
            Path(args.out).write_text(json.dumps(result))
        raise
    if rank == 0:
        Path(args.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
