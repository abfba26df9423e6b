"""A child forked after the device came up cannot use it, and says so."""

from __future__ import annotations

import sys

import pytest
from conftest import NEEDS_OPENCL_PLUGIN, check_ok

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


@pytest.mark.parametrize(
    "backend",
    ["host", pytest.param("opencl", marks=NEEDS_OPENCL_PLUGIN)],
)
def test_a_child_using_inherited_tensors_gets_the_error_and_exits_with_its_status(
    run_python, backend
):
    # Before: on opencl the child hung in the plugin's compile lock (a launch)
    # and then in CLBlast's static destructors at exit (PoCL waits on the
    # parent's threads); on host the launch ran on the parent's stream worker.
    out = check_ok(
        run_python(
            f"""
            import os, sys, torch, flagos_torchfl as ft
            ft.initialize("{backend}")
            x = torch.arange(6.0, device="flagos")
            print("parent", (x * 2 + 1).sum().item(), flush=True)
            pid = os.fork()
            if pid == 0:
                for name, use in [
                    ("launch", lambda: (x + 1).cpu()),
                    ("in_place", lambda: x.add_(1)),
                    ("copy_out", lambda: x.cpu()),
                    ("sync", lambda: torch.flagos.synchronize()),
                ]:
                    try:
                        use()
                        print(name, "worked", flush=True)
                    except RuntimeError as err:
                        print(name, "refused", "forked subprocess" in str(err), flush=True)
                del x
                sys.exit(3)  # a normal exit: atexit hooks, the C exit handlers
            _, status = os.waitpid(pid, 0)
            print("child exit", os.waitstatus_to_exitcode(status), flush=True)
            print("parent", (x + 1).sum().item())
            """,
            timeout=120,
        )
    )
    assert (
        out.split()
        == (
            "parent 36.0 launch refused True in_place refused True copy_out refused True "
            "sync refused True child exit 3 parent 21.0"
        ).split()
    ), out
