"""torch.compile on flagos: inductor's fused kernels (Note [Fused kernels]).

On the backend under test (host: C; scripts/test.sh runs this file again on
opencl: OpenCL C, work-group reductions), with the default backend, against
the same model run eagerly on flagos and on CPU: forward and backward of a
LayerNorm + GELU MLP, an RMSNorm + SiLU-gated MLP, a CNN with batch norm, a
small transformer language model and a tiny LLaMA block; dynamic shapes
without recompiles; graph breaks; random numbers (the eager stream, bit for bit);
inductor's fallbacks (accumulating index stores, CPU scalars); kernels reused by a second process
from disk; fewer device kernel launches than eager (counted by the profiler).
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from pathlib import Path

import flagos_torchfl as ft
import pytest
import torch
import torch.nn.functional as F
from conftest import check_ok
from flagos_torchfl import extension
from flagos_torchfl.inductor import runtime
from torch.profiler import ProfilerActivity

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import models  # noqa: E402
import nvrtc  # noqa: E402  (tests/python/nvrtc.py)

pytestmark = pytest.mark.skipif(
    not extension.language(), reason="the backend has no compiler: no inductor backend"
)


def _lm_input():
    return torch.randint(0, 64, (2, 16))


# name -> (model factory, input factory)
MODELS = {
    "mlp_gelu": (lambda: models.MLPBlock(32, 96), lambda: torch.randn(3, 10, 32)),
    "gated_silu": (lambda: models.GatedBlock(32, 80), lambda: torch.randn(3, 10, 32)),
    "cnn_bn": (
        lambda: models.ResNet(num_classes=5, width=8, blocks=(1, 1)),
        lambda: torch.randn(2, 3, 32, 32),
    ),
    "transformer": (
        lambda: models.Transformer(vocab=64, d=32, heads=4, layers=1, seq=16),
        _lm_input,
    ),
    "llama": (lambda: models.LlamaBlock(32, 4, 88), lambda: torch.randn(2, 12, 32)),
}


def _loss(out: torch.Tensor) -> torch.Tensor:
    return out.float().pow(2).mean()


def _run(model, x):
    out = model(x)
    _loss(out).backward()
    return out, [p.grad for p in model.parameters()]


def _close(got, want, what, rtol=1e-4, atol=1e-5):
    torch.testing.assert_close(
        got.cpu(), want.cpu(), rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}"
    )


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_model_matches_eager_and_cpu(name):
    make, make_input = MODELS[name]
    torch.manual_seed(0)
    cpu = make()
    eager = copy.deepcopy(cpu).to("flagos")
    compiled_model = copy.deepcopy(cpu).to("flagos")
    x = make_input()
    before = runtime.launches()
    compiled = torch.compile(compiled_model)
    out_c, grads_c = _run(compiled, x.to("flagos"))
    assert runtime.launches() > before, "no fused kernel ran"
    out_e, grads_e = _run(eager, x.to("flagos"))
    out_cpu, grads_cpu = _run(cpu, x)
    assert out_c.device.type == "flagos"
    _close(out_c, out_e, f"{name} forward vs eager flagos")
    _close(out_c, out_cpu, f"{name} forward vs CPU")
    for k, (gc, ge, gcpu) in enumerate(zip(grads_c, grads_e, grads_cpu, strict=True)):
        _close(gc, ge, f"{name} grad {k} vs eager flagos", rtol=1e-3, atol=1e-5)
        _close(gc, gcpu, f"{name} grad {k} vs CPU", rtol=1e-3, atol=1e-5)


@contextlib.contextmanager
def _recording_kernels():
    """The FusedKernel objects the compiled modules made inside the block."""
    made = []
    original = runtime.FusedKernel.__init__

    def remember(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.recorded_spec = args[1] if len(args) > 1 else kwargs["spec"]
        made.append(self)

    runtime.FusedKernel.__init__ = remember
    try:
        yield made
    finally:
        runtime.FusedKernel.__init__ = original


def _compiles() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def test_dynamic_shapes_compile_once_and_build_each_kernel_once():
    torch.manual_seed(0)
    cpu = models.MLPBlock(32, 64)
    dev = copy.deepcopy(cpu).to("flagos")
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(dev, dynamic=True)
    with _recording_kernels() as kernels:
        for batch in (2, 3, 5, 8, 13):
            x = torch.randn(batch, 7, 32)
            with torch.no_grad():
                _close(compiled(x.to("flagos")), cpu(x), f"batch {batch}")
    assert _compiles() == 1, "a new batch size recompiled"
    # Generic kernels: sizes are arguments, so one build serves every shape.
    assert kernels and all("xnumel" in [p[1] for p in k.params] for k in kernels)
    assert len({k.source for k in kernels}) == len(kernels)


def test_changing_batch_sizes_recompile_only_once():
    model = models.GatedBlock(32, 48).to("flagos")
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model)
    with torch.no_grad():
        for batch in (2, 3, 4, 6, 9):
            x = torch.randn(batch, 5, 32, device="flagos")
            _close(compiled(x), model(x), f"batch {batch}")
    # dynamo's own rule: the second size marks the dim dynamic, then no more
    assert _compiles() == 2


def test_graph_breaks_still_run_fused_kernels():
    def f(x):
        y = torch.relu(x) * 2 + 1
        if y.sum().item() > 0:  # data-dependent: dynamo breaks the graph here
            y = y.sigmoid() * x
        return F.gelu(y) - x

    x = torch.randn(64, 33)
    torch._dynamo.utils.counters.clear()
    before = runtime.launches()
    got = torch.compile(f)(x.to("flagos"))
    assert sum(torch._dynamo.utils.counters["graph_break"].values()) >= 1
    assert runtime.launches() >= before + 2  # a fused kernel on each side of the break
    _close(got, f(x), "graph break")


def test_accumulating_stores_random_numbers_and_cpu_scalars():
    """index_add / embedding backward add atomically inside fused kernels; random
    draws run as eager flagos operators; a CPU scalar moves to the device (graph_pass.py)."""
    torch.manual_seed(0)
    emb_cpu = torch.nn.Embedding(10, 4)
    emb = copy.deepcopy(emb_cpu).to("flagos")
    ids = torch.tensor([1, 1, 3, 7])

    def f(module, i, x, idx):
        hit = module(i).sum()
        y = torch.zeros(8, 4, device=x.device).index_add(0, idx, x)
        return hit + (torch.tensor(3.0) * y).sum(), torch.tensor(2.0) * x

    x = torch.randn(4, 4)
    idx = torch.tensor([0, 2, 2, 5])
    got, scaled = torch.compile(f)(emb, ids.to("flagos"), x.to("flagos"), idx.to("flagos"))
    want, want_scaled = f(emb_cpu, ids, x, idx)
    assert scaled.device.type == "flagos"  # not a CPU kernel reading device memory
    _close(got, want, "embedding + index_add")
    _close(scaled, want_scaled, "CPU scalar times a flagos tensor")
    got.backward()
    want.backward()
    _close(emb.weight.grad, emb_cpu.weight.grad, "embedding backward")
    dropped = torch.compile(lambda t: F.dropout(t, 0.5, training=True))(
        torch.ones(4096, device="flagos")
    )
    kept = (dropped != 0).float().mean().item()
    assert 0.4 < kept < 0.6 and set(dropped.unique().tolist()) <= {0.0, 2.0}


def test_compiled_random_numbers_are_the_eager_stream():
    """Note [Random numbers on the device] under torch.compile: for the same
    seed a compiled graph draws the bits eager draws (dropout's mask, rand,
    randn, randint, bernoulli, half and double draws), in the same order, and
    leaves the generator where eager leaves it; the dropout gradient takes
    the same mask. Inductor's own random lowering would draw other numbers
    (inductor/__init__.py, _draw_random_numbers_as_eager_does)."""

    def draws(x):
        d = F.dropout(x, 0.3, training=True)
        u = torch.rand_like(x) + torch.randn(x.shape, device=x.device, dtype=torch.float64)
        k = torch.randint(0, 7, x.shape, device=x.device) * torch.bernoulli(torch.sigmoid(x))
        h = torch.rand(x.shape, device=x.device, dtype=torch.float16)
        return d * 2 + 1, u, k, h

    x = torch.randn(4, 1000, device="flagos")
    compiled = torch.compile(draws)
    for seed in (5, 2**40 + 3):
        torch.manual_seed(seed)
        eager = [draws(x), draws(x)]
        after_eager = torch.flagos.get_rng_state()
        torch.manual_seed(seed)
        got = [compiled(x), compiled(x)]
        assert torch.equal(torch.flagos.get_rng_state(), after_eager)
        for want_call, got_call in zip(eager, got, strict=True):
            for want, have in zip(want_call, got_call, strict=True):
                assert want.dtype == have.dtype and torch.equal(want.cpu(), have.cpu())

    def step(w):
        return (F.dropout(w * 3, 0.25, training=True) ** 2).sum()

    w = torch.randn(64, 33, device="flagos", requires_grad=True)
    torch.manual_seed(11)
    step(w).backward()
    want = w.grad.clone()
    w.grad = None
    torch.manual_seed(11)
    torch.compile(step)(w).backward()
    assert torch.equal(w.grad.cpu(), want.cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_scatter_add_with_repeated_indices(dtype):
    """float32/int64: atomic adds in the fused kernel; bfloat16 (no atomic add):
    the eager flagos operator."""
    index = torch.tensor([[0, 1, 1, 3, 3, 3]]).expand(5, 6)
    src = torch.arange(30).reshape(5, 6).to(dtype)
    want = torch.zeros(5, 4, dtype=dtype).scatter_add(1, index, src)
    f = torch.compile(
        lambda s, i: torch.zeros(5, 4, dtype=s.dtype, device=s.device).scatter_add(1, i, s)
    )
    got = f(src.to("flagos"), index.to("flagos"))
    assert torch.equal(got.cpu(), want)


SECOND_PROCESS = """
import json, sys, torch, flagos_torchfl as ft
sys.path.insert(0, "benchmarks")
import models
from flagos_torchfl.inductor import runtime
ft.initialize()
torch.manual_seed(0)
model = models.GatedBlock(32, 48).to("flagos")
x = torch.randn(4, 6, 32, device="flagos")
out = torch.compile(model)(x)
stats = ft.kernel_cache_stats()
print(json.dumps({"sync_builds": stats["sync_builds"], "launches": runtime.launches(),
                  "sum": out.sum().item()}))
"""


def test_a_second_process_reuses_the_compiled_kernels_from_disk(run_python, tmp_path):
    env = {
        "FLAGOS_BACKEND": ft.config.backend() or "host",
        "FLAGOS_CACHE_DIR": str(tmp_path / "kernels"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    first = json.loads(check_ok(run_python(SECOND_PROCESS, **env)).splitlines()[-1])
    second = json.loads(check_ok(run_python(SECOND_PROCESS, **env)).splitlines()[-1])
    assert first["launches"] > 0 and first["sync_builds"] > 0
    assert second["launches"] == first["launches"]
    assert second["sync_builds"] == 0, "the second process compiled again"
    assert second["sum"] == pytest.approx(first["sum"], rel=1e-6)


def _device_kernels(step) -> int:
    step()  # warm: compiles and first launches outside the capture
    torch.flagos.synchronize()
    with torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    ) as prof:
        step()
        torch.flagos.synchronize()
    return sum(
        e.count
        for e in prof.key_averages()
        if e.device_type == torch.autograd.DeviceType.PrivateUse1 and e.self_device_time_total > 0
    )


def test_a_compiled_training_step_launches_fewer_device_kernels():
    if not ft.backend_info(verbose=False).get("device_activity"):
        pytest.skip("no device activity in torch.profiler for this plugin")
    torch.manual_seed(0)
    model = models.GatedBlock(64, 128).to("flagos")
    x = torch.randn(4, 16, 64, device="flagos")
    compiled = torch.compile(model)

    def eager_step():
        _loss(model(x)).backward()

    def compiled_step():
        _loss(compiled(x)).backward()

    eager, fused = _device_kernels(eager_step), _device_kernels(compiled_step)
    assert 0 < fused < eager, (fused, eager)


def _kernels_of(fn, *args):
    with _recording_kernels() as made:
        out = torch.compile(fn)(*args)
    return out, made


def test_reductions_take_the_layout_their_memory_wants():
    """Contiguous rows longer than 64: a segment of a work-group per row where the
    language has work-groups (opencl); shorter rows, reductions over a strided dim
    and every reduction in C: an item per row (Note [Reduction layouts of fused kernels])."""
    x = torch.randn(48, 200)
    rows, (row_kernel,) = _kernels_of(lambda t: torch.softmax(t, -1), x.to("flagos"))
    cols, (col_kernel,) = _kernels_of(lambda t: t.sum(0), x.to("flagos"))
    _close(rows, torch.softmax(x, -1), "softmax")
    _close(cols, x.sum(0), "sum(0)")
    groups = extension.language() == "opencl-c"
    assert row_kernel.mode == ("group" if groups else "item")
    assert col_kernel.mode == "item"
    if groups:  # segments of 16 lanes, 16 rows to a work-group
        assert (row_kernel.group, row_kernel.rows) == (16, 16) and "barrier" in row_kernel.source


def test_a_group_reduction_is_right_on_every_launch():
    """Note [No return before a barrier]: segments past the last row recompute it
    and store nothing; PoCL 3.1 gave wrong rows in about half the launches of a
    group reduction that returned before its barriers instead."""
    x = torch.randn(93, 100)  # 93 rows: the last work-group has segments past the end
    want = torch.softmax(x * 0.5, -1)
    compiled = torch.compile(lambda t: torch.softmax(t * 0.5, -1))
    xd = x.to("flagos")
    bad = sum(
        not torch.allclose(compiled(xd).cpu(), want, rtol=1e-5, atol=1e-6) for _ in range(300)
    )
    assert bad == 0, f"{bad} of 300 launches were wrong"


@pytest.mark.parametrize("offset", [0.0, 1e3, 1e4])
def test_variance_keeps_cpus_precision(offset):
    """Note [Shifted sums]: rows whose first element lies 5 sigma from the mean, with
    a large offset, keep var's and layer norm's float32 precision (vs float64)."""
    torch.manual_seed(0)
    x = offset + 1e-2 * torch.randn(64, 300)
    x[:, 0] = offset + 5e-2
    want_var = x.double().var(-1)
    want_ln = F.layer_norm(x.double(), (300,))
    var, ln = torch.compile(lambda t: (t.var(-1), F.layer_norm(t, (300,))))(x.to("flagos"))
    assert ((var.cpu().double() - want_var).abs() / want_var).max() < 1e-6
    # CPU's own float32 layer norm is off by up to 1e-2 here; ours must not be worse
    cpu_error = (F.layer_norm(x, (300,)).double() - want_ln).abs().max()
    assert (ln.cpu().double() - want_ln).abs().max() <= max(cpu_error, 1e-5)


NO_COMPILER = """
import warnings, torch, flagos_torchfl as ft
ft.initialize("skeleton")
x = torch.randn(8, 8, device="flagos")
f = lambda t: (t * 2).sigmoid() + t
try:
    torch.compile(f)(x)
    print("compiled")
except Exception as err:
    print("refused:", "has no compiler" in str(err) and "aot_eager" in str(err))
torch._dynamo.reset()
print("mm:", torch.allclose(torch.compile(lambda a: a @ a)(x).cpu(), x.cpu() @ x.cpu(), atol=1e-5))
torch._dynamo.reset()
print("aot_eager:", torch.allclose(torch.compile(f, backend="aot_eager")(x).cpu(), f(x.cpu())))
from flagos_torchfl import cuda_alias
cuda_alias.activate()
torch._dynamo.reset()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = torch.compile(f)(x.to("cuda"))
print("alias:", any("has no compiler" in str(w.message) for w in caught), out.device.type)
"""


def test_a_plugin_without_a_compiler_says_so(run_python):
    """The skeleton plugin has no compiler slot: a graph that needs a fused kernel
    fails with a clear message, a graph of extern operators compiles, and the
    cuda alias runs torch.compile with aot_eager and warns why."""
    out = check_ok(
        run_python(NO_COMPILER, FLAGOS_BACKEND="skeleton", FLAGOS_ALIAS_CUDA="0")
    ).splitlines()
    assert out[-4:] == ["refused: True", "mm: True", "aot_eager: True", "alias: True flagos"]


@pytest.mark.skipif(nvrtc.library() is None, reason="NVRTC not found")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_fused_kernels_build_as_cuda_c_for_sm_90(name):
    """Every fused kernel a compiled model makes, framed in the cuda plugin's
    language (emit_cuda.cpp) and compiled by NVRTC for an H100/H200."""
    torch.manual_seed(0)
    make_model, make_input = MODELS[name]
    dev = make_model().to("flagos")
    with _recording_kernels() as kernels:
        _run(torch.compile(dev), make_input().to("flagos"))
    assert kernels, "the model made no fused kernel"
    core = ft._core.C()
    for k in kernels:
        spec = k.recorded_spec
        source = core._fused_kernel_source(
            "cuda-c", k.name, k.params, spec["body"], k.mode, k.group, k.rows, spec["fp64"]
        )
        log = nvrtc.compile_cubin(source)
        assert log == "", f"{k.name}:\n{log}\n{source}"
