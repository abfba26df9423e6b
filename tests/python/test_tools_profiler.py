"""torch.profiler on the flagos device (csrc/runtime/profiler.cpp) and `bench --profile`.

The legacy path, torch.autograd.profiler.profile(use_device="flagos"), reaches the
core's PrivateUse1 ProfilerStubs and reports device time per operator. The Kineto
path, torch.profiler.profile(activities=[CPU, PrivateUse1]), gets device activity
from the core's IActivityProfiler over the plugin's tracing table (flagos/trace.h;
tests/python/test_profiler_device.py covers it in depth); `bench --profile` takes it
where the backend has the table.
"""

from __future__ import annotations

import torch
from tool_models.cli import MLP, explain, read_json, run_cli
from torch.profiler import ProfilerActivity


def _matmuls(n: int = 3) -> None:
    a = torch.randn(64, 64, device="flagos")
    b = torch.randn(64, 64, device="flagos")
    for _ in range(n):
        a = a @ b
    torch.flagos.synchronize()


def _row(averages, key: str):
    rows = [e for e in averages if e.key == key]
    assert rows, f"no {key} row in {[e.key for e in averages]}"
    return rows[0]


def test_legacy_profiler_reports_device_time_for_flagos_ops():
    _matmuls(1)  # warm: allocation and first-call work outside the profile
    with torch.autograd.profiler.profile(use_device="flagos") as prof:
        _matmuls(3)
    averages = prof.key_averages()
    mm = _row(averages, "aten::mm")
    assert mm.count == 3
    assert mm.cpu_time_total > 0
    assert mm.device_time_total > 0 and mm.self_device_time_total > 0
    table = averages.table(sort_by="self_device_time_total")
    assert "FLAGOS" in table and "aten::mm" in table


def test_kineto_profiler_with_privateuse1_reports_device_time():
    _matmuls(1)
    activities = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    with torch.profiler.profile(activities=activities) as prof:
        _matmuls(3)
    mm = _row(prof.key_averages(), "aten::mm")
    assert mm.count == 3 and mm.cpu_time_total > 0
    # The core's REGISTER_PRIVATEUSE1_PROFILER over the host plugin's tracing table.
    assert mm.self_device_time_total > 0


def test_bench_profile_prints_the_profiler_table_next_to_the_op_table(tmp_path):
    report = tmp_path / "b.json"
    proc = run_cli(
        "bench",
        MLP,
        "--backend",
        "host",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--train",
        "--profile",
        "--json",
        str(report),
    )
    assert proc.returncode == 0, explain(proc)
    # Kineto's device-count noise under a CUDA-build torch without a GPU
    # (torch 2.15.0 in the matrix run) stays out of the output.
    assert "gpuGetDeviceCount" not in proc.stderr + proc.stdout
    assert "per operator (one step" in proc.stdout
    assert (
        "torch profiler (one step, torch.profiler, CPU + PrivateUse1 activity, "
        "by self device time)" in proc.stdout
    )
    assert "Self FLAGOS" in proc.stdout
    data = read_json(report)
    rows = {r["op"]: r for r in data["profile"]["rows"]}
    assert rows["aten::addmm"]["calls"] == 2 and rows["aten::addmm"]["device_total_us"] > 0
    assert data["profile"]["sort"] == "device"
    assert data["profile"]["via"] == "torch.profiler, CPU + PrivateUse1 activity"
    selfs = [r["self_device_us"] for r in data["profile"]["rows"]]
    assert selfs == sorted(selfs, reverse=True)
