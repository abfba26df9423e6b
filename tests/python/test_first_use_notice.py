"""Note [First-use build notice]: the first synchronous kernel build of a process
prints one line on a terminal's stderr, and nothing to a pipe or a log."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import textwrap

import pytest
from conftest import BACKEND, clean_env

CODE = textwrap.dedent(
    """
    import torch, flagos_torchfl as ft
    ft.initialize("host")
    x = torch.randn(1000, device="flagos")
    for _ in range(3):
        torch.erf(x); torch.flagos.synchronize()
    torch.exp(x); torch.flagos.synchronize()  # a second generated kernel: no second line
    print("done")
    """
)
NOTICE = "[flagos] building device kernels on first use"


def run(tmp_path, tty: bool) -> str:
    env = clean_env(
        FLAGOS_CACHE_DIR=str(tmp_path / "kernels"),
        FLAGOS_OP_ERF="generated",
        FLAGOS_OP_EXP="generated",
    )
    if not tty:
        proc = subprocess.run(
            [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", CODE], env=env, stdout=subprocess.PIPE, stderr=follower
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=300) == 0
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.skipif(BACKEND != "host", reason="the child runs the host plugin's C compiler")
def test_first_use_build_notice_on_a_terminal_only(tmp_path):
    on_tty = run(tmp_path / "a", tty=True)
    assert on_tty.count(NOTICE) == 1, on_tty
    assert str(tmp_path / "a" / "kernels") in on_tty
    assert NOTICE not in run(tmp_path / "b", tty=False)
