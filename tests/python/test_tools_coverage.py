"""`flagos-torchfl coverage`: the ATen ops a model uses and the tier each would take."""

from __future__ import annotations

import json
from pathlib import Path

import flagos_torchfl as ft
import pytest
from tool_models.cli import MLP, SPECIAL, TIERS, explain, read_json, run_cli
from tool_models.cli import MODELS as MODELS_DIR


def test_an_op_outside_the_catalog_is_reported_as_fallback_and_fails(tmp_path):
    report, md = tmp_path / "cov.json", tmp_path / "cov.md"
    proc = run_cli(
        "coverage",
        SPECIAL,
        "--backend",
        "host",
        "--json",
        str(report),
        "--markdown",
        str(md),
        "--fail-on",
        "fallback",
    )
    assert proc.returncode == 1, explain(proc)
    data = read_json(report)
    assert data["backends"] == ["host"]
    ops = {r["op"]: r for r in data["ops"]}
    bessel = ops["aten::special_bessel_j0"]
    assert bessel["tiers"] == {"host": "fallback"} and bessel["in_catalog"] is False
    assert bessel["calls"] == 1 and bessel["dtypes"] == ["float32"]
    assert "aten::addmm" in ops and "aten::mm" in ops  # forward and backward of the Linear
    assert all(t in TIERS for r in data["ops"] for t in r["tiers"].values())
    assert "would take fallback or worse" in proc.stdout
    assert "aten::special_bessel_j0" in proc.stdout.split("would take fallback or worse")[1]
    text = md.read_text()
    assert "| `aten::special_bessel_j0` | 1 | float32 | fallback |" in text
    assert "# Operator coverage" in text


def test_coverage_intersects_with_a_saved_support_list(tmp_path):
    support = tmp_path / "host.json"
    assert run_cli("ops", "--backend", "host", "--json", str(support), "-q").returncode == 0
    report = tmp_path / "cov.json"
    proc = run_cli("coverage", MLP, "--support", str(support), "--json", str(report))
    assert proc.returncode == 0, explain(proc)  # no --fail-on: a report, not a verdict
    data = read_json(report)
    assert data["backends"] == ["host"]
    ops = {r["op"]: r for r in data["ops"]}
    assert ops["aten::view"]["tiers"]["host"] == "core"  # the core's own kernel
    assert ops["aten::t"]["tiers"]["host"] == "decomposition"  # ATen's composite
    summary = data["summary"]["host"]
    assert sum(s["ops"] for s in summary.values()) == len(data["ops"])
    assert "host:" in proc.stdout and "aten::addmm" in proc.stdout


def test_coverage_takes_each_dtypes_tier_from_a_probed_support_list(tmp_path):
    """Note [Probed tiers]: opencl's GEMM is float only, so a bf16 model's
    addmm is a decomposition there, although the overload's predicted tier is
    native; a probed support list (`ops --probe`) says so per dtype."""
    if not (Path(ft.__file__).resolve().parent / "plugins" / "libflagos_opencl.so").exists():
        pytest.skip("the opencl plugin is not built")
    support = tmp_path / "opencl.json"
    proc = run_cli(
        "ops", "--backend", "opencl", "--family", "gemm", "--probe", "--json", str(support), "-q"
    )
    assert proc.returncode == 0, explain(proc)
    assert read_json(support)["overloads"]["aten::addmm"] == "native"  # the prediction
    report = tmp_path / "cov.json"
    model = str(MODELS_DIR / "mlp_bf16.py")
    proc = run_cli("coverage", model, "--support", str(support), "--json", str(report))
    assert proc.returncode == 0, explain(proc)
    ops = {r["op"]: r for r in read_json(report)["ops"]}
    assert ops["aten::addmm"]["dtypes"] == ["bfloat16"]
    assert ops["aten::addmm"]["tiers"]["opencl"] == "decomposition"


def test_bad_model_spec_is_a_clear_error(tmp_path):
    proc = run_cli("coverage", str(tmp_path / "missing.py"))
    assert proc.returncode == 1
    assert "model file not found" in proc.stderr
    proc = run_cli("coverage", f"{MLP}:no_such_function")
    assert proc.returncode == 1 and "has no function no_such_function()" in proc.stderr


def test_predicted_tiers_match_what_runs_on_opencl(tmp_path):
    """The prediction (Note [Predicted tier]) knows the generated tier and the
    composites: for the tiny CNN on opencl it must name the tier op_stats()
    then counts for every catalog overload the model calls."""
    import pytest
    from conftest import python_subprocess
    from tool_models.cli import MODELS

    model = str(MODELS / "tiny_cnn.py")
    report = tmp_path / "cov.json"
    proc = run_cli("coverage", model, "--backend", "opencl", "--json", str(report))
    if proc.returncode != 0 and "opencl" in proc.stderr:
        pytest.skip(f"opencl unavailable: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, explain(proc)
    data = read_json(report)
    assert data["recorded_on"] == "flagos"
    # The static prediction (the report's tier for the device is what ran).
    predicted = {r["op"]: r["predicted"] for r in data["ops"] if r["in_catalog"]}
    ran = python_subprocess(
        f"""
        import json, runpy, torch, flagos_torchfl as ft
        ft.initialize("opencl")
        model, inputs, loss_fn = runpy.run_path({model!r})["get_model"]()
        model = model.to("flagos")
        ft.reset_op_stats()
        loss_fn(model(*[x.to("flagos") for x in inputs])).backward()
        print(json.dumps(ft.op_stats()))
        """,
        timeout=300,
        FLAGOS_CACHE_DIR=str(tmp_path / "kernels"),
    )
    assert ran.returncode == 0, ran.stderr
    stats = json.loads(ran.stdout.strip().splitlines()[-1])
    assert {"generated", "decomposition", "native"} <= set(predicted.values()), predicted
    for op, tier in predicted.items():
        assert list(stats.get(op, {})) == [tier], (op, tier, stats.get(op))


WORD_LM = str(MODELS_DIR / "word_lm.py")


def test_a_word_lm_is_recorded_on_the_device_no_cpu_only_attention(tmp_path):
    # Recorded on CPU, SDPA took _scaled_dot_product_flash_attention_for_cpu
    # and --fail-on fallback failed a model that runs with zero fallbacks.
    report = tmp_path / "cov.json"
    proc = run_cli(
        "coverage", WORD_LM, "--backend", "host", "--fail-on", "fallback", "--json", str(report)
    )
    assert proc.returncode == 0, explain(proc)
    data = read_json(report)
    assert data["recorded_on"] == "flagos" and "recorded on flagos" in proc.stdout
    names = {r["op"] for r in data["ops"]}
    assert not any("for_cpu" in n for n in names), sorted(names)
    assert "aten::embedding" in names
    # Class targets and indices (int64) are not "outside the catalog's dtypes".
    assert "int64 outside" not in proc.stdout
    # Every static prediction agrees with what ran (select_backward was predicted
    # fallback: a hand-written composite taken for a structured op).
    proc = run_cli("coverage", WORD_LM, "--backend", "host", "--verify", "--json", str(report))
    assert proc.returncode == 0, explain(proc)
    assert read_json(report)["verify"]["mismatches"] == []


def test_verify_compares_predictions_with_op_stats(tmp_path):
    report = tmp_path / "cov.json"
    proc = run_cli("coverage", MLP, "--backend", "host", "--verify", "--json", str(report))
    assert proc.returncode == 0, explain(proc)
    v = read_json(report)["verify"]
    assert v["ran"] and v["compared"] > 0 and v["mismatches"] == []
    assert "predicted tiers match op_stats()" in proc.stdout
    # A routing override the static prediction knows: still no mismatch.
    proc = run_cli(
        "coverage", MLP, "--backend", "host", "--verify", "--json", str(report),
        FLAGOS_OP_RELU="fallback",
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    ops = {r["op"]: r for r in read_json(report)["ops"]}
    assert ops["aten::relu"]["tiers"]["host"] == "fallback"
