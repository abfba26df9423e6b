"""The background compiler pool runs at a lower priority (Note [Background priority]).

Structural, not timed: after a background build, the pool's thread has the
nice value FLAGOS_BACKGROUND_NICE asks for (10 by default) and the calling
thread keeps the process's; 0 leaves the pool at the process's priority; a
bad value is a clear error. The foreground's slowdown under background work
is measured in benchmarks/bench_background.py (docs/benchmarks.md).
"""

from __future__ import annotations

import ast

import pytest
from conftest import BACKEND, check_ok

ROUTES = {f"FLAGOS_OP_{op}": "generated" for op in ("MUL", "ADD", "SIGMOID")}

PROBE = f"""
import os, threading, torch, flagos_torchfl as ft
from flagos_torchfl.backend import wait_for_specializations
ft.initialize({BACKEND!r})
x = torch.randn(1000, device="flagos")
(x * 1.5 + 2.0).sigmoid()  # a generic build here, then a specialized one on the pool
wait_for_specializations()
assert ft.kernel_cache_stats()["devices"][0]["async_builds"] >= 1
def nice(tid):
    with open(f"/proc/self/task/{{tid}}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])
me = threading.get_native_id()
print(nice(me), sorted({{nice(int(t)) for t in os.listdir("/proc/self/task") if int(t) != me}}))
"""


@pytest.mark.parametrize("setting,pool_nice", [(None, 10), ("5", 5), ("0", None)])
def test_the_pool_runs_at_the_nice_value_asked_for(run_python, tmp_path, setting, pool_nice):
    # Host has native kernels for these: route them to the generated tier.
    env = {"FLAGOS_CACHE_DIR": str(tmp_path), "FLAGOS_SPECIALIZE": "eager"} | ROUTES
    if setting is not None:
        env["FLAGOS_BACKGROUND_NICE"] = setting
    caller, others = check_ok(run_python(PROBE, **env)).split(" ", 1)
    assert int(caller) == 0
    others = ast.literal_eval(others)
    if pool_nice is None:
        assert others == [0]
    else:
        assert pool_nice in others


def test_a_bad_nice_value_is_a_clear_error(run_python, tmp_path):
    proc = run_python(PROBE, FLAGOS_CACHE_DIR=str(tmp_path), FLAGOS_BACKGROUND_NICE="25", **ROUTES)
    assert proc.returncode != 0
    assert "FLAGOS_BACKGROUND_NICE" in proc.stderr
