"""A child forked after the device came up cannot use it, and says so."""

from __future__ import annotations

import sys

import pytest
from conftest import check_ok

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork")


def test_forked_child_is_in_bad_fork_and_refuses_the_device(run_python):
    out = check_ok(
        run_python(
            """
            import os, torch, flagos_torchfl as ft
            ft.initialize("host")
            torch.ones(2, device="flagos").sum().item()   # the device is in use
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                msg = f"bad_fork={torch.flagos._is_in_bad_fork()} cpu_ok={torch.ones(2).sum().item() == 2}"
                try:
                    torch.ones(2, device="flagos")
                    msg += " device=usable"
                except RuntimeError as err:
                    msg += f" device=refused:{'fork' in str(err)}"
                os.write(w, msg.encode())
                os._exit(0)
            os.close(w)
            child = os.read(r, 1000).decode()
            os.waitpid(pid, 0)
            print(child)
            print("parent", torch.flagos._is_in_bad_fork(), torch.ones(2, device="flagos").sum().item())
            """
        )
    )
    child, parent = out.strip().splitlines()[-2:]
    assert child == "bad_fork=True cpu_ok=True device=refused:True"
    assert parent == "parent False 2.0"
