"""The custom-kernel interface (flagos_torchfl.extension, Note [Custom kernels]).

On the backend under test (host: C through the system compiler; opencl:
OpenCL C through PoCL): compile and launch against CPU results, argument
checks, compile errors with the compiler's log, and the kernel cache's
persistence across processes (counters, not timings). The two examples built
on it (fused RMSNorm, flash attention) are tested in test_extension_examples.py.
"""

from __future__ import annotations

import json
import uuid

import flagos_torchfl as ft
import pytest
import torch
from conftest import BACKEND, check_ok
from flagos_torchfl import extension as fx

# y[i] = a * x[i] + b over n items; a and b of the given C types.
SAXPY = {
    "opencl": """
__kernel void saxpy(FLAGOS_TENSOR(float, y), FLAGOS_TENSOR(const float, x), long n, float a,
                    int b) {
  size_t i = get_global_id(0);
  if (i < n) FLAGOS_PTR(float, y)[i] = a * FLAGOS_PTR(const float, x)[i] + (float)b;
}""",
    "c": """
FLAGOS_KERNEL(saxpy) {
  float* y = FLAGOS_TENSOR_ARG(float, 0);
  const float* x = FLAGOS_TENSOR_ARG(const float, 1);
  const int64_t n = FLAGOS_SCALAR_ARG(int64_t, 2);
  const float a = FLAGOS_SCALAR_ARG(float, 3);
  const int32_t b = FLAGOS_SCALAR_ARG(int32_t, 4);
  FLAGOS_ITEMS(i) if ((int64_t)i < n) y[i] = a * x[i] + (float)b;
}""",
}


@pytest.fixture(scope="module")
def saxpy():
    return fx.compile_kernel("saxpy", SAXPY)


def test_the_backend_compiles_the_language_it_names(saxpy):
    assert fx.language() == {"host": "c", "opencl": "opencl-c"}.get(BACKEND, fx.language())
    assert saxpy.language == fx.language()
    assert saxpy.backend == BACKEND


@pytest.mark.parametrize("n", [1, 63, 64, 1000, 4099])
def test_launch_matches_cpu(saxpy, n):
    x = torch.randn(n)
    y = torch.full((n,), 7.0, device="flagos")
    before = fx.launches()
    saxpy(y, x.to("flagos"), n, 2.5, fx.int32(-3), global_size=n, local_size=64)
    assert fx.launches() == before + 1
    torch.testing.assert_close(y.cpu(), 2.5 * x - 3, rtol=0, atol=1e-6)


def test_views_pass_their_own_address(saxpy):
    """A tensor argument is its data pointer, storage offset included."""
    base = torch.randn(100)
    x = base.to("flagos")
    y = torch.zeros(100, device="flagos")
    saxpy(y[10:], x[3:], 50, 1.0, fx.int32(0), global_size=50)
    expected = torch.zeros(100)
    expected[10:60] = base[3:53]
    torch.testing.assert_close(y.cpu(), expected, rtol=0, atol=0)


def test_launch_runs_on_the_current_stream(saxpy):
    x = torch.randn(4096)
    xf = x.to("flagos")
    y = torch.zeros(4096, device="flagos")
    s = torch.flagos.Stream()
    s.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(s):
        saxpy(y, xf, 4096, 3.0, fx.int32(1), global_size=4096, local_size=64)
    s.synchronize()
    torch.testing.assert_close(y.cpu(), 3.0 * x + 1, rtol=0, atol=1e-6)


def test_a_2d_launch_on_opencl():
    if fx.language() != "opencl-c":
        pytest.skip("the C language launches 1-D only (compiler.h)")
    k = fx.compile_kernel(
        "index2d",
        {
            "opencl": """
__kernel void index2d(FLAGOS_TENSOR(long, out), long cols) {
  long r = get_global_id(1), c = get_global_id(0);
  if (c < cols) FLAGOS_PTR(long, out)[r * cols + c] = r * 1000 + c;
}"""
        },
    )
    out = torch.zeros(5, 37, dtype=torch.int64, device="flagos")
    k(out, 37, global_size=(40, 5), local_size=(8, 1))
    r, c = torch.meshgrid(torch.arange(5), torch.arange(37), indexing="ij")
    assert torch.equal(out.cpu(), r * 1000 + c)


def test_a_compile_error_shows_the_compilers_log():
    bad = {
        "opencl": "__kernel void broken(FLAGOS_TENSOR(float, y)) { undeclared_thing = 1; }",
        "c": "FLAGOS_KERNEL(broken) { undeclared_thing = 1; }",
    }
    with pytest.raises(
        RuntimeError, match="(?s)custom kernel 'broken' failed to compile.*undeclared_thing"
    ):
        fx.compile_kernel("broken", bad)
    # Remembered: the same source fails again with the same log, no rebuild.
    with pytest.raises(RuntimeError, match="undeclared_thing"):
        fx.compile_kernel("broken", bad)


def test_no_source_for_this_backend_names_the_keys_it_would_take():
    with pytest.raises(
        ValueError, match=f"no source for backend '{BACKEND}'.*given: \\['cuda-c'\\]"
    ):
        fx.compile_kernel("k", {"cuda-c": "__global__ void k() {}"})


def test_options_per_language_are_picked_like_sources():
    k = fx.Kernel("saxpy", SAXPY, {"opencl": "-cl-mad-enable", "c": "-O1", "cuda-c": "-G"})
    assert k.options == {"opencl-c": "-cl-mad-enable", "c": "-O1"}[k.language]


def test_bad_arguments_are_clear_errors(saxpy):
    y = torch.zeros(8, device="flagos")
    with pytest.raises(ValueError, match="argument 1 is on cpu, not on flagos"):
        saxpy(y, torch.zeros(8), 8, 1.0, fx.int32(0), global_size=8)
    with pytest.raises(TypeError, match="argument 2 is a bool"):
        saxpy(y, y, True, 1.0, fx.int32(0), global_size=8)
    with pytest.raises(TypeError, match="argument 2 must be a flagos tensor or a scalar, got str"):
        saxpy(y, y, "8", 1.0, fx.int32(0), global_size=8)
    with pytest.raises(ValueError, match="does not fit"):
        saxpy(y, y, 8, 1.0, fx.int32(2**40), global_size=8)
    with pytest.raises(ValueError, match="global_size must be 1 to 3"):
        saxpy(y, y, 8, 1.0, fx.int32(0), global_size=(1, 1, 1, 1))
    with pytest.raises(ValueError, match="local_size needs as many dimensions"):
        saxpy(y, y, 8, 1.0, fx.int32(0), global_size=8, local_size=(1, 1))
    with pytest.raises(ValueError, match="local_size entries must be positive"):
        saxpy(y, y, 8, 1.0, fx.int32(0), global_size=8, local_size=0)
    with pytest.raises(ValueError, match="entry point"):
        fx.Kernel("", SAXPY)
    # None of these launched anything: y is untouched.
    assert torch.equal(y.cpu(), torch.zeros(8))


def _cache_run(marker: str) -> str:
    """A fresh process that compiles saxpy with @marker in its source and launches it."""
    return f"""
import json, torch, flagos_torchfl as ft
from flagos_torchfl import extension as fx
ft.initialize({BACKEND!r})
sources = {{lang: src + "\\n/* {marker} */\\n" for lang, src in {SAXPY!r}.items()}}
k = fx.compile_kernel("saxpy", sources)
x = torch.arange(10.0, device="flagos"); y = torch.empty_like(x)
k(y, x, 10, 2.0, fx.int32(1), global_size=10)
assert torch.equal(y.cpu(), 2 * torch.arange(10.0) + 1)
from flagos_torchfl.backend import wait_for_specializations
wait_for_specializations()
print(json.dumps(ft.kernel_cache_stats()["devices"][0]))
"""


def test_a_second_process_loads_the_kernel_from_disk(run_python, tmp_path):
    """Persistent cache: built once, then loaded (or preloaded) by the next process."""
    marker = uuid.uuid4().hex
    env = {"FLAGOS_CACHE_DIR": str(tmp_path)}
    first = json.loads(check_ok(run_python(_cache_run(marker), **env)).splitlines()[-1])
    assert first["disk_writes"] >= 1
    builds_of_the_rest = first["sync_builds"] - 1  # everything but saxpy
    second = json.loads(check_ok(run_python(_cache_run(marker), **env)).splitlines()[-1])
    assert second["sync_builds"] == 0, second
    assert second["disk_hits"] + second["preloaded"] >= 1, second
    # An edited source is another kernel: built, never the old binary.
    third = json.loads(check_ok(run_python(_cache_run(marker + "-edited"), **env)).splitlines()[-1])
    assert third["sync_builds"] == 1, (builds_of_the_rest, third)


def test_the_kernel_cache_counts_the_build(saxpy):
    stats = ft.kernel_cache_stats()
    assert stats["compiler"] == fx.language()
    assert sum(d["entries"] for d in stats["devices"]) >= 1
