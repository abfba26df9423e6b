"""Routing with a plugin that has no collectives table (the opencl plugin).

FLAGOS_COMM=vendor must fail at group creation with a clear error; auto must
take the host route and work. Both ranks share the plugin's device 0.
"""

from __future__ import annotations

import datetime

import _common
import torch
import torch.distributed as dist
from flagos_torchfl import distributed as fd

rank, world, dev = _common.setup("opencl")
before = fd.comm_info()
try:
    dist.init_process_group("fccl", timeout=datetime.timedelta(seconds=30))
except Exception as err:  # noqa: BLE001 - the message is the result
    _common.report(rank=rank, error=f"{type(err).__name__}: {err}", before=before)
    raise SystemExit(0) from None
x = torch.full((4,), float(rank + 1), device=dev)
dist.all_reduce(x)
_common.report(rank=rank, info=fd.comm_info(), before=before, value=x.cpu().tolist())
dist.destroy_process_group()
