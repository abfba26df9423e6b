"""`flagos-torchfl ops`: the catalog and the tier of each overload on a backend."""

from __future__ import annotations

from pathlib import Path

import flagos_torchfl as ft
import pytest
from conftest import REPO
from tool_models.cli import TIERS, explain, read_json, run_cli


def test_ops_table_and_json(tmp_path):
    out = tmp_path / "support.json"
    proc = run_cli("ops", "--backend", "host", "--json", str(out))
    assert proc.returncode == 0, explain(proc)
    assert "backend host" in proc.stdout and "ATen overloads" in proc.stdout
    assert "\033[" not in proc.stdout  # no colour when stdout is not a terminal
    data = read_json(out)
    assert data["backend"] == "host"
    assert set(data["overloads"].values()) <= TIERS
    assert data["summary"]["overloads"] == len(data["overloads"])
    if data["catalog"]:
        assert data["overloads"]["aten::add.Tensor"] in TIERS
        ids = {op["id"]: op for op in data["ops"]}
        if Path(ft.__file__).resolve().is_relative_to(REPO):  # ops/catalog.yaml is readable
            assert "float32" in ids["add"]["dtypes"] and ids["add"]["family"] == "pointwise"
        assert ids["add"]["native"] == ("add" in data["native_ids"])
        assert any(line.split()[:1] == ["add"] for line in proc.stdout.splitlines())


def test_routing_overrides_show_in_the_support_list(tmp_path):
    out = tmp_path / "support.json"
    proc = run_cli(
        "ops", "--json", str(out), "-q", FLAGOS_BACKEND="host", FLAGOS_OP_RELU="fallback"
    )
    data = read_json(out)
    if not data["catalog"]:
        pytest.skip("core built without the catalog")
    assert proc.returncode == 0, explain(proc)
    relu = next(op for op in data["ops"] if op["id"] == "relu")
    assert {o["route"] for o in relu["overloads"].values()} == {"fallback"}
    assert data["overloads"]["aten::relu"] == "fallback"


def test_support_list_api_in_process_and_for_another_backend():
    from flagos_torchfl.tools import ops

    here = ops.support_list()  # the test process runs `host`
    assert here["backend"] == "host" and isinstance(here["overloads"], dict)
    assert ft.is_initialized()
    with pytest.raises(RuntimeError, match="ops --backend no_such_backend failed"):
        ops.support_list("no_such_backend")  # asked in a subprocess, which fails


FLOATING = ("float32", "float64", "float16", "bfloat16")


def probed_rows(backend: str, family: str) -> dict[str, dict]:
    from flagos_torchfl.tools import ops

    data = ops.support_list(backend, probe=True, family=family)
    if not data["catalog"]:
        pytest.skip("core built without the catalog")
    assert data["probed"], "the probe called nothing"
    return {op["id"]: op for op in data["ops"] if op["family"] == family}


def test_native_gemm_claims_hold_in_every_floating_dtype_when_called():
    """Note [Probed tiers]: `ops` said "native" for the host's bf16/fp16 GEMMs,
    which ran on the host fallback. Every GEMM overload the table predicts
    native must run native in every floating dtype when called."""
    rows = probed_rows("host", "gemm")
    checked = 0
    for op in rows.values():
        for name, overload in op["overloads"].items():
            if overload["tier"] != "native":
                continue
            for dtype, tier in op["dtype_tiers"].items():
                if dtype in FLOATING:
                    assert tier == "native", (name, dtype, op["dtype_tiers"])
                    checked += 1
    assert checked >= 4 * 6  # mm, addmm, bmm, baddbmm, addmv, dot, mv in four dtypes


def test_probe_shows_the_tier_each_dtype_runs_on_opencl(tmp_path):
    """opencl's GEMM (CLBlast) is float only: the table says so per dtype
    (half types through the float GEMM, Note [Composite kernels])."""
    if not (Path(ft.__file__).resolve().parent / "plugins" / "libflagos_opencl.so").exists():
        pytest.skip("the opencl plugin is not built")
    out = tmp_path / "support.json"
    proc = run_cli("ops", "--backend", "opencl", "--family", "gemm", "--probe", "--json", str(out))
    assert proc.returncode == 0, explain(proc)
    mm = next(op for op in read_json(out)["ops"] if op["id"] == "mm")
    assert mm["dtype_tiers"]["float32"] == "native"
    assert mm["dtype_tiers"]["bfloat16"] == mm["dtype_tiers"]["float16"] == "decomposition"
    line = next(line for line in proc.stdout.splitlines() if line.split()[:1] == ["mm"])
    assert "f32,f64 native" in line and "f16,bf16 decomposition" in line, line


def test_colour_only_on_a_terminal_without_no_color(monkeypatch):
    from flagos_torchfl.tools import _output

    class Terminal:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert _output.use_colour(Terminal()) and not _output.use_colour(open(__file__))
    assert _output.paint("fallback", "fallback", True) == "\033[31mfallback\033[0m"
    assert _output.paint("fallback", "fallback", False) == "fallback"
    monkeypatch.setenv("NO_COLOR", "1")
    assert not _output.use_colour(Terminal())


@pytest.mark.parametrize(
    "args",
    [("ops", "--tier", "fallbak"), ("ops", "--family", "pointwyse"), ("validate", "--level", "9")],
)
def test_unknown_choice_is_a_usage_error(args):
    # An empty table with exit 0 read as "no fallbacks" in a CI script.
    proc = run_cli(*args)
    assert proc.returncode == 2, explain(proc)
    assert "invalid choice" in proc.stderr and proc.stdout == ""


def test_version_and_help_with_defaults():
    proc = run_cli("--version")
    assert proc.returncode == 0, explain(proc)
    assert proc.stdout.startswith(f"flagos-torchfl {ft.__version__} (torch ")
    help_text = run_cli("validate", "--help").stdout
    assert "(default: 0.05)" in help_text  # --lr
    assert "torchvision:NAME" in help_text and "timm:NAME" in help_text
    assert "(default: None)" not in help_text
