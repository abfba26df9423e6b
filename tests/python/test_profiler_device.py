"""torch.profiler with device activity: the Kineto child profiler of the core
(csrc/runtime/profiler.cpp) over the plugin's tracing table (flagos/trace.h).

Runs on the backend under test (host by default; scripts/test.sh runs it again
with FLAGOS_BACKEND=opencl): device records of each kernel, copy and fill are in
key_averages() as the self device time of the ATen operator that launched them,
inside the capture window, and in the exported Chrome trace. A plugin without
the table still profiles: CPU rows only, no crash.
"""

from __future__ import annotations

import json

import flagos_torchfl as ft
import pytest
import torch
from conftest import BACKEND, TEST_PLUGIN_DIR, check_ok
from torch.profiler import ProfilerActivity

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _has_device_activity() -> bool:
    return bool(ft.backend_info(verbose=False).get("device_activity"))


needs_device_activity = pytest.mark.skipif(
    not _has_device_activity(),
    reason="the core lacks the Kineto profiler (torch without PrivateUse1ProfilerRegistry) "
    f"or plugin {BACKEND} has no tracing table",
)


def _work() -> None:
    a = torch.randn(64, 64, device="flagos")
    b = torch.randn(64, 64, device="flagos")
    for _ in range(3):
        c = a @ b
        c = c + a
    torch.flagos.synchronize()


def _row(averages, key: str):
    rows = [e for e in averages if e.key == key]
    assert rows, f"no {key} row in {[e.key for e in averages]}"
    return rows[0]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    _work()  # warm: first-call compiles and allocations outside the capture
    with torch.profiler.profile(activities=ACTIVITIES) as prof:
        with torch.profiler.record_function("window"):
            _work()
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, json.loads(path.read_text())


def test_the_host_plugin_has_the_tracing_table():
    if BACKEND not in ("host", "opencl"):
        pytest.skip(f"in-tree plugins only ({BACKEND})")
    info = ft.backend_info(verbose=False)
    # torch 2.13-2.15 have PrivateUse1's profiler registry; 2.11 has not (the
    # build says so: "torch.profiler device activity: off"), and then
    # torch.profiler shows CPU rows only.
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 13):
        assert not info["kineto_profiler"], torch.__version__
        return
    assert info["kineto_profiler"], torch.__version__
    assert info["device_activity"]


@needs_device_activity
@pytest.mark.parametrize("op", ["aten::mm", "aten::add"])
def test_operators_have_self_device_time(profiled, op):
    prof, _ = profiled
    row = _row(prof.key_averages(), op)
    assert row.count == 3
    assert row.self_device_time_total > 0
    assert row.device_time_total >= row.self_device_time_total


@needs_device_activity
def test_device_records_are_children_of_the_operator_that_launched_them(profiled):
    prof, _ = profiled
    mms = [e for e in prof.events() if e.name == "aten::mm"]
    assert len(mms) == 3
    for mm in mms:
        assert mm.kernels, f"aten::mm at {mm.time_range} has no device record"
        assert all(k.duration >= 0 for k in mm.kernels)
    # randn's fill work is not attributed to mm/add: each op has its own.
    adds = [e for e in prof.events() if e.name == "aten::add"]
    assert all(a.kernels for a in adds)


@needs_device_activity
def test_chrome_trace_has_device_events_inside_the_window(profiled):
    _, trace = profiled
    events = trace["traceEvents"]
    window = [e for e in events if e.get("name") == "window" and e.get("ph") == "X"]
    assert window, "no record_function window in the trace"
    start = min(float(w["ts"]) for w in window)
    end = max(float(w["ts"]) + float(w["dur"]) for w in window)
    device = [e for e in events if e.get("cat") in DEVICE_CATS and e.get("ph") == "X"]
    assert any(e["cat"] == "kernel" for e in device), sorted({e.get("cat") for e in events})
    for e in device:
        # Microseconds with fractional part: the window's own rounding only.
        assert float(e["ts"]) >= start - 1, (e, start)
        assert float(e["ts"]) + float(e["dur"]) <= end + 1, (e, end)
    # Linked: every kernel names the correlation id of a CPU op in the trace.
    cpu_ids = {
        e["args"].get("External id")
        for e in events
        if e.get("cat") == "cpu_op" and "args" in e and "External id" in e["args"]
    }
    kernels = [e for e in device if e["cat"] == "kernel"]
    linked = [e for e in kernels if e.get("args", {}).get("External id") in cpu_ids]
    assert linked, kernels[:3]


@needs_device_activity
def test_no_records_without_privateuse1_activity():
    _work()
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        _work()
    assert _row(prof.key_averages(), "aten::mm").self_device_time_total == 0


@needs_device_activity
def test_a_second_profile_sees_only_its_own_work():
    _work()
    with torch.profiler.profile(activities=ACTIVITIES) as prof:
        a = torch.ones(8, 8, device="flagos")
        (a @ a).sum()
        torch.flagos.synchronize()
    averages = prof.key_averages()
    assert _row(averages, "aten::mm").count == 1
    assert "aten::add" not in {e.key for e in averages}


PROFILE_WITHOUT_TABLE = """
import json, torch
import flagos_torchfl as ft
from torch.profiler import ProfilerActivity
ft.initialize()
a = torch.randn(32, 32, device="flagos")
(a @ a).cpu()
with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
    b = a @ a
    torch.flagos.synchronize()
mm = [e for e in p.key_averages() if e.key == "aten::mm"][0]
print(json.dumps({"backend": ft.backend_info(verbose=False)["backend"],
                  "activity": ft.backend_info(verbose=False)["device_activity"],
                  "count": mm.count, "cpu": mm.cpu_time_total,
                  "device": mm.self_device_time_total}))
"""


@pytest.mark.parametrize("plugin", ["skeleton", "abi_1_0"])
def test_a_plugin_without_the_tracing_table_profiles_cpu_rows(run_python, plugin):
    env = {"FLAGOS_BACKEND": plugin}
    if plugin == "abi_1_0":  # built against ABI 1.0: no trace member at all
        lib = TEST_PLUGIN_DIR / "abi_1_0" / "libflagos_test_abi_1_0.so"
        if not lib.exists():
            pytest.skip(f"{lib} is not built")
        env = {"FLAGOS_BACKEND": "test_abi_1_0", "FLAGOS_PLUGIN_PATH": str(lib)}
    out = json.loads(check_ok(run_python(PROFILE_WITHOUT_TABLE, **env)).strip().splitlines()[-1])
    assert out["activity"] is False
    assert out["count"] == 1 and out["cpu"] > 0
    assert out["device"] == 0
