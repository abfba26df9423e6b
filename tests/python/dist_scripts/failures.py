"""Failures must be clear errors, never hangs or crashes.

argv[1]:
  mismatch  ranks pass different sizes/dtypes (collective and send/recv); every
            rank gets an error naming each rank's call, and the group stays
            usable afterwards.
  timeout   rank 1 never arrives at any collective; rank 0 must fail within
            the group timeout (+ margin) with an error naming rank 1.
argv[2]: group timeout in seconds (timeout scenario).
"""

from __future__ import annotations

import datetime
import sys
import time

import _common
import torch
import torch.distributed as dist

scenario = sys.argv[1]
timeout_s = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
rank, world, dev = _common.setup()
dist.init_process_group(
    backend="fccl", timeout=datetime.timedelta(seconds=timeout_s if scenario == "timeout" else 30)
)
errors: dict[str, str] = {}
ck = _common.Checks()


def expect_error(name: str, fn) -> None:
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the message is what we check
        errors[name] = f"{type(err).__name__}: {err}"
        return
    errors[name] = "no error"


def all_reduce_ok(name: str) -> None:
    x = torch.full((3,), float(rank + 1), device=dev)
    ck.run(name, lambda: dist.all_reduce(x))
    ck.close(name, x, torch.full((3,), float(sum(range(1, world + 1)))))


if scenario == "mismatch":
    x = torch.ones(4 if rank == 0 else 8, device=dev)
    expect_error("size", lambda: dist.all_reduce(x))
    all_reduce_ok("after size mismatch")
    y = torch.ones(5, device=dev, dtype=torch.float32 if rank == 0 else torch.int32)
    expect_error("dtype", lambda: dist.all_reduce(y))
    all_reduce_ok("after dtype mismatch")
    if rank == 0:
        expect_error("p2p", lambda: dist.send(torch.ones(4, device=dev), dst=1))
    else:
        expect_error("p2p", lambda: dist.recv(torch.empty(6, device=dev), src=0))
    all_reduce_ok("after p2p mismatch")
elif scenario == "timeout":
    if rank == 0:
        start = time.monotonic()
        x = torch.ones(16, device=dev)
        expect_error("timeout", lambda: dist.all_reduce(x))
        errors["elapsed"] = f"{time.monotonic() - start:.2f}"
    else:
        time.sleep(timeout_s + 3)  # never arrives; leaves after rank 0 gave up
_common.report(rank=rank, errors=errors, passed=ck.passed, failed=ck.failed)
dist.destroy_process_group()
