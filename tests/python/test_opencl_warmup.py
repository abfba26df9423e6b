"""The opencl plugin's SDK warm-up thread (Note [SDK warm-up] in
backends/opencl/warmup.cpp) and its FLAGOS_OPENCL_WARMUP switch, plus GEMM
with beta == 0 over a NaN output now that mm runs without a zeroing kernel.

Each case runs in a fresh interpreter: the warm-up starts at initialize(),
once per process. Skipped where the opencl plugin is not built or finds no
device.
"""

from __future__ import annotations

import pytest
from conftest import NEEDS_OPENCL_PLUGIN, check_ok, python_subprocess

pytestmark = NEEDS_OPENCL_PLUGIN

PREFIX = "flagos opencl warm-up:"


@pytest.fixture(scope="module")
def opencl():
    proc = python_subprocess(
        "import flagos_torchfl as ft; ft.initialize('opencl')",
        FLAGOS_OPENCL_WARMUP="off",
    )
    if proc.returncode != 0:
        pytest.skip(f"opencl backend unavailable: {proc.stderr.strip()[-300:]}")


def test_exit_right_after_initialize_is_clean(opencl):
    # The warm-up is still running when the interpreter exits: the exit
    # hooks stop it after the step in flight, and the process exits 0.
    proc = python_subprocess(
        "import flagos_torchfl as ft; ft.initialize('opencl')",
        FLAGOS_OPENCL_WARMUP="verbose",
    )
    check_ok(proc)
    assert PREFIX in proc.stderr
    assert "done after" in proc.stderr or "stopped after" in proc.stderr


def test_off_starts_no_warmup_and_ops_work(opencl):
    proc = python_subprocess(
        """
        import torch, flagos_torchfl as ft
        ft.initialize('opencl')
        a, b = torch.randn(33, 17), torch.randn(17, 9)
        bias = torch.randn(9)
        got = torch.addmm(bias.to('flagos'), a.to('flagos'), b.to('flagos')).cpu()
        torch.testing.assert_close(got, torch.addmm(bias, a, b), rtol=1e-4, atol=1e-4)
        print('ok')
        """,
        FLAGOS_OPENCL_WARMUP="off",
    )
    assert check_ok(proc).strip() == "ok"
    assert PREFIX not in proc.stderr


def test_calls_during_the_warmup_are_correct(opencl):
    # GEMMs in every transpose and dtype right after initialize(), while the
    # warm-up builds the same CLBlast programs on its own queue.
    proc = python_subprocess(
        """
        import time, torch, flagos_torchfl as ft
        ft.initialize('opencl')
        for dt in (torch.float32, torch.float64):
            for ta in (False, True):
                for tb in (False, True):
                    a = torch.randn(20, 12, dtype=dt)
                    b = torch.randn(12, 7, dtype=dt)
                    a = a.t().contiguous().t() if ta else a
                    b = b.t().contiguous().t() if tb else b
                    got = torch.mm(a.to('flagos'), b.to('flagos')).cpu()
                    torch.testing.assert_close(got, a @ b, rtol=1e-4, atol=1e-4)
        x = torch.randn(3, 5, 4)
        y = torch.randn(3, 4, 6)
        torch.testing.assert_close(torch.bmm(x.to('flagos'), y.to('flagos')).cpu(),
                                   torch.bmm(x, y), rtol=1e-4, atol=1e-4)
        print('ok')
        """,
        FLAGOS_OPENCL_WARMUP="verbose",
    )
    assert check_ok(proc).strip() == "ok"
    assert PREFIX in proc.stderr


def test_garbage_value_is_reported(opencl):
    proc = python_subprocess(
        "import flagos_torchfl as ft; ft.initialize('opencl')",
        FLAGOS_OPENCL_WARMUP="sometimes",
    )
    assert proc.returncode != 0
    assert "FLAGOS_OPENCL_WARMUP" in proc.stderr


def test_beta_zero_ignores_nan_in_the_output(opencl):
    # mm/bmm no longer zero the output first: CLBlast >= 0.9 does not read C
    # when beta == 0, on its direct (small) and indirect (large) kernels.
    proc = python_subprocess(
        """
        import torch, flagos_torchfl as ft
        ft.initialize('opencl')
        for n in (8, 256, 520):
            a, b = torch.randn(n, n), torch.randn(n, n)
            out = torch.full((n, n), float('nan')).to('flagos')
            torch.mm(a.to('flagos'), b.to('flagos'), out=out)
            torch.testing.assert_close(out.cpu(), a @ b, rtol=1e-3, atol=1e-3)
        x, y = torch.randn(4, 130, 70), torch.randn(4, 70, 90)
        out = torch.full((4, 130, 90), float('nan')).to('flagos')
        torch.bmm(x.to('flagos'), y.to('flagos'), out=out)
        torch.testing.assert_close(out.cpu(), torch.bmm(x, y), rtol=1e-3, atol=1e-3)
        bias = torch.full((90,), float('nan'))
        m1, m2 = torch.randn(130, 70), torch.randn(70, 90)
        got = torch.addmm(bias.to('flagos'), m1.to('flagos'), m2.to('flagos'), beta=0).cpu()
        torch.testing.assert_close(got, m1 @ m2, rtol=1e-3, atol=1e-3)
        print('ok')
        """,
    )
    assert check_ok(proc).strip() == "ok"


def test_child_forked_during_the_warmup_exits_cleanly(opencl):
    # The parent's warm-up thread does not exist in the child: the child's
    # exit hooks must not join it (pthread_atfork makes the child forget it).
    proc = python_subprocess(
        """
        import os, sys, flagos_torchfl as ft
        ft.initialize('opencl')
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        print('child', os.waitstatus_to_exitcode(status))
        """,
        timeout=120,
        FLAGOS_OPENCL_WARMUP="on",
    )
    assert check_ok(proc).strip().splitlines()[-1] == "child 0"
