"""Unmodified CUDA scripts (cuda_scripts/) run on the flagos device and agree with the CPU.

Each script runs twice in a fresh interpreter: with FLAGOS_BACKEND=host (no
import of flagos_torchfl in the script: autoload plus the cuda alias do
everything) and, as the reference, on its own CPU path without
FLAGOS_BACKEND. The last line each prints is a JSON object; the checks below
compare them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import socket
import subprocess
import sys

import pytest
from conftest import REPO, clean_env

SCRIPTS = REPO / "tests" / "python" / "cuda_scripts"

# Messages of a torch that tried to use real CUDA, or of an AMP that gave up.
FORBIDDEN = [
    "not compiled with CUDA",
    "Torch not compiled",
    "CUDA is not available",
    "Disabling autocast",
    "no accelerator is found",
    "doesn't have NCCL built in",
]


def run_script(name: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SCRIPTS,
    )


def result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs():
    """name -> (flagos run, CPU reference run), each run once per module."""
    cache: dict[str, tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]] = {}

    def get(name: str, cpu_args: tuple[str, ...] = ("--no-cuda",)):
        if name not in cache:
            flagos = run_script(name, FLAGOS_BACKEND="host")
            reference = run_script(name, *cpu_args)
            for proc in (flagos, reference):
                for text in FORBIDDEN[:3]:
                    assert text not in proc.stdout + proc.stderr, (name, proc.stderr)
            for text in FORBIDDEN:
                assert text not in flagos.stdout + flagos.stderr, (name, flagos.stderr)
            cache[name] = (flagos, reference)
        return cache[name]

    return get


def close(a, b, rel: float) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b, strict=True))
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)


def test_train_amp(runs):
    flagos, reference = (result(p) for p in runs("train_amp.py"))
    assert flagos["device"] == "flagos:0" and flagos["is_cuda"] is True
    assert reference["device"] == "cpu" and reference["is_cuda"] is False
    # float16 autocast on both sides: CUDA's op lists on flagos, the CPU's on the CPU.
    assert close(flagos["losses"], reference["losses"], rel=1e-2)
    assert close(flagos["checksum"], reference["checksum"], rel=1e-2)
    assert flagos["scale"] == reference["scale"] == flagos["saved_scale"]
    assert flagos["losses"][-1] < flagos["losses"][0]


def test_train_amp_legacy_warns_once_and_runs_in_bfloat16(runs):
    flagos_proc, reference_proc = runs("train_amp_legacy.py")
    flagos, reference = result(flagos_proc), result(reference_proc)
    assert flagos["amp"] is True and flagos["logits_dtype"] == "torch.bfloat16"
    assert reference["amp"] is False
    assert flagos_proc.stderr.count("without dtype= runs in float16 on CUDA") == 1
    assert close(flagos["losses"], reference["losses"], rel=2e-2)  # bfloat16 vs float32
    assert flagos["losses"][-1] < flagos["losses"][0]


def test_train_loader(runs):
    flagos, reference = (result(p) for p in runs("train_loader.py"))
    assert flagos["device"] == "flagos:0" and reference["device"] == "cpu"
    assert flagos["pinned"] is True  # pin_memory=True pinned for the flagos device
    assert close(flagos["losses"], reference["losses"], rel=1e-4)
    assert flagos["correct"] == reference["correct"]
    assert close(flagos["running_mean"], reference["running_mean"], rel=1e-3)
    assert flagos["max_memory_allocated"] > 0 and flagos["memory_stats_keys"] is True


def test_checkpoint_resume(runs):
    flagos, reference = (result(p) for p in runs("checkpoint_resume.py"))
    # Dropout draws from the device generator, so (as on a real GPU) the
    # numbers differ from the CPU's; resuming must reproduce them exactly.
    assert flagos["same"] is True and reference["same"] is True
    assert flagos["loaded_device"] == flagos["optimizer_state_device"] == "flagos:0"
    assert flagos["lambda_loaded_is_cuda"] is True
    assert reference["loaded_device"] == "cpu"
    assert all(math.isfinite(v) for v in flagos["resumed"])


def test_device_checks(runs):
    flagos, reference = (result(p) for p in runs("device_checks.py", cpu_args=()))
    assert reference == {
        "cuda_available": False,
        "x_is_cuda": False,
        "param_is_cuda": False,
        "param_device": "cpu",
        "output_matches_cpu": True,
    }
    devices = flagos.pop("devices")
    assert devices == ["flagos:0"] * len(devices)
    assert flagos == {
        "cuda_available": True,
        "x_is_cuda": True,
        "param_is_cuda": True,
        "param_device": "flagos:0",
        "output_matches_cpu": True,
        "device_count": 1,
        "current_device": 0,
        "device_name": "host",
        "total_memory_positive": True,
        "capability": [0, 0],
        "bf16": True,
        "generator_repeats": True,
        "elapsed_ms_nonnegative": True,
        "stream_result": flagos["stream_result"],
        "in_device_ctx": 0,
        "default_device_ctx": "flagos:0",
        "default_device": "flagos:0",
        "memory_grows": True,
        "reserved_after_empty_cache": True,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_env(**extra: str) -> dict[str, str]:
    return {
        "FLAGOS_BACKEND": "host",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
        **extra,
    }


def test_ddp_nccl_one_process():
    proc = run_script("ddp_nccl.py", **_ddp_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1"))
    assert "doesn't have NCCL built in" not in proc.stderr
    if importlib.util.find_spec("flagos_torchfl.distributed") is None:
        # Without the flagos communication backend: a clear error, not torch's.
        assert proc.returncode != 0
        assert (
            "init_process_group('nccl') under the flagos cuda alias needs the flagos" in proc.stderr
        )
        return
    out = result(proc)
    assert out["world_size"] == 1 and out["device"] == "flagos:0"
    # The script sees the backend it asked for (Note [One accelerator identity
    # under the alias]); what runs is fccl.
    assert out["backend"] == "nccl" and "fccl" in out["backend_config"]
    assert "nccl" not in out["backend_config"]
    assert all(math.isfinite(v) for v in out["losses"])


@pytest.mark.skipif(
    importlib.util.find_spec("flagos_torchfl.distributed") is None,
    reason="needs the flagos communication backend (flagos_torchfl.distributed)",
)
def test_ddp_with_a_cuda_device_id():
    """init_process_group(backend, device_id=torch.device("cuda", n)): the device
    is flagos's (torch used to refuse it: "does not match the current
    compilation's accelerator support: flagos")."""
    env = _ddp_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", DDP_DEVICE_ID="1")
    out = result(run_script("ddp_nccl.py", **env))
    assert out["world_size"] == 1 and out["device"] == "flagos:0"
    assert all(math.isfinite(v) for v in out["losses"])


@pytest.mark.skipif(
    importlib.util.find_spec("flagos_torchfl.distributed") is None,
    reason="needs the flagos communication backend (flagos_torchfl.distributed)",
)
def test_ddp_nccl_under_torchrun_two_processes():
    env = _ddp_env(FLAGOS_HOST_DEVICES="2")
    port = env.pop("MASTER_PORT")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            port,
            str(SCRIPTS / "ddp_nccl.py"),
        ],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SCRIPTS,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert sorted(out["device"] for out in lines) == [
        "flagos:0",
        "flagos:1",
    ]  # device_ids=[local_rank]
    single = result(run_script("ddp_nccl.py", **_ddp_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")))
    for out in lines:  # both ranks see the same data: averaged gradients change nothing
        assert out["world_size"] == 2
        assert close(out["losses"], single["losses"], rel=1e-5)
