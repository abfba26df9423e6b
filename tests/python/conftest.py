"""Shared set-up of the Python tests.

The test process brings the `host` backend (or FLAGOS_BACKEND's) up once (one
device, the default memory). PrivateUse1 can be set up once per process, so every test that needs
another configuration (broken plugins, two devices, a memory limit, autoload,
logging) runs its code in a fresh interpreter through `run_python`.

Without a built core (flagos_torchfl._C) the tests that need it are skipped
with the build command as reason; under CI (CI set) that is an error instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
TEST_PLUGIN_DIR = REPO / "build" / "test_plugins"

try:
    import flagos_torchfl as ft
except ImportError:  # not installed: test the source tree (config tests still run)
    sys.path.insert(0, str(REPO / "python"))
    import flagos_torchfl as ft

try:
    import flagos_torchfl._C  # noqa: F401

    CORE_ERROR = None
except ImportError as err:  # the core is not built (yet)
    CORE_ERROR = (
        f"flagos_torchfl._C is not built ({err}); run: pip install --no-build-isolation -e ."
    )
    if os.environ.get("CI"):
        raise

# Tests of the opencl plugin itself (they start fresh interpreters on it) skip
# where it is not built: `pytestmark = NEEDS_OPENCL_PLUGIN`.
OPENCL_PLUGIN = Path(ft.__file__).resolve().parent / "plugins" / "libflagos_opencl.so"
NEEDS_OPENCL_PLUGIN = pytest.mark.skipif(
    CORE_ERROR is not None or not OPENCL_PLUGIN.exists(),
    reason=CORE_ERROR or f"{OPENCL_PLUGIN} is not built",
)

# The backend under test: host, unless FLAGOS_BACKEND names another (CI runs
# the OpInfo sweep and the model tests a second time with FLAGOS_BACKEND=opencl).
BACKEND = ft.config.backend() or "host"
if CORE_ERROR is None:
    ft.initialize(backend=BACKEND)


def pytest_collection_modifyitems(config, items):
    if CORE_ERROR is None:
        return
    skip = pytest.mark.skip(reason=CORE_ERROR)
    for item in items:
        if "no_core" not in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    config.addinivalue_line("markers", "no_core: runs without the compiled core")


def clean_env(**overrides: str) -> dict[str, str]:
    """os.environ without FLAGOS_* (so the parent's settings never leak), plus overrides.

    FLAGOS_CACHE_DIR is kept: generated kernels go where the test run keeps
    them (scripts/test.sh: build/kernel-cache), not into the user's cache.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLAGOS_") or k == "FLAGOS_CACHE_DIR"
    }
    package_root = str(Path(ft.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(overrides)
    return env


def python_subprocess(code: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run `code` (dedented) in a fresh interpreter with clean_env(**env); text output captured."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.fixture
def run_python():
    """python_subprocess, as a fixture."""
    return python_subprocess


def check_ok(proc: subprocess.CompletedProcess) -> str:
    """The stdout of a successful run; fails the test with both streams otherwise."""
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    return proc.stdout


@pytest.fixture(scope="session")
def test_plugin():
    """test_plugin("wrong_abi") -> path of build/test_plugins/libflagos_test_wrong_abi.so.

    "host_fallback" is tests/plugins/host_fallback_plugin.c, the host plugin
    with kernels that return FLAGOS_ERROR_FALLBACK.
    """

    def path(breakage: str) -> str:
        lib = TEST_PLUGIN_DIR / f"libflagos_test_{breakage}.so"
        if breakage == "entry_crashes":  # aborts when opened: kept in a folder of its own
            lib = TEST_PLUGIN_DIR / "isolated" / lib.name
        if breakage == "host_fallback":  # a working plugin: kept apart from the broken ones
            lib = TEST_PLUGIN_DIR / "wrapping" / lib.name
        if not lib.exists():
            message = f"{lib} is not built (FLAGOS_BUILD_TESTS=OFF?)"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        return str(lib)

    return path


def needs_package(package: str) -> None:
    """Skip unless @p package is installed; under FLAGOS_REQUIRE_ZOO=1 (CI's
    model-zoo environment) a missing package fails instead."""
    import importlib.util

    if importlib.util.find_spec(package) is None:
        if os.environ.get("FLAGOS_REQUIRE_ZOO") == "1":
            pytest.fail(f"{package} is not installed (FLAGOS_REQUIRE_ZOO=1)")
        pytest.skip(f"{package} is not installed")


def assert_close_to_cpu(on_device: torch.Tensor, on_cpu: torch.Tensor, **tolerances) -> None:
    """The flagos result lives on flagos and equals the CPU one (within tolerances)."""
    assert on_device.device.type == "flagos", f"result on {on_device.device}, expected flagos"
    torch.testing.assert_close(on_device.cpu(), on_cpu, **tolerances)
