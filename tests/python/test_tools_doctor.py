"""`flagos-torchfl doctor`: findings with severity and a fix; exit 1 on errors."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from tool_models.cli import explain, read_json, run_cli


def test_two_different_libopencl_on_the_library_path_is_an_error(tmp_path):
    dirs = []
    for name, content in (("a", b"first fake"), ("b", b"second, different fake")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "libOpenCL.so.1").write_bytes(content)
        dirs.append(str(folder))
    report, junit = tmp_path / "doctor.json", tmp_path / "doctor.xml"
    proc = run_cli(
        "doctor",
        "--backend",
        "host",
        "--json",
        str(report),
        "--junit",
        str(junit),
        LD_LIBRARY_PATH=os.pathsep.join(dirs),
    )
    assert proc.returncode == 1, explain(proc)
    data = read_json(report)
    clash = next(f for f in data["findings"] if f["check"] == "library libOpenCL.so.1")
    assert clash["severity"] == "error"
    assert all(d in clash["message"] for d in dirs) and "LD_LIBRARY_PATH" in clash["message"]
    assert "LD_LIBRARY_PATH" in clash["fix"]
    assert data["errors"] >= 1
    assert "library libOpenCL.so.1" in proc.stdout and "fixes:" in proc.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    failed = [tc.get("name") for tc in suite if tc.find("failure") is not None]
    assert "library libOpenCL.so.1" in failed


def test_findings_cover_torch_plugins_versions_and_cache(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    report = tmp_path / "doctor.json"
    proc = run_cli(
        "doctor",
        "--backend",
        "host",
        "--json",
        str(report),
        FLAGOS_CACHE_DIR=str(blocker / "cache"),
    )
    data = read_json(report)
    checks = {f["check"]: f for f in data["findings"]}
    assert checks["torch"]["severity"] == "ok"
    assert checks["PrivateUse1"]["severity"] == "ok"
    assert (
        checks["plugin host"]["severity"] == "ok" and "selected" in checks["plugin host"]["message"]
    )
    assert "ABI 1." in checks["versions"]["message"]
    assert "bfloat16" in checks["autocast host"]["message"]  # host's autocast default
    cache = checks["kernel cache"]
    assert cache["severity"] == "warn" and "FLAGOS_CACHE_DIR" in cache["fix"]
    assert data["backend"] == "host"
    assert proc.returncode == (1 if data["errors"] else 0), explain(proc)
    assert all(f["severity"] in ("ok", "warn", "error") for f in data["findings"])
    assert all(f["fix"] for f in data["findings"] if f["severity"] != "ok")


def test_an_unknown_backend_is_an_error_with_the_reason(tmp_path):
    report = tmp_path / "doctor.json"
    proc = run_cli("doctor", "--backend", "no_such_backend", "--json", str(report))
    assert proc.returncode == 1, explain(proc)
    backend = next(f for f in read_json(report)["findings"] if f["check"] == "backend")
    assert backend["severity"] == "error" and "no_such_backend" in backend["message"]


def test_doctor_flags_an_alias_replacement_torch_cannot_introspect(monkeypatch):
    import torch
    from flagos_torchfl import cuda_alias
    from flagos_torchfl.tools import doctor

    was_active = cuda_alias.is_active()
    cuda_alias.activate()
    try:
        assert [f for f in doctor._alias() if f["severity"] == "error"] == []
        # What broke dynamo on torch 2.14: a stand-in without __wrapped__.
        name = "use_mem_pool" if hasattr(torch.cuda, "use_mem_pool") else "device_count"
        if not hasattr(getattr(torch.cuda, name), "__wrapped__"):
            return  # this torch has no wrapped torch.cuda callable to break
        monkeypatch.setattr(torch.cuda, name, lambda *a, **k: None)
        errors = [f["message"] for f in doctor._alias() if f["severity"] == "error"]
        assert any(f"cuda.{name} lost __wrapped__" in m for m in errors), errors
    finally:
        monkeypatch.undo()
        if not was_active:
            cuda_alias.deactivate()
