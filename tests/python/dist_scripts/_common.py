"""Shared set-up of the distributed worker scripts (tests/python/test_distributed*.py).

Workers follow torchrun's environment contract (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; the tests start them directly, or through torchrun), bring the
host backend up with one device per rank (FLAGOS_HOST_DEVICES=2, set by the
test) and use device `flagos:<rank>`. Each prints one line
`RESULT <json>` that the test parses.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import flagos_torchfl as ft
import torch


def setup(backend: str = "host", set_device: bool = True):
    """Initialize flagos; returns (rank, world_size, device).

    set_device=False leaves the current device alone, as pytorch/examples'
    FSDP2 example does (DeviceMesh then picks it from LOCAL_RANK).
    """
    ft.initialize(backend)
    from flagos_torchfl import distributed as fd

    fd.register()  # idempotent; initialize() may already have done it
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    device = torch.device("flagos", rank % torch.flagos.device_count())
    if set_device:
        torch.flagos.set_device(device)
    return rank, world, device


class Checks:
    """Collects failed expectations instead of stopping at the first."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []

    def close(self, name: str, actual: torch.Tensor, expected: torch.Tensor, **tol) -> None:
        try:
            torch.testing.assert_close(actual.cpu(), expected.cpu(), **tol)
            self.passed += 1
        except Exception as err:  # noqa: BLE001 - recorded, reported at the end
            self.failed.append(f"{name}: {err}".splitlines()[0] + " | " + str(err)[-300:])

    def true(self, name: str, value: bool, detail: str = "") -> None:
        if value:
            self.passed += 1
        else:
            self.failed.append(f"{name}: {detail}")

    def run(self, name: str, fn, *args, **kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:  # noqa: BLE001
            self.failed.append(
                f"{name}: raised {traceback.format_exc().strip().splitlines()[-1][-1500:]}"
            )


def report(**fields) -> None:
    print("RESULT " + json.dumps(fields), flush=True)
    sys.stdout.flush()
