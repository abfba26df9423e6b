"""`flagos-torchfl validate`: levels 1-3 against CPU; a wrong kernel fails the right level.

There is no routing override that makes a kernel *wrong* (FLAGOS_OP_<ID> and
FLAGOS_FORCE_FALLBACK only choose between correct tiers), so the tests
inject one with torch.library over the flagos (PrivateUse1) registration, in
a fresh process that then runs the CLI (tool_models/cli.py, run_cli_after).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tool_models.cli import MLP, explain, read_json, run_cli, run_cli_after

WRONG_SOFTMAX = """
lib = torch.library.Library("aten", "IMPL")
def wrong(x, dim, half_to_float):
    return (torch.softmax(x.cpu(), dim) + 0.1).to(x.device)
lib.impl("_softmax", wrong, "PrivateUse1")
"""

WRONG_RELU_BACKWARD = """
lib = torch.library.Library("aten", "IMPL")
def wrong(grad, x, threshold):
    ref = torch.ops.aten.threshold_backward(grad.cpu(), x.cpu(), threshold)
    return (ref * 0.5).to(grad.device)
lib.impl("threshold_backward", wrong, "PrivateUse1")
"""


def test_all_levels_pass_with_json_and_junit(tmp_path):
    report, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = run_cli(
        "validate",
        "--level",
        "3",
        "--model",
        MLP,
        "--backend",
        "host",
        "--steps",
        "8",
        "--dtypes",
        "float32",
        "--json",
        str(report),
        "--junit",
        str(junit),
    )
    assert proc.returncode == 0, explain(proc)
    data = read_json(report)
    assert data["ok"] and data["failed_level"] is None
    assert [lv["level"] for lv in data["levels"]] == [1, 2, 3]
    names = {c["name"] for c in data["levels"][0]["cases"]}
    assert {
        "conv2d[float32]",
        "matmul[float32]",
        "softmax[float32]",
        "layer_norm[float32]",
        "transpose[float32]",
    } <= names
    inference = data["levels"][1]["cases"][0]
    assert inference["top1_agreement"] == 1.0 and inference["max_abs"] <= 1e-4
    training = data["levels"][2]["cases"][0]
    assert training["steps"] == 8 and len(training["losses"]) == 8
    assert training["loss_last"] < training["loss_first"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert int(suite.get("tests")) == len(names) + 2 and suite.get("failures") == "0"
    assert "result: pass" in proc.stdout


def test_a_wrong_softmax_fails_level_1(tmp_path):
    report = tmp_path / "v.json"
    proc = run_cli_after(
        WRONG_SOFTMAX,
        "validate",
        "--level",
        "3",
        "--model",
        MLP,
        "--steps",
        "5",
        "--dtypes",
        "float32",
        "--json",
        str(report),
    )
    assert proc.returncode == 1, explain(proc)
    data = read_json(report)
    assert data["failed_level"] == 1 and len(data["levels"]) == 1  # the ladder stops there
    failed = [c["name"] for c in data["levels"][0]["cases"] if not c["ok"]]
    assert failed == ["softmax[float32]"]
    assert "softmax float32: flagos differs from CPU, max abs error 0.1" in proc.stdout
    assert "FAIL at level 1" in proc.stdout


def test_a_wrong_relu_backward_passes_levels_1_2_and_fails_training(tmp_path):
    report, junit = tmp_path / "v.json", tmp_path / "v.xml"
    proc = run_cli_after(
        WRONG_RELU_BACKWARD,
        "validate",
        "--level",
        "3",
        "--model",
        MLP,
        "--steps",
        "6",
        "--dtypes",
        "float32",
        "--json",
        str(report),
        "--junit",
        str(junit),
    )
    assert proc.returncode == 1, explain(proc)
    data = read_json(report)
    assert [lv["ok"] for lv in data["levels"]] == [True, True, False]
    assert data["failed_level"] == 3
    assert "the loss leaves the CPU curve" in data["levels"][2]["message"]
    suite = ET.parse(junit).getroot().find("testsuite")
    failed = [tc.get("name") for tc in suite if tc.find("failure") is not None]
    assert failed == ["level3.training.loss curve"]


def test_levels_2_and_3_need_a_model():
    proc = run_cli("validate", "--level", "2", "--backend", "host")
    assert proc.returncode == 1 and "need a model" in proc.stderr
