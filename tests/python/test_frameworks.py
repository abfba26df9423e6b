"""The frameworks people train with, unmodified, on flagos under the cuda alias
(docs/frameworks.md): transformers' Trainer, accelerate, Lightning; one
process and two (two host devices, the flagos comm backend standing in for
NCCL).

Each run (tests/python/framework_scripts/) trains the same tiny
random-weight model on the same data and reports its final parameters and
the host fallbacks it took. A run on N processes with COMBINED_BATCH / N per
process must end where one CPU process ends on the combined batch: a run
that silently trained unsynchronised replicas (issue 31: accelerate saw the
accelerator "flagos", found no collective for it and ran each process as
"rank 0 of 1") ends elsewhere. Tolerance: float32 sums in another order over
20 Adam steps (1e-5; measured differences are below 2e-7). And no host
fallback at all: gradient clipping's norms, the fused AdamW and bf16 GEMMs
run on the device.

Needs transformers, accelerate and lightning (CI's model-zoo environment,
where FLAGOS_REQUIRE_ZOO=1 makes a missing one a failure).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import NEEDS_OPENCL_PLUGIN, clean_env, needs_package

SCRIPTS = Path(__file__).parent / "framework_scripts"
TIMEOUT = 600


def run(
    tmp_path: Path,
    argv: list[str],
    on_flagos: bool,
    name: str,
    devices: int = 1,
    backend: str = "host",
    alias: bool = True,
    **env: str,
) -> list[dict]:
    """Run a framework script (on flagos: with @p devices host devices); its
    reports, rank 0 first. One process gets one device, as on a one-GPU
    machine: with two, Trainer (like on CUDA) would take nn.DataParallel,
    which the alias supports on one device only (a clear error otherwise)."""
    report = tmp_path / f"{name}.json"
    overrides = {"FRAMEWORK_REPORT": str(report), **env}
    if on_flagos:
        overrides.update(FLAGOS_BACKEND=backend, FLAGOS_HOST_DEVICES=str(devices))
        if not alias:
            overrides["FLAGOS_ALIAS_CUDA"] = "0"
    else:
        overrides["FRAMEWORK_CPU"] = "1"
    full_env = clean_env(**overrides)
    full_env["PYTHONPATH"] = f"{SCRIPTS}:{full_env['PYTHONPATH']}"
    proc = subprocess.run(
        argv, env=full_env, capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path
    )
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stderr[-6000:]}"
    reports = [json.loads(report.read_text())]
    for extra in sorted(tmp_path.glob(f"{name}.json.rank*")):
        reports.append(json.loads(extra.read_text()))
    return reports


def script(name: str) -> str:
    return str(SCRIPTS / name)


def torchrun(name: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        script(name),
        *args,
    ]


def assert_same_params(run: dict, reference: dict, atol: float = 1e-5) -> None:
    for key, value in reference["params"].items():
        torch.testing.assert_close(
            torch.tensor(run["params"][key]), torch.tensor(value), atol=atol, rtol=0, msg=key
        )


def assert_synchronised(reports: list[dict], reference: dict, world: int = 2) -> None:
    """Every rank ends where the one-process CPU run ends, without fallbacks."""
    assert len(reports) == world, [r["rank"] for r in reports]
    for r in reports:
        assert r["fallbacks"] == {}, r["fallbacks"]
        assert_same_params(r, reference)
    for r in reports[1:]:
        assert r["params"] == reports[0]["params"], "ranks diverged"


@pytest.fixture(scope="module")
def accelerate_reference(tmp_path_factory):
    needs_package("accelerate")
    path = tmp_path_factory.mktemp("accelerate-cpu")
    return run(path, [sys.executable, script("accelerate_train.py")], False, "ref")[0]


def test_accelerate_launch_two_processes_synchronise(tmp_path, accelerate_reference):
    needs_package("accelerate")
    # The `accelerate` command of this interpreter's environment (a
    # virtualenv's bin/ need not be on PATH: CI runs its python by path).
    reports = run(
        tmp_path,
        [
            sys.executable,
            "-m",
            "accelerate.commands.accelerate_cli",
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            script("accelerate_train.py"),
        ],
        True,
        "run",
        devices=2,
    )
    assert {r["distributed_type"] for r in reports} == {"DistributedType.MULTI_GPU"}
    assert [r["device"] for r in reports] == ["flagos:0", "flagos:1"]
    assert_synchronised(reports, accelerate_reference)


@pytest.fixture(scope="module")
def trainer_reference(tmp_path_factory):
    needs_package("transformers")
    needs_package("accelerate")
    path = tmp_path_factory.mktemp("trainer-cpu")
    return run(path, [sys.executable, script("trainer_train.py")], False, "ref")[0]


def test_trainer_one_process(tmp_path, trainer_reference):
    (r,) = run(tmp_path, [sys.executable, script("trainer_train.py")], True, "run")
    assert r["device"] == "flagos:0" and r["n_gpu"] == 1 and r["wrapped"] == "TinyNet"
    assert r["fallbacks"] == {}, r["fallbacks"]
    assert_same_params(r, trainer_reference)


def test_trainer_without_the_alias(tmp_path, trainer_reference):
    """docs/frameworks.md: no alias, ACCELERATE_TORCH_DEVICE=flagos (else
    Trainer puts the batches on the CPU and the model on flagos)."""
    argv = [sys.executable, script("trainer_train.py")]
    (r,) = run(tmp_path, argv, True, "run", alias=False, ACCELERATE_TORCH_DEVICE="flagos")
    assert r["device"] == "flagos:0" and r["fallbacks"] == {}, r
    assert_same_params(r, trainer_reference)


def test_trainer_under_torchrun_uses_ddp(tmp_path, trainer_reference):
    reports = run(tmp_path, torchrun("trainer_train.py"), True, "run", devices=2)
    for r in reports:
        assert r["parallel_mode"] == "ParallelMode.DISTRIBUTED" and r["n_gpu"] == 1, r
        assert r["wrapped"] == "DistributedDataParallel", r
    assert [r["device"] for r in reports] == ["flagos:0", "flagos:1"]
    assert_synchronised(reports, trainer_reference)


@pytest.fixture(scope="module")
def trainer_bf16_reference(tmp_path_factory):
    needs_package("transformers")
    needs_package("accelerate")
    path = tmp_path_factory.mktemp("trainer-bf16-cpu")
    return run(path, [sys.executable, script("trainer_train.py"), "bf16"], False, "ref")[0]


@pytest.mark.parametrize("backend", ["host", pytest.param("opencl", marks=NEEDS_OPENCL_PLUGIN)])
def test_trainer_bf16_on_the_device(tmp_path, trainer_bf16_reference, backend):
    """bf16=True: autocast's GEMMs in bf16 on the device (they took the host
    fallback): host's kernel, opencl's float GEMM through the half-GEMM
    composite. Compared with CPU's bf16 run: both round the same GEMMs to
    bf16, so the losses agree to bf16's resolution (2^-8 relative per step,
    compounded over 20 steps)."""
    argv = [sys.executable, script("trainer_train.py"), "bf16"]
    (r,) = run(tmp_path, argv, True, "run", backend=backend)
    reference = trainer_bf16_reference
    assert r["fallbacks"] == {}, r["fallbacks"]
    assert r["losses"] == pytest.approx(reference["losses"], rel=2e-2, abs=1e-3)


def test_trainer_bf16_under_torchrun(tmp_path, trainer_bf16_reference):
    """bf16 with DDP: the ranks stay equal, no fallback, and the losses (the
    mean over both ranks, as Trainer logs them) follow CPU's bf16 run to
    bf16's resolution."""
    reports = run(tmp_path, torchrun("trainer_train.py", "bf16"), True, "run", devices=2)
    assert {r["parallel_mode"] for r in reports} == {"ParallelMode.DISTRIBUTED"}
    for r in reports:
        assert r["fallbacks"] == {}, r["fallbacks"]
    assert reports[1]["params"] == reports[0]["params"], "ranks diverged"
    assert reports[0]["losses"] == pytest.approx(
        trainer_bf16_reference["losses"], rel=2e-2, abs=1e-3
    )


@pytest.fixture(scope="module")
def lightning_reference(tmp_path_factory):
    needs_package("lightning")
    path = tmp_path_factory.mktemp("lightning-cpu")
    return run(path, [sys.executable, script("lightning_train.py"), "cpu", "1"], False, "ref")[0]


def test_lightning_gpu_one_device(tmp_path, lightning_reference):
    (r,) = run(tmp_path, [sys.executable, script("lightning_train.py"), "gpu", "1"], True, "run")
    assert r["accelerator"] == "CUDAAccelerator" and r["world_size"] == 1
    assert r["fallbacks"] == {}, r["fallbacks"]
    assert_same_params(r, lightning_reference)


def test_lightning_ddp_two_devices(tmp_path, lightning_reference):
    reports = run(
        tmp_path, [sys.executable, script("lightning_train.py"), "gpu", "2"], True, "run", devices=2
    )
    assert {r["strategy"] for r in reports} == {"DDPStrategy"}
    assert {r["world_size"] for r in reports} == {2}
    assert_synchronised(reports, lightning_reference)


@pytest.mark.parametrize("devices", [1, 2])
def test_lightning_flagos_accelerator_without_the_alias(tmp_path, lightning_reference, devices):
    """flagos_torchfl.integrations.lightning: accelerator="flagos" (and
    "ddp_flagos" for two devices) in a script that names flagos, no alias."""
    argv = [sys.executable, script("lightning_train.py"), "flagos", str(devices)]
    reports = run(tmp_path, argv, True, "run", devices=devices, alias=False)
    assert {r["accelerator"] for r in reports} == {"FlagosAccelerator"}
    assert {r["world_size"] for r in reports} == {devices}
    if devices == 2:
        assert {r["strategy"] for r in reports} == {"FlagosDDPStrategy"}
    assert_synchronised(reports, lightning_reference, world=devices)


def test_hf_device_spec_names_flagos_for_transformers_tests(tmp_path):
    """integrations/hf_device_spec.py, as transformers' test suite loads it."""
    needs_package("transformers")
    spec = (
        Path(__file__).resolve().parents[2] / "python/flagos_torchfl/integrations/hf_device_spec.py"
    )
    shutil.copy(spec, tmp_path / "hf_device_spec.py")
    code = (
        "from transformers import testing_utils as t\n"
        "import torch\n"
        "t.backend_manual_seed(t.torch_device, 0)\n"
        "t.backend_empty_cache(t.torch_device)\n"
        "x = torch.ones(2, device=t.torch_device)\n"
        "print(t.torch_device, t.backend_device_count(t.torch_device), x.device)\n"
    )
    env = clean_env(
        FLAGOS_BACKEND="host",
        FLAGOS_ALIAS_CUDA="0",
        TRANSFORMERS_TEST_DEVICE_SPEC="hf_device_spec.py",
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == ["flagos", "1", "flagos:0"], proc.stdout
