"""When the cuda alias is on and when it must stay off; autoload and `flagos-torchfl run`.

Start-up paths run in fresh interpreters (run_python); the native-CUDA
decision is tested in this process by replacing the probe.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import REPO, check_ok, clean_env
from flagos_torchfl import cuda_alias

# torch's own error for a CUDA tensor without CUDA: a CPU build is not
# compiled with it, a CUDA wheel (2.14+) finds no driver.
NATIVE_CUDA_ERRORS = ("not compiled with CUDA", "Found no NVIDIA driver")

PROBE = """
    import json, torch
    {setup}
    from flagos_torchfl import cuda_alias
    out = {{"status": cuda_alias.status(), "cuda_available": torch.cuda.is_available()}}
    try:
        out["cuda_tensor"] = str(torch.zeros(1, device="cuda").device)
    except Exception as err:
        out["cuda_tensor"] = type(err).__name__ + ": " + str(err)
    try:
        out["flagos_tensor"] = str(torch.ones(1, device="flagos").device)
    except RuntimeError as err:
        out["flagos_tensor"] = str(err)
    print(json.dumps(out))
"""


def probe(run_python, setup: str = "", **env) -> dict:
    proc = run_python(PROBE.format(setup=setup), **env)
    return json.loads(check_ok(proc).strip().splitlines()[-1])


# ------------------------------------------------------------------ fresh processes


def test_autoload_turns_the_alias_on(run_python):
    # No import of flagos_torchfl: torch's backend autoload does it all.
    out = probe(run_python, FLAGOS_BACKEND="host")
    assert out["status"]["active"] and "FLAGOS_BACKEND=host" in out["status"]["reason"]
    assert out["cuda_available"] and out["cuda_tensor"] == "flagos:0"


def test_explicit_initialize_turns_the_alias_on_without_native_cuda(run_python):
    out = probe(run_python, "import flagos_torchfl as ft; ft.initialize('host')")
    assert out["status"] == {
        "active": True,
        "reason": "no usable native CUDA",
        "native_cuda": False,
        "patched_attributes": out["status"]["patched_attributes"],
    }
    assert out["cuda_tensor"] == "flagos:0"


@pytest.mark.parametrize("how", ["autoload", "initialize"])
def test_flagos_alias_cuda_0_keeps_it_off(run_python, how):
    setup = "import flagos_torchfl as ft; ft.initialize('host')" if how == "initialize" else ""
    env = {"FLAGOS_ALIAS_CUDA": "0"}
    if how == "autoload":
        env["FLAGOS_BACKEND"] = "host"
    out = probe(run_python, setup, **env)
    assert out["status"]["active"] is False
    assert out["status"]["reason"] == "FLAGOS_ALIAS_CUDA=0"
    assert out["status"]["patched_attributes"] == 0
    assert out["cuda_available"] is False
    # torch's own behaviour, untouched
    assert any(e in out["cuda_tensor"] for e in NATIVE_CUDA_ERRORS), out["cuda_tensor"]
    assert out["flagos_tensor"] == "flagos:0"


def test_nothing_happens_without_a_backend(run_python):
    out = probe(run_python, "import flagos_torchfl")
    assert out["status"]["active"] is False
    assert out["cuda_available"] is False


def test_amp_dtype_from_the_environment(run_python):
    code = """
        import json, torch, warnings
        from flagos_torchfl import amp
        p = amp.get_policy()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with torch.autocast("cuda"):
                y = torch.nn.Linear(2, 2).cuda()(torch.ones(1, 2, device="cuda"))
        print(json.dumps({"dtype": str(p.dtype), "source": p.source, "out": str(y.dtype),
                          "warned": any("without dtype=" in str(x.message) for x in w)}))
    """
    out = json.loads(
        check_ok(run_python(code, FLAGOS_BACKEND="host", FLAGOS_AMP_DTYPE="fp16")).split("\n")[-2]
    )
    assert out == {
        "dtype": "torch.float16",
        "source": "FLAGOS_AMP_DTYPE=fp16",
        "out": "torch.float16",
        "warned": False,
    }


# ------------------------------------------------------------------ the decision, in this process


@pytest.fixture
def decision_sandbox(monkeypatch):
    """Alias off and a clean environment for the test; the session's state back afterwards."""
    was_active = cuda_alias.is_active()
    cuda_alias.deactivate()
    for name in ("FLAGOS_BACKEND", "FLAGOS_ALIAS_CUDA"):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    cuda_alias.deactivate()
    monkeypatch.undo()
    if was_active:
        cuda_alias.activate()


def test_native_cuda_keeps_the_alias_off(decision_sandbox):
    decision_sandbox.setattr(cuda_alias, "native_cuda_available", lambda: True)
    original = torch.cuda.is_available
    decision = cuda_alias.activate_cuda_alias()
    assert not decision.active and "native CUDA is available" in decision.reason
    assert not cuda_alias.is_active()
    assert torch.cuda.is_available is original and cuda_alias.status()["patched_attributes"] == 0


@pytest.mark.parametrize(
    "env, active",
    [
        ({"FLAGOS_BACKEND": "host"}, True),
        ({"FLAGOS_ALIAS_CUDA": "1"}, True),
        ({"FLAGOS_ALIAS_CUDA": "auto"}, False),
        ({"FLAGOS_BACKEND": "host", "FLAGOS_ALIAS_CUDA": "0"}, False),
        ({"FLAGOS_ALIAS_CUDA": "off"}, False),
    ],
)
def test_what_forces_the_alias_next_to_native_cuda(decision_sandbox, env, active):
    decision_sandbox.setattr(cuda_alias, "native_cuda_available", lambda: True)
    for name, value in env.items():
        decision_sandbox.setenv(name, value)
    assert cuda_alias.activate_cuda_alias().active is active
    assert cuda_alias.is_active() is active
    assert torch.cuda.is_available() is active  # the real one is False on this machine


def test_a_bad_setting_is_an_error(decision_sandbox):
    decision_sandbox.setenv("FLAGOS_ALIAS_CUDA", "maybe")
    with pytest.raises(ValueError, match="FLAGOS_ALIAS_CUDA='maybe'"):
        cuda_alias.decide()


@pytest.mark.parametrize(
    "built, available, expected",
    [(False, False, False), (True, False, False), (True, True, True)],
    ids=["cpu-only torch", "cuda build without gpu", "working cuda"],
)
def test_native_cuda_probe(decision_sandbox, built, available, expected):
    decision_sandbox.setattr(cuda_alias, "_native_probe_result", None)
    decision_sandbox.setattr(torch.backends.cuda, "is_built", lambda: built)
    decision_sandbox.setattr(torch.cuda, "is_available", lambda: available)
    assert cuda_alias.native_cuda_available() is expected


# ------------------------------------------------------------------ flagos-torchfl run

SCRIPT = """
import json, os, subprocess, sys
import torch
assert __name__ == "__main__"
child = subprocess.run([sys.executable, "-c",
    "import torch; print(torch.zeros(1, device='cuda').device)"], capture_output=True, text=True)
print(json.dumps({"argv": sys.argv, "device": str(torch.ones(2).cuda().device),
                  "child": child.stdout.strip(), "backend": os.environ.get("FLAGOS_BACKEND")}))
code = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0
if len(sys.argv) > 1 and sys.argv[1] == "boom":
    raise ValueError("boom from the script")
sys.exit(code)
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def run_cli(args, **env):
    return subprocess.run(
        args, env=clean_env(**env), capture_output=True, text=True, timeout=300, cwd=REPO
    )


def test_run_passes_arguments_and_sets_up_children(script):
    proc = run_cli(
        [
            sys.executable,
            "-m",
            "flagos_torchfl",
            "run",
            "--backend",
            "host",
            str(script),
            "--lr",
            "0.1",
        ]
    )
    out = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert out["argv"] == [str(script), "--lr", "0.1"]
    assert out["device"] == "flagos:0"
    assert out["backend"] == "host" and out["child"] == "flagos:0"  # exported, autoloaded


@pytest.mark.parametrize("argument, status", [("0", 0), ("3", 3), ("boom", 1)])
def test_run_returns_the_script_exit_status(script, argument, status):
    proc = run_cli(
        [sys.executable, "-m", "flagos_torchfl", "run", "--backend", "host", str(script), argument]
    )
    assert proc.returncode == status, proc.stderr
    if argument == "boom":
        assert "ValueError: boom from the script" in proc.stderr
        assert str(script) in proc.stderr and "runpy" not in proc.stderr


def test_run_a_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(
        "import sys, torch\nprint(torch.zeros(1, device='cuda').device, sys.argv[1:])\n"
    )
    proc = run_cli(
        [sys.executable, "-m", "flagos_torchfl", "run", "-m", "pkg.train", "x"],
        PYTHONPATH=f"{clean_env()['PYTHONPATH']}:{tmp_path}",
    )
    assert check_ok(proc).strip().splitlines()[-1] == "flagos:0 ['x']"


def test_run_a_missing_script():
    proc = run_cli([sys.executable, "-m", "flagos_torchfl", "run", "/nonexistent/train.py"])
    assert proc.returncode == 2 and "can't open file" in proc.stderr


@pytest.mark.skipif(shutil.which("flagos-torchfl") is None, reason="console script not installed")
def test_console_script_run(script):
    proc = run_cli(["flagos-torchfl", "run", str(script)])
    assert json.loads(check_ok(proc).strip().splitlines()[-1])["device"] == "flagos:0"


def test_run_with_the_alias_turned_off(script, tmp_path):
    plain = tmp_path / "plain.py"
    plain.write_text(
        textwrap.dedent("""
        import torch
        print(torch.cuda.is_available(), torch.ones(1, device="flagos").device)
    """)
    )
    proc = run_cli(
        [sys.executable, "-m", "flagos_torchfl", "run", str(plain)], FLAGOS_ALIAS_CUDA="0"
    )
    assert check_ok(proc).strip().splitlines()[-1] == "False flagos:0"
