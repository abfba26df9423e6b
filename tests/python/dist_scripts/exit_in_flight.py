"""A program that ends with a collective still in flight and no
destroy_process_group() (Note [Comm workers at exit], csrc/comm/backend.cpp).

Rank 0 issues an asynchronous all_reduce of a view, drops every Python
reference to it and ends; rank 1 joins that all_reduce only 1 s later. The
crash this guards against needs the worker to release the view's base
(whose Python object takes the GIL) while the main thread holds the GIL in
the last moments before Python finalizes: the last exit handler holds the
GIL for about 3 s in one C call, so without the exit
stop the worker blocks on the GIL there and is made to exit by the
finalizing interpreter (SIGABRT, "terminate called without an active
exception"). Each rank must exit 0; rank 1 reports the reduced value.
"""

from __future__ import annotations

import atexit
import time


def gil_holding_call(seconds: float = 3.0) -> range:
    """The argument of a sum() that holds the GIL for about @p seconds."""
    start = time.perf_counter()
    sum(range(1_000_000))
    per_million = max(time.perf_counter() - start, 1e-4)
    return range(int(1_000_000 * seconds / per_million))


# The last exit handler to run (registered before torch, and flagos with
# it, is imported): a C call, so that no Python code runs between it and
# finalization to hand the GIL to the waiting worker.
atexit.register(sum, gil_holding_call())

import _common  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

rank, world, dev = _common.setup()
dist.init_process_group(backend="fccl")
base = torch.full((1 << 16, 2), float(rank + 1), device=dev)
if rank == 1:
    time.sleep(1.0)
view = base[:, 0]  # its autograd view metadata keeps the base alive
work = dist.all_reduce(view, async_op=True)
if rank == 1:
    work.wait()
    _common.report(rank=rank, sum=view[:4].cpu().tolist())
else:
    _common.report(rank=rank)
    del base, view, work
