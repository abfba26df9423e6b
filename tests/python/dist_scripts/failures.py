"""Failures must be clear errors, never hangs or crashes.

argv[1]:
  mismatch  ranks pass different sizes/dtypes (collective and send/recv); every
            rank gets an error naming each rank's call, and the group stays
            usable afterwards.
  timeout   rank 1 never arrives at any collective; rank 0 must fail within
            the group timeout (+ margin) with an error naming rank 1.
  killed    rank 1 trains two steps, then SIGKILLs itself mid-training; rank 0
            must fail within the group timeout (+ margin), never hang.
argv[2]: group timeout in seconds (timeout and killed scenarios).
"""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time

import _common
import torch
import torch.distributed as dist

scenario = sys.argv[1]
timeout_s = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
rank, world, dev = _common.setup()
dist.init_process_group(
    backend="fccl",
    timeout=datetime.timedelta(seconds=timeout_s if scenario in ("timeout", "killed") else 30),
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
elif scenario == "killed":
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    start = None
    for step in range(1000):
        if rank == 1 and step == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-training, no goodbye
        if step == 2:
            start = time.monotonic()
        loss = model(torch.randn(4, 8, device=dev)).square().mean()
        loss.backward()
        try:
            for p in model.parameters():
                dist.all_reduce(p.grad)
        except Exception as err:  # noqa: BLE001 - the message is what we check
            errors["killed"] = f"{type(err).__name__}: {err}"
            errors["elapsed"] = f"{time.monotonic() - (start or time.monotonic()):.2f}"
            break
        opt.step()
        opt.zero_grad()
    else:
        errors["killed"] = "no error in 1000 steps"
_common.report(rank=rank, errors=errors, passed=ck.passed, failed=ck.failed)
dist.destroy_process_group()
