"""The cuda plugin (backends/cuda) on a machine without an NVIDIA GPU, where CI
runs: it loads, says why it cannot run, `auto` passes it over, and what it
would compile (custom-kernel examples' CUDA sources) builds with NVRTC for
sm_90. On a GPU the device check runs it for real (scripts/device_check.sh).
"""

from __future__ import annotations

import importlib.util
import sys

import flagos_torchfl as ft
import nvrtc
import pytest
import torch
from conftest import CORE_ERROR, REPO, check_ok

CUDA_PLUGIN = REPO / "python" / "flagos_torchfl" / "plugins" / "libflagos_cuda.so"
pytestmark = pytest.mark.skipif(
    CORE_ERROR is not None or not CUDA_PLUGIN.exists(),
    reason=CORE_ERROR or "the cuda plugin is not built (no cuda.h/nvrtc.h at configure time)",
)
NEEDS_NVRTC = pytest.mark.skipif(nvrtc.library() is None, reason="NVRTC not found")


def _has_gpu() -> bool:
    # torch's own answer: the cuda alias may be active and answer for flagos.
    from flagos_torchfl.cuda_alias import native_cuda_available

    return native_cuda_available()


def test_without_a_gpu_the_plugin_says_why_and_auto_passes_it_over(run_python):
    if _has_gpu():
        pytest.skip("a GPU is here: the device check covers the plugin")
    out = check_ok(
        run_python(
            """
        import flagos_torchfl as ft
        try:
            ft.initialize("cuda")
        except RuntimeError as err:
            print("refused:", "libcuda.so.1" in str(err) or "no CUDA device" in str(err))
        ft.initialize("auto")
        report = {r["name"]: r for r in ft._core.C()._discovery_report()}
        print("cuda:", report["cuda"]["status"], "|", report["cuda"]["reason"][:40])
        print("selected:", ft.backend_info(verbose=False)["backend"])
        """
        )
    )
    lines = out.strip().splitlines()
    assert lines[0] == "refused: True", out
    assert lines[1].startswith("cuda: skipped"), out
    assert lines[2] != "selected: cuda", out


def test_zero_copy_exchange_needs_the_cuda_backend():
    from flagos_torchfl import interop

    x = torch.ones(3, device="flagos")
    with pytest.raises(ValueError, match="needs the cuda backend"):
        interop.to_native(x)
    with pytest.raises(ValueError, match="takes a flagos tensor"):
        interop.to_native(torch.ones(3))
    with pytest.raises(ValueError, match="native cuda tensor"):
        interop.from_native(torch.ones(3))


@NEEDS_NVRTC
@pytest.mark.parametrize("example", ["fused_rmsnorm", "flash_attention"])
def test_the_examples_cuda_sources_build_for_sm_90(example):
    spec = importlib.util.spec_from_file_location(example, REPO / "examples" / f"{example}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[example] = module
    spec.loader.exec_module(module)  # initializes flagos (already up) and defines the sources
    prelude = ft._core.C()._custom_kernel_prelude("cuda-c")
    assert "FLAGOS_TENSOR" in prelude
    options = ("-DHEAD_DIM=64",) if example == "flash_attention" else ()
    log = nvrtc.compile_cubin(prelude + module.CUDA, options)
    assert log == "", log
