"""DistributedDataParallel, torchrun style: one process per GPU, NCCL.

Run by torchrun normally; the test runs one process with the env:// variables set.
DDP_DEVICE_ID=1: init_process_group(..., device_id=torch.device("cuda", local_rank)),
the form PyTorch recommends (Lightning's DDP always passes it).
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    if os.environ.get("DDP_DEVICE_ID") == "1":
        dist.init_process_group(backend="nccl", device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group(backend="nccl")
    torch.manual_seed(0)
    model = nn.Linear(8, 1).cuda(local_rank)
    ddp = DDP(model, device_ids=[local_rank], output_device=local_rank)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x = torch.randn(16, 8).cuda(local_rank)
    y = torch.randn(16, 1).cuda(local_rank)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    result = {
        "backend": str(dist.get_backend()),
        "backend_config": dist.get_backend_config(),
        "world_size": dist.get_world_size(),
        "losses": losses,
        "device": str(next(ddp.parameters()).device),
    }
    dist.destroy_process_group()
    # One write per line: both ranks share torchrun's stdout, and print()
    # may write the text and its newline separately, interleaving them.
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
