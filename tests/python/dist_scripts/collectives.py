"""Every collective of the fccl backend against values computed on the CPU.

argv[1]: how to start the group: "device_id" (backend=None), "fccl" or
"cpu:gloo,flagos:fccl" (then CPU tensors go to gloo). The route comes from
FLAGOS_COMM (set by the test); the result reports the one comm_info() saw.
"""

from __future__ import annotations

import datetime
import sys

import _common
import torch
import torch.distributed as dist
from flagos_torchfl import distributed as fd

style = sys.argv[1] if len(sys.argv) > 1 else "device_id"
rank, world, dev = _common.setup()
timeout = datetime.timedelta(seconds=30)
if style == "device_id":
    dist.init_process_group(device_id=dev, timeout=timeout)
else:
    dist.init_process_group(backend=style, timeout=timeout)
ck = _common.Checks()
R = range(world)


def data(r: int, n: int, dtype: torch.dtype, offset: int = 0) -> torch.Tensor:
    """Rank r's input: small integers, exact in every dtype (bool: alternating)."""
    base = (torch.arange(n) + r + 1 + offset) % 7 + 1
    if dtype == torch.bool:
        return (torch.arange(n) + r) % 2 == 0
    return base.to(dtype)


REDUCE = {
    dist.ReduceOp.SUM: lambda xs: torch.stack(xs).sum(0),
    dist.ReduceOp.PRODUCT: lambda xs: torch.stack(xs).prod(0),
    dist.ReduceOp.MIN: lambda xs: torch.stack(xs).amin(0),
    dist.ReduceOp.MAX: lambda xs: torch.stack(xs).amax(0),
    dist.ReduceOp.AVG: lambda xs: torch.stack(xs).double().mean(0),
}


def expected_reduce(op, dtype, n, offset=0):
    xs = [data(r, n, dtype, offset) for r in R]
    if dtype == torch.bool:
        stack = torch.stack(xs)
        out = stack.any(0) if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX) else stack.all(0)
        return out
    return REDUCE[op](xs).to(dtype)


# --- all_reduce: dtypes x operators, PREMUL_SUM, non-contiguous ----------
for dtype in (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int32,
    torch.int64,
):
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if dtype.is_floating_point:
        ops.append(dist.ReduceOp.AVG)
    for op in ops:
        x = data(rank, 37, dtype).to(dev)
        ck.run(f"all_reduce {dtype} {op}", dist.all_reduce, x, op=op)
        ck.close(f"all_reduce {dtype} {op}", x, expected_reduce(op, dtype, 37))
x = data(rank, 10, torch.bool).to(dev)
ck.run("all_reduce bool", lambda: dist.all_reduce(x))
ck.close("all_reduce bool", x, expected_reduce(dist.ReduceOp.SUM, torch.bool, 10))
x = data(rank, 16, torch.float32).to(dev)
ck.run("premul_sum", lambda: dist.all_reduce(x, op=dist._make_nccl_premul_sum(0.5)))
ck.close("premul_sum", x, expected_reduce(dist.ReduceOp.SUM, torch.float32, 16) * 0.5)
big = torch.zeros(6, 8, device=dev)
big[:, ::2] = data(rank, 24, torch.float32).view(6, 4).to(dev)
view = big[:, ::2]
ck.run("all_reduce non-contiguous", lambda: dist.all_reduce(view))
ck.close(
    "all_reduce non-contiguous",
    view,
    expected_reduce(dist.ReduceOp.SUM, torch.float32, 24).view(6, 4),
)
ck.close("all_reduce non-contiguous (gaps untouched)", big[:, 1::2], torch.zeros(6, 4))
z = torch.empty(0, device=dev)
ck.run("all_reduce empty", lambda: dist.all_reduce(z))

# --- broadcast, reduce -----------------------------------------------------
for dtype in (torch.float32, torch.int64, torch.bfloat16):
    x = data(rank, 33, dtype).to(dev)
    ck.run(f"broadcast {dtype}", dist.broadcast, x, src=1)
    ck.close(f"broadcast {dtype}", x, data(1, 33, dtype))
x = data(rank, 20, torch.float32).to(dev).view(4, 5).t()
ck.run("broadcast non-contiguous", lambda: dist.broadcast(x, src=0))
ck.close("broadcast non-contiguous", x, data(0, 20, torch.float32).view(4, 5).t())
for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
    x = data(rank, 21, torch.float32).to(dev)
    ck.run(f"reduce {op}", dist.reduce, x, dst=0, op=op)
    if rank == 0:
        ck.close(f"reduce {op}", x, expected_reduce(op, torch.float32, 21))

# --- all_gather family -------------------------------------------------------
x = data(rank, 9, torch.float32).to(dev)
outs = [torch.empty(9, device=dev) for _ in R]
ck.run("all_gather", lambda: dist.all_gather(outs, x))
for r in R:
    ck.close(f"all_gather[{r}]", outs[r], data(r, 9, torch.float32))
sizes = [3 + r for r in R]  # uneven
x = data(rank, sizes[rank], torch.int32).to(dev)
outs = [torch.empty(sizes[r], dtype=torch.int32, device=dev) for r in R]
ck.run("all_gather uneven", lambda: dist.all_gather(outs, x))
for r in R:
    ck.close(f"all_gather uneven[{r}]", outs[r], data(r, sizes[r], torch.int32))
x = data(rank, 12, torch.bfloat16).to(dev).view(3, 4)
out = torch.empty(3 * world, 4, dtype=torch.bfloat16, device=dev)
ck.run("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(out, x))
ck.close(
    "all_gather_into_tensor",
    out,
    torch.cat([data(r, 12, torch.bfloat16).view(3, 4) for r in R]),
)
got = [None] * world
ck.run("all_gather_object", lambda: dist.all_gather_object(got, {"rank": rank}))
ck.true("all_gather_object", got == [{"rank": r} for r in R], str(got))
objs = [f"from {rank}", rank] if rank == 0 else [None, None]
ck.run("broadcast_object_list", lambda: dist.broadcast_object_list(objs, src=0))
ck.true("broadcast_object_list", objs == ["from 0", 0], str(objs))

# --- reduce_scatter family ---------------------------------------------------
ins = [data(rank, 8, torch.float32, offset=r).to(dev) for r in R]
out = torch.empty(8, device=dev)
ck.run("reduce_scatter", lambda: dist.reduce_scatter(out, ins))
ck.close("reduce_scatter", out, expected_reduce(dist.ReduceOp.SUM, torch.float32, 8, offset=rank))
ins = [data(rank, sizes[r], torch.float32, offset=r).to(dev) for r in R]  # uneven
out = torch.empty(sizes[rank], device=dev)
ck.run("reduce_scatter uneven", lambda: dist.reduce_scatter(out, ins))
ck.close(
    "reduce_scatter uneven",
    out,
    expected_reduce(dist.ReduceOp.SUM, torch.float32, sizes[rank], offset=rank),
)
for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
    full = torch.cat([data(rank, 6, torch.float32, offset=r) for r in R]).to(dev)
    out = torch.empty(6, device=dev)
    ck.run(f"reduce_scatter_tensor {op}", dist.reduce_scatter_tensor, out, full, op=op)
    ck.close(f"reduce_scatter_tensor {op}", out, expected_reduce(op, torch.float32, 6, offset=rank))

# --- gather, scatter ----------------------------------------------------------
x = data(rank, 5, torch.int64).to(dev)
outs = [torch.empty(5, dtype=torch.int64, device=dev) for _ in R] if rank == 1 else None
ck.run("gather", lambda: dist.gather(x, outs, dst=1))
if rank == 1:
    for r in R:
        ck.close(f"gather[{r}]", outs[r], data(r, 5, torch.int64))
ins = [data(r, 7, torch.float32, offset=3).to(dev) for r in R] if rank == 0 else None
out = torch.empty(7, device=dev)
ck.run("scatter", lambda: dist.scatter(out, ins, src=0))
ck.close("scatter", out, data(rank, 7, torch.float32, offset=3))


# --- all_to_all ----------------------------------------------------------------
def chunk(src: int, dst: int, n: int) -> torch.Tensor:
    return torch.full((n, 2), float(10 * src + dst))


inp = torch.cat([chunk(rank, r, 2) for r in R]).to(dev)
out = torch.empty(2 * world, 2, device=dev)
ck.run("all_to_all_single", lambda: dist.all_to_all_single(out, inp))
ck.close("all_to_all_single", out, torch.cat([chunk(r, rank, 2) for r in R]))


def rows(src: int, dst: int) -> int:  # uneven: src sends 1 + src + dst rows to dst
    return 1 + src + dst


inp = torch.cat([chunk(rank, r, rows(rank, r)) for r in R]).to(dev)
out = torch.empty(sum(rows(r, rank) for r in R), 2, device=dev)
ck.run(
    "all_to_all_single uneven",
    lambda: dist.all_to_all_single(
        out, inp, [rows(r, rank) for r in R], [rows(rank, r) for r in R]
    ),
)
ck.close("all_to_all_single uneven", out, torch.cat([chunk(r, rank, rows(r, rank)) for r in R]))
ins = [chunk(rank, r, 3).to(dev) for r in R]
outs = [torch.empty(3, 2, device=dev) for _ in R]
ck.run("all_to_all", lambda: dist.all_to_all(outs, ins))
for r in R:
    ck.close(f"all_to_all[{r}]", outs[r], chunk(r, rank, 3))

# --- barrier, send/recv -------------------------------------------------------------
ck.run("barrier", lambda: dist.barrier())
peer = 1 - rank
x = data(rank, 11, torch.float32).to(dev)
y = torch.empty(11, device=dev)
if rank == 0:
    ck.run("send", lambda: dist.send(x, dst=1))
    ck.run("recv", lambda: dist.recv(y, src=1))
else:
    ck.run("recv", lambda: dist.recv(y, src=0))
    ck.run("send", lambda: dist.send(x, dst=0))
ck.close("send/recv", y, data(peer, 11, torch.float32))
big_x = torch.full((1 << 20,), float(rank + 1), device=dev)  # 4 MiB each way, at once
big_y = torch.empty(1 << 20, device=dev)
ops = [dist.P2POp(dist.isend, big_x, peer), dist.P2POp(dist.irecv, big_y, peer)]
ck.run("batch_isend_irecv", lambda: [w.wait() for w in dist.batch_isend_irecv(ops)])
ck.close("batch_isend_irecv", big_y, torch.full((1 << 20,), float(peer + 1)))

# --- coalesced (FSDP/DTensor paths), async works and futures -------------------------
a = data(rank, 5, torch.float32).to(dev)
b = data(rank, 6, torch.float32, offset=1).to(dev)
with dist._coalescing_manager(device=dev, async_ops=True) as cm:
    dist.all_reduce(a)
    dist.all_reduce(b)
ck.run("allreduce_coalesced", cm.wait)
ck.close("allreduce_coalesced a", a, expected_reduce(dist.ReduceOp.SUM, torch.float32, 5))
ck.close("allreduce_coalesced b", b, expected_reduce(dist.ReduceOp.SUM, torch.float32, 6, 1))
ins = [data(rank, 4, torch.float32).to(dev), data(rank, 3, torch.float32, offset=2).to(dev)]
outs = [torch.empty(4 * world, device=dev), torch.empty(3 * world, device=dev)]
with dist._coalescing_manager(device=dev, async_ops=True) as cm:
    for o, i in zip(outs, ins, strict=True):
        dist.all_gather_into_tensor(o, i)
ck.run("allgather_into_tensor_coalesced", cm.wait)
ck.close("allgather_coalesced 0", outs[0], torch.cat([data(r, 4, torch.float32) for r in R]))
ck.close("allgather_coalesced 1", outs[1], torch.cat([data(r, 3, torch.float32, 2) for r in R]))
ins = [torch.cat([data(rank, 4, torch.float32, r) for r in R]).to(dev) for _ in range(2)]
outs = [torch.empty(4, device=dev) for _ in range(2)]
with dist._coalescing_manager(device=dev, async_ops=True) as cm:
    for o, i in zip(outs, ins, strict=True):
        dist.reduce_scatter_tensor(o, i)
ck.run("reduce_scatter_tensor_coalesced", cm.wait)
for k in range(2):
    ck.close(
        f"reduce_scatter_coalesced {k}",
        outs[k],
        expected_reduce(dist.ReduceOp.SUM, torch.float32, 4, offset=rank),
    )


def future_then():
    x = data(rank, 8, torch.float32).to(dev)
    work = dist.all_reduce(x, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    ck.close("future.then", fut.wait(), expected_reduce(dist.ReduceOp.SUM, torch.float32, 8) * 2)
    ck.true("work.is_completed", work.is_completed())


ck.run("future.then", future_then)
sub = dist.new_group([0, 1])
x = data(rank, 4, torch.float32).to(dev)
ck.run("new_group all_reduce", lambda: dist.all_reduce(x, group=sub))
ck.close("new_group all_reduce", x, expected_reduce(dist.ReduceOp.SUM, torch.float32, 4))
if style.startswith("cpu:"):
    x = data(rank, 4, torch.float32)
    ck.run("cpu all_reduce (gloo)", lambda: dist.all_reduce(x))
    ck.close("cpu all_reduce (gloo)", x, expected_reduce(dist.ReduceOp.SUM, torch.float32, 4))

info = fd.comm_info()
dist.barrier()
dist.destroy_process_group()
_common.report(
    rank=rank,
    passed=ck.passed,
    failed=ck.failed,
    route=info["route"],
    library=info["library"],
    backend=dist.Backend.default_device_backend_map.get("flagos"),
)
