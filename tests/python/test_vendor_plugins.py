"""Vendor onboarding, end to end: the skeleton plugin, a plugin of ABI 1.0,
and a plugin built out of tree from get_include() alone.

Each runs in a fresh process (one backend per process) and is compared
against PyTorch's CPU results.
"""

import ast
import json
import subprocess
from pathlib import Path

import flagos_torchfl as ft
import pytest
from conftest import REPO, TEST_PLUGIN_DIR, check_ok

PLUGIN_DIR = Path(ft.__file__).parent / "plugins"

# A small MLP trained two steps on the device and on CPU, from the same seed:
# every operator the skeleton lacks runs in the decomposition or host tier.
RUN_MLP = """
    import json, torch, flagos_torchfl as ft
    ft.initialize({backend!r})
    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
        model = model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(5, 8).to(device)
        y = torch.tensor([0, 2, 1, 1, 0]).to(device)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().cpu() for p in model.parameters()]
    cpu_losses, cpu_params = run("cpu")
    dev_losses, dev_params = run("flagos")
    diff = max((a - b).abs().max().item() for a, b in zip(cpu_params, dev_params))
    info = ft.backend_info(verbose=False)
    stats = ft.op_stats()
    print(json.dumps({{"backend": info["backend"], "cpu": cpu_losses, "dev": dev_losses,
                       "diff": diff, "fp64": info["devices"][0].get("fp64"),
                       "amp": str(ft.amp.get_policy().dtype), "source": ft.amp.get_policy().source,
                       "fallbacks": sum(v.get("fallback", 0) for v in stats.values())
                                    if isinstance(stats, dict) else None}}))
"""


def run_mlp(run_python, backend, **env):
    out = check_ok(run_python(RUN_MLP.format(backend=backend), **env))
    return json.loads(out.strip().splitlines()[-1])


def assert_matches_cpu(result):
    # float32 on the same host math: rounding-level differences only.
    assert result["dev"] == pytest.approx(result["cpu"], rel=1e-5, abs=1e-6), result
    assert result["diff"] < 1e-5, result


def test_skeleton_trains_like_cpu(run_python):
    if not (PLUGIN_DIR / "libflagos_skeleton.so").exists():
        pytest.fail(f"the skeleton plugin is not built in {PLUGIN_DIR}")
    result = run_mlp(run_python, "skeleton")
    assert result["backend"] == "skeleton"
    assert_matches_cpu(result)
    assert result["fp64"] is True  # ABI 1.1 property
    assert result["amp"] == "torch.bfloat16" and "plugin prefers" in result["source"]


def test_auto_never_prefers_the_skeleton(run_python):
    out = check_ok(
        run_python(
            "import flagos_torchfl as ft; ft.initialize(); "
            "print(ft.backend_info(verbose=False)['backend'])"
        )
    )
    assert out.strip().splitlines()[-1] != "skeleton"


def test_plugin_of_abi_1_0_still_loads_and_runs(run_python):
    lib = TEST_PLUGIN_DIR / "abi_1_0" / "libflagos_test_abi_1_0.so"
    if not lib.exists():
        pytest.fail(f"{lib} is not built")
    result = run_mlp(run_python, "test_abi_1_0", FLAGOS_PLUGIN_PATH=str(lib))
    assert result["backend"] == "test_abi_1_0"
    assert_matches_cpu(result)
    # The 1.1 members it does not know read as "unknown": no fp64 answer,
    # and autocast falls back to the core's default.
    assert result["fp64"] is None
    assert result["amp"] == "torch.float16" and "states none" in result["source"]


def test_get_include_ships_the_vendor_headers():
    root = Path(ft.get_include())
    for header in [
        "flagos/vendor.h",
        "flagos/kernel.h",
        "flagos/ops.h",
        "flagos_kit/entry.h",
        "flagos_kit/error.h",
    ]:
        assert (root / header).is_file(), header
    assert "FLAGOS_OP_RELU" in (root / "flagos/ops.h").read_text()


def test_a_plugin_builds_out_of_tree_from_get_include(run_python, tmp_path):
    """The guide's path, literally: copy the skeleton, rename it, build it
    with a plain compiler against get_include() only, load it by path."""
    src = tmp_path / "mychip"
    src.mkdir()
    for f in (REPO / "backends" / "skeleton").glob("*.[ch]*"):
        text = f.read_text().replace('"skeleton"', '"mychip"')
        (src / f.name).write_text(text)
    lib = tmp_path / "libflagos_mychip.so"
    cmd = [
        "c++",
        "-std=c++17",
        "-O1",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        f"-I{ft.get_include()}",
        "-Wl,--no-undefined",
        "-Wl,-Bsymbolic",
        f"-Wl,--version-script={REPO / 'backends' / 'exports.map'}",
        *map(str, sorted(src.glob("*.cpp"))),
        "-o",
        str(lib),
        "-pthread",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    result = run_mlp(run_python, "mychip", FLAGOS_PLUGIN_PATH=str(lib))
    assert result["backend"] == "mychip"
    assert_matches_cpu(result)


def test_no_module_asks_backend_whether_it_is_initialized():
    """The import cycle backend <-> amp <-> cuda_alias <-> flagos is gone:
    those modules ask the leaf module _state instead."""
    pkg = Path(ft.__file__).parent
    files = [
        pkg / "amp.py",
        pkg / "distributed.py",
        pkg / "_state.py",
        *(pkg / "cuda_alias").glob("*.py"),
        *(pkg / "flagos").glob("*.py"),
    ]
    offenders = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("backend"):
                offenders.append(f"{f.relative_to(pkg)}:{node.lineno}")
    assert offenders == []
    imports = [
        n
        for n in ast.walk(ast.parse((pkg / "_state.py").read_text()))
        if isinstance(n, ast.ImportFrom) and n.level > 0
    ]
    assert [n.names[0].name for n in imports] == ["_core"]  # lazily, for the extension only
