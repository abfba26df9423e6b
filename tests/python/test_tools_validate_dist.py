"""`flagos-torchfl validate --level 4` (DDP on 2 processes through fccl) and `--level 5`
(the regression run of a config file): reports, test-case counts, a broken model named.

Level 4 starts torch.distributed.run itself; the tests keep models tiny and runs short.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from conftest import clean_env
from tool_models.cli import MLP, MODELS, explain, read_json, run_cli

pytestmark = pytest.mark.skipif(
    not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
    reason="this torch has no torch.distributed with gloo",
)

CNN = str(MODELS / "tiny_cnn.py")
BROKEN = str(MODELS / "broken.py")
LEVEL1_CASES = 16  # operators at one dtype (float32)


def _suite(path: Path) -> ET.Element:
    return ET.parse(path).getroot().find("testsuite")


def test_level_4_ddp_matches_one_process_and_reports_scaling(tmp_path):
    report, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = run_cli(
        "validate",
        "--level",
        "4",
        "--model",
        MLP,
        "--backend",
        "host",
        "--dtypes",
        "float32",
        "--steps",
        "5",
        "--ddp-steps",
        "5",
        "--json",
        str(report),
        "--junit",
        str(junit),
    )
    assert proc.returncode == 0, explain(proc)
    data = read_json(report)
    assert data["ok"] and [lv["level"] for lv in data["levels"]] == [1, 2, 3, 4]
    level4 = data["levels"][3]
    assert level4["name"] == "multi-device"
    grads, scaling = level4["cases"]
    assert grads["nprocs"] == 2 and grads["max_abs_diff"] <= 1e-4
    assert grads["rank_spread"] == 0.0 and grads["route"] in ("host", "vendor")
    assert scaling["single_samples_per_s"] > 0 and scaling["ddp_samples_per_s"] > 0
    assert scaling["batch_per_rank"] == 8 and scaling["batch_dim"] == 0  # MLP inputs (8, 16)
    assert scaling["scaling"] == pytest.approx(
        scaling["ddp_samples_per_s"] / scaling["single_samples_per_s"]
    )
    suite = _suite(junit)
    assert int(suite.get("tests")) == LEVEL1_CASES + 1 + 1 + 2 and suite.get("failures") == "0"
    assert "level4.multi-device.gradients" in {tc.get("name") for tc in suite}
    assert "scaling" in proc.stdout and "result: pass" in proc.stdout


def test_level_4_reports_a_rank_that_raises(tmp_path):
    report, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = run_cli(
        "validate",
        "--level",
        "4",
        "--model",
        BROKEN,
        "--backend",
        "host",
        "--dtypes",
        "float32",
        "--ddp-steps",
        "2",
        "--keep-going",
        "--json",
        str(report),
        "--junit",
        str(junit),
    )
    assert proc.returncode == 1, explain(proc)
    level4 = read_json(report)["levels"][3]
    assert not level4["ok"]
    assert (
        "DDP on 2 processes failed: rank 0: RuntimeError: deliberately broken forward"
        in (level4["message"])
    )
    failed = [tc.get("name") for tc in _suite(junit) if tc.find("failure") is not None]
    assert "level4.multi-device.gradients" in failed


def test_level_4_needs_a_model():
    proc = run_cli("validate", "--level", "4", "--backend", "host")
    assert proc.returncode == 1 and "need a model" in proc.stderr


def _config(tmp_path: Path, models: list, suffix: str = ".toml") -> Path:
    path = tmp_path / f"regress{suffix}"
    if suffix == ".json":
        path.write_text(
            json.dumps(
                {"defaults": {"level": 3, "dtypes": ["float32"], "steps": 4}, "models": models}
            )
        )
        return path
    lines = ["[defaults]", "level = 3", 'dtypes = ["float32"]', "steps = 4", ""]
    for spec in models:
        lines += ["[[models]]", f"spec = {json.dumps(spec)}", ""]
    path.write_text("\n".join(lines))
    return path


def test_level_5_two_models_write_both_reports(tmp_path):
    config = _config(tmp_path, [MLP, "tool_models.tiny_cnn:get_model"])
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    proc = run_cli(
        "validate",
        "--level",
        "5",
        "--config",
        str(config),
        "--backend",
        "host",
        "--json",
        str(report),
        "--junit",
        str(junit),
        PYTHONPATH=os.pathsep.join([str(MODELS.parent), clean_env()["PYTHONPATH"]]),
    )
    assert proc.returncode == 0, explain(proc)
    data = read_json(report)
    assert data["ok"] and data["failed"] == []
    assert [m["requested_level"] for m in data["models"]] == [3, 3]
    assert all([lv["level"] for lv in m["levels"]] == [1, 2, 3] for m in data["models"])
    suite = _suite(junit)
    assert int(suite.get("tests")) == 2 * (LEVEL1_CASES + 2) and suite.get("failures") == "0"
    names = [tc.get("name") for tc in suite]
    assert "mlp.py.level3.training.loss curve" in names
    assert "tool_models.tiny_cnn:get_model.level2.inference.outputs" in names
    assert "result: pass" in proc.stdout


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_level_5_fails_naming_the_broken_model(tmp_path, suffix):
    config = _config(tmp_path, [MLP, BROKEN], suffix)
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    proc = run_cli(
        "validate",
        "--level",
        "5",
        "--config",
        str(config),
        "--backend",
        "host",
        "--json",
        str(report),
        "--junit",
        str(junit),
    )
    assert proc.returncode == 1, explain(proc)
    data = read_json(report)
    assert not data["ok"] and data["failed"] == [BROKEN]
    broken = data["models"][1]
    assert broken["failed_level"] == 2
    assert "deliberately broken forward" in broken["levels"][1]["message"]
    assert "broken.py" in proc.stdout and "FAIL" in proc.stdout
    suite = _suite(junit)
    assert int(suite.get("tests")) == 2 * (LEVEL1_CASES + 2)
    failed = [tc.get("name") for tc in suite if tc.find("failure") is not None]
    assert failed and all(name.startswith("broken.py.level") for name in failed)


def test_level_5_rejects_a_bad_config(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text('[[models]]\nspec = "x.py"\nlevle = 2\n')
    proc = run_cli("validate", "--level", "5", "--config", str(config))
    assert proc.returncode == 1 and "unknown key 'levle'" in proc.stderr
    proc = run_cli("validate", "--level", "5")
    assert proc.returncode == 1 and "needs --config" in proc.stderr


def test_level_5_names_a_model_that_does_not_load(tmp_path):
    # The table said "level 0:" for a spec whose file is missing.
    missing = str(tmp_path / "no_such_model.py")
    config = _config(tmp_path, [MLP, missing], ".toml")
    proc = run_cli("validate", "--level", "5", "--config", str(config), "--backend", "host")
    assert proc.returncode == 1, explain(proc)
    row = next(line for line in proc.stdout.splitlines() if "no_such_model.py" in line)
    assert "does not load: " in row and "level 0" not in row


def test_level_4_counts_samples_on_the_batch_dim_given(tmp_path):
    # A seq-first model's dim 0 is the sequence: samples/s took it as the batch.
    report = tmp_path / "v.json"
    proc = run_cli(
        "validate", "--level", "4", "--model", MLP, "--backend", "host", "--dtypes", "float32",
        "--steps", "2", "--ddp-steps", "2", "--batch-dim", "1", "--json", str(report),
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    scaling = read_json(report)["levels"][3]["cases"][1]
    assert scaling["batch_per_rank"] == 16 and scaling["batch_dim"] == 1
