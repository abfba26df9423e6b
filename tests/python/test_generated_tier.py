"""The generated tier: kernels from the generator through the kernel cache
(Note [The generated tier] in csrc/dispatch/tiers/generated/tier.cpp).

Each test runs in a fresh interpreter on a backend with a compiler table
(host: the system C compiler; opencl: PoCL here) with its own FLAGOS_CACHE_DIR,
and asserts through the cache's own counters (kernel_cache_stats()), never
through wall time:
  - generated kernels match CPU (contiguous, strided, broadcast inputs);
  - a loop over changing shapes never compiles on the calling thread after
    each operator's first generic build; specializations build in the
    background and are swapped in;
  - a second process finds its kernels on disk (zero compiles);
  - truncated / garbled cache files are detected, counted and rebuilt;
  - a kernel that fails to compile falls to the next tier and is reported.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from conftest import CORE_ERROR, check_ok, python_subprocess

# On host, FLAGOS_OP_<ID>=generated routes past the native kernels; opencl
# has no native pointwise/reduction kernels, so the generated tier is its
# first choice anyway.
GENERATED_ROUTES = {
    f"FLAGOS_OP_{op.upper()}": "generated"
    for op in ("add", "mul", "sub", "div", "sigmoid", "gelu", "where", "clamp", "sum", "mean")
    + ("amax", "softmax", "log_softmax", "relu", "exp", "tanh", "neg", "abs", "eq", "lt")
}


def _has_compiler(backend: str) -> str | None:
    """None when `backend` initializes and has a compiler table, else why not."""
    if CORE_ERROR is not None:
        return CORE_ERROR
    if not hasattr(torch.ops.flagos, "_kernel_cache_stats"):
        return "the core was built without the operator catalog"
    proc = python_subprocess(
        f"""
        import flagos_torchfl as ft
        ft.initialize({backend!r})
        print(ft.backend_info(verbose=False)["compiler"])
        """,
        timeout=120,
    )
    if proc.returncode != 0:
        return f"backend {backend} unavailable: {proc.stderr.strip()[-300:]}"
    if proc.stdout.strip() in ("", "None"):
        return f"backend {backend} has no compiler table"
    return None


@pytest.fixture(params=["host", "opencl"])
def backend(request):
    why = _has_compiler(request.param)
    if why:
        if request.param == "host" and os.environ.get("CI"):
            pytest.fail(why)  # CI installs a C compiler: host must generate
        pytest.skip(why)
    return request.param


def run(backend: str, code: str, cache_dir, timeout: float = 600, **env: str) -> dict:
    """Runs `code` (after a prelude defining ft, torch, dev, stats()) and returns its last JSON line."""
    prelude = f"""
import json, torch, flagos_torchfl as ft
ft.initialize({backend!r})
dev = torch.device("flagos")
def stats():
    ft.wait_for_specializations()
    return ft.kernel_cache_stats()
"""
    proc = python_subprocess(
        prelude + code,
        timeout=timeout,
        FLAGOS_CACHE_DIR=str(cache_dir),
        **{**GENERATED_ROUTES, **env},
    )
    out = check_ok(proc)
    result = json.loads(out.strip().splitlines()[-1])
    result["_stderr"] = proc.stderr
    return result


OPS_VS_CPU = """
torch.manual_seed(0)
a = torch.randn(6, 5)
b = torch.randn(5)           # broadcast
t = torch.randn(5, 6).t()    # strided
m = a > 0
cases = {
    "add": lambda x, y, z, k: x + y,
    "add_alpha": lambda x, y, z, k: torch.add(x, z, alpha=2.5),
    "mul_scalar": lambda x, y, z, k: x * 3,
    "sub": lambda x, y, z, k: x - z,
    "div": lambda x, y, z, k: x / (z.abs() + 1),
    "sigmoid": lambda x, y, z, k: torch.sigmoid(z),
    "gelu": lambda x, y, z, k: torch.nn.functional.gelu(x),
    "gelu_tanh": lambda x, y, z, k: torch.nn.functional.gelu(x, approximate="tanh"),
    "where": lambda x, y, z, k: torch.where(k, x, y),
    "clamp": lambda x, y, z, k: torch.clamp(x, -0.5, 0.5),
    "relu_": lambda x, y, z, k: torch.relu_(x.clone()),
    "exp_strided": lambda x, y, z, k: torch.exp(z),
    "eq": lambda x, y, z, k: x == y,
    "sum_dim": lambda x, y, z, k: x.sum(dim=1),
    "sum_all": lambda x, y, z, k: z.sum(),
    "mean_keepdim": lambda x, y, z, k: z.mean(dim=0, keepdim=True),
    "amax": lambda x, y, z, k: x.amax(dim=0),
    "softmax": lambda x, y, z, k: torch.softmax(x, dim=-1),
    "log_softmax": lambda x, y, z, k: torch.log_softmax(z, dim=0),
    "int_add": lambda x, y, z, k: (x * 10).int() + 3,
}
torch.set_default_dtype(torch.float32)
bad = {}
for name, fn in cases.items():
    want = fn(a, b, t, m)
    got = fn(a.to(dev), b.to(dev), t.to(dev), m.to(dev))
    try:
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    except AssertionError as e:
        bad[name] = str(e)[:300]
tiers = ft.op_stats()
generated = sorted(op for op, t in tiers.items() if t.get("generated"))
print(json.dumps({"bad": bad, "generated": generated, "stats": stats()}))
"""


def test_generated_kernels_match_cpu(backend, tmp_path):
    r = run(backend, OPS_VS_CPU, tmp_path)
    assert r["bad"] == {}, r["bad"]
    for op in ("aten::add.Tensor", "aten::sum.dim_IntList", "aten::_softmax", "aten::where.self"):
        assert op in r["generated"], (op, r["generated"])
    assert r["stats"]["launches"] > 0 and r["stats"]["build_failures"] == 0, r["stats"]


DYNAMIC_SHAPES = """
def step(batch, seq):
    x = torch.randn(batch, seq, 16, device=dev)
    w = torch.randn(16, device=dev)
    y = torch.nn.functional.gelu(x * w + 1.0)
    return torch.softmax(y, dim=-1).sum(dim=1)

step(2, 3)                                   # first call: generic builds
after_first = stats()["sync_builds"]
for batch, seq in [(3, 5), (7, 1), (4, 9), (2, 3), (5, 6), (1, 17), (8, 8), (3, 5)]:
    for _ in range(3):                       # the 3rd call of a shape requests specialization
        step(batch, seq)
end = stats()
# The specialized kernels are ready now: these calls use them.
before = end["specialized_launches"]
for batch, seq in [(3, 5), (8, 8)]:
    step(batch, seq)
print(json.dumps({"after_first": after_first, "end": end,
                  "specialized_delta": stats()["specialized_launches"] - before}))
"""


def test_dynamic_shapes_never_wait_for_a_compiler_after_the_first_build(backend, tmp_path):
    r = run(backend, DYNAMIC_SHAPES, tmp_path, FLAGOS_SPECIALIZE="after:3")
    assert r["after_first"] > 0, r
    # New shapes reuse the generic kernels: no compile on the calling thread.
    assert r["end"]["sync_builds"] == r["after_first"], r
    # Specializations were built in the background, and are used once ready.
    assert r["end"]["async_builds"] > 0 and r["end"]["build_failures"] == 0, r
    assert r["specialized_delta"] > 0, r
    # Note [Warm before publishing]: new kernels got their zero-work launches
    # (the call's size and a large grid) on the pool, before the caller used them.
    assert r["end"]["warm_launches"] >= r["end"]["async_builds"], r


PERSIST = """
x = torch.randn(64, 33, device=dev)
y = (torch.sigmoid(x) * 2 - x.abs()).sum(dim=0)
ref = (torch.sigmoid(x.cpu()) * 2 - x.cpu().abs()).sum(dim=0)
torch.testing.assert_close(y.cpu(), ref, rtol=1e-5, atol=1e-5)
print(json.dumps(stats()))
"""


def test_a_second_process_finds_its_kernels_on_disk(backend, tmp_path):
    first = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    assert first["sync_builds"] > 0 and first["disk_writes"] == first["sync_builds"], first
    second = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    assert second["sync_builds"] == 0, second
    assert second["disk_hits"] == first["sync_builds"], (first, second)


def test_the_next_process_preloads_what_this_one_used(backend, tmp_path):
    # Note [Kernel preload]: a manifest written at exit lists the kernels used;
    # the next process loads them in the background from initialize() on, so
    # its calls find them in memory, and it skips the fp64 probe.
    first = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    assert first["preloaded"] == 0, first
    manifests = list((tmp_path / "kernels").glob("manifest-*.txt"))
    assert len(manifests) == 1, manifests
    lines = manifests[0].read_text().splitlines()
    assert lines[0] == "flagos-kernel-manifest 3" and len(lines) - 2 == first["sync_builds"], lines
    # The preload runs on the background pool; a caller that gets to a kernel
    # first loads it from disk itself (no compile either). Counting what the
    # preload did needs it finished before the calls: since shape classes
    # made new-shape first calls ~0.5 ms faster, a loaded machine let the
    # caller win the race for one kernel.
    second = run(backend, "ft.wait_for_specializations()\n" + PERSIST, tmp_path,
                 FLAGOS_SPECIALIZE="off")  # fmt: skip
    assert second["preloaded"] == first["sync_builds"], second
    assert second["sync_builds"] == 0 and second["build_failures"] == 0, second
    # Note [First launch]: each line also lists the kernel's global sizes and
    # argument sizes; the next process repeats those launches with no work
    # (NULL pointers, meta.work == 0) after each load, and computes right.
    shapes = [line.split() for line in lines[2:]]
    assert all(len(f) == 4 and f[1] != "-" and f[2] != "-" and f[3] == "0" for f in shapes), lines
    assert first["first_launches"] == 0, first
    assert second["first_launches"] == sum(len(f[1].split(",")) for f in shapes), (second, lines)
    off = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off", FLAGOS_PRELOAD="off")
    assert off["preloaded"] == 0 and off["sync_builds"] == 0, off
    assert off["first_launches"] == 0, off
    # A garbled manifest is ignored (probe, build or load on demand) and rewritten.
    manifests[0].write_text("flagos-kernel-manifest 2\nfp64 1\nnot-a-key - -\n")
    garbled = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    assert garbled["preloaded"] == 0 and garbled["build_failures"] == 0, garbled
    assert manifests[0].read_text().splitlines()[0] == "flagos-kernel-manifest 3"
    assert len(manifests[0].read_text().splitlines()) == len(lines)


def test_a_bad_preload_value_is_a_clear_error(tmp_path):
    proc = python_subprocess(
        """
        import torch, flagos_torchfl as ft
        ft.initialize("host")
        torch.sigmoid(torch.randn(4, device="flagos"))
        """,
        FLAGOS_CACHE_DIR=str(tmp_path),
        FLAGOS_PRELOAD="sometimes",
        FLAGOS_OP_SIGMOID="generated",
    )
    assert proc.returncode != 0
    assert "FLAGOS_PRELOAD='sometimes'" in proc.stderr, proc.stderr


# Asking whether the backend has a compiler before initialize() (the raw
# cache stats op, the list of generated ops) says "not yet", not "never": the
# answer is only kept once a backend is loaded.
ASKED_BEFORE_INITIALIZE = """
import json, torch, flagos_torchfl as ft
import flagos_torchfl._C  # the core, loaded but not initialized (tools do this)
before = json.loads(torch.ops.flagos._kernel_cache_stats())["compiler"]
generated_before = list(torch.ops.flagos._catalog_generated_ids())
ft.initialize("host")
x = torch.randn(8)
got = torch.relu(x.to("flagos")).cpu()
print(json.dumps({
    "before": before,
    "generated_before": generated_before,
    "after": ft.kernel_cache_stats()["compiler"],
    "relu_generated": "relu" in torch.ops.flagos._catalog_generated_ids(),
    "relu": ft.op_stats().get("aten::relu", {}),
    "equal": torch.equal(got, torch.relu(x)),
}))
"""


def test_the_compiler_is_found_when_asked_before_initialize(tmp_path):
    why = _has_compiler("host")
    if why:
        pytest.skip(why)
    proc = python_subprocess(
        ASKED_BEFORE_INITIALIZE, FLAGOS_CACHE_DIR=str(tmp_path), FLAGOS_OP_RELU="generated"
    )
    r = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert r["before"] is None and r["generated_before"] == [], r
    assert r["after"] == "c" and r["relu_generated"], r
    assert r["relu"] == {"generated": 1} and r["equal"], r


def test_corrupt_cache_files_are_rebuilt(backend, tmp_path):
    first = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    files = sorted((tmp_path / "kernels").rglob("*.fkc"))
    assert len(files) == first["disk_writes"] >= 3, files
    files[0].write_bytes(files[0].read_bytes()[:50])  # truncated
    data = bytearray(files[1].read_bytes())
    data[-10] ^= 0xFF  # one flipped byte in the payload
    files[1].write_bytes(bytes(data))
    files[2].write_bytes(b"garbage" * 100)  # not a cache file at all
    second = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    assert second["disk_corrupt"] == 3 and second["sync_builds"] == 3, second
    third = run(backend, PERSIST, tmp_path, FLAGOS_SPECIALIZE="off")
    assert third["sync_builds"] == 0 and third["disk_corrupt"] == 0, third


FAULT = """
x = torch.randn(8, 8, device=dev)
y = torch.randn(8, 8, device=dev)
z = x + y
torch.testing.assert_close(z.cpu(), x.cpu() + y.cpu())
z = x + y                                 # the failure is remembered, reported once
tiers = ft.op_stats()["aten::add.Tensor"]
print(json.dumps({"stats": stats(), "tiers": tiers}))
"""


def test_a_kernel_that_fails_to_compile_falls_to_the_next_tier(backend, tmp_path):
    r = run(backend, FAULT, tmp_path, FLAGOS_KERNEL_FAULT="add", FLAGOS_SPECIALIZE="off")
    assert r["stats"]["build_failures"] == 1, r["stats"]
    assert r["stats"]["failed_calls"] == 2, r["stats"]
    assert "generated" not in r["tiers"] and sum(r["tiers"].values()) == 2, r["tiers"]
    assert r["_stderr"].count("generated kernel for 'add' failed to build") == 1, r["_stderr"]
    assert "FLAGOS_KERNEL_FAULT" in r["_stderr"]


def test_an_unwritable_cache_dir_keeps_kernels_in_memory(backend, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    r = run(backend, PERSIST, blocker, FLAGOS_SPECIALIZE="off")
    assert r["sync_builds"] > 0 and r["disk_writes"] == 0, r


def test_a_bad_specialize_policy_is_a_clear_error(tmp_path):
    if _has_compiler("host"):
        pytest.skip(_has_compiler("host"))
    proc = python_subprocess(
        """
        import torch, flagos_torchfl as ft
        ft.initialize("host")
        x = torch.ones(3, device="flagos")
        print(x + x)
        """,
        FLAGOS_SPECIALIZE="sometimes",
        FLAGOS_OP_ADD="generated",
        FLAGOS_CACHE_DIR=str(tmp_path),
    )
    assert proc.returncode != 0
    assert "FLAGOS_SPECIALIZE='sometimes'" in proc.stderr, proc.stderr[-2000:]


def test_kernel_cache_stats_in_backend_info():
    if CORE_ERROR is not None:
        pytest.skip(CORE_ERROR)
    import flagos_torchfl as ft

    info = ft.backend_info(verbose=False)
    assert "kernel_cache" in info and "policy" in info["kernel_cache"]
    json.dumps(info["kernel_cache"])


INDEX_ERRORS = """
x = torch.randn(3, 4)
cases = {
    "index_select": lambda t, i: t.index_select(0, i),
    "embedding": lambda t, i: torch.nn.functional.embedding(i, t),
    "gather": lambda t, i: t.gather(0, i.view(1, 1).expand(1, 4)),
    "scatter_add_": lambda t, i: t.clone().scatter_add_(0, i.view(1, 1).expand(1, 4),
                                                       torch.ones(1, 4, device=t.device)),
}
out = {}
for name, fn in cases.items():
    for v in (-1, 3):
        errors = []
        for d in ("cpu", dev):
            try:
                fn(x.to(d), torch.tensor([v], device=d))
                errors.append(None)
            except Exception as e:
                errors.append([type(e).__name__, str(e).splitlines()[0]])
        out[f"{name}[{v}]"] = errors
ok = torch.tensor([2, 0], device=dev)
torch.testing.assert_close(x.to(dev).index_select(0, ok).cpu(), x.index_select(0, ok.cpu()))
tiers = ft.op_stats()["aten::index_select"]
print(json.dumps({"errors": out, "tiers": tiers}))
"""


def test_out_of_range_indices_raise_as_on_cpu(backend, tmp_path):
    routes = {
        f"FLAGOS_OP_{op}": "generated"
        for op in ("INDEX_SELECT", "EMBEDDING", "GATHER", "SCATTER_ADD")
    }
    r = run(backend, INDEX_ERRORS, tmp_path, **routes)
    for case, (cpu, device) in r["errors"].items():
        # CPU's type and message; ours goes on to name the index given.
        assert cpu is not None and device[0] == cpu[0], (case, cpu, device)
        assert device[1].startswith(cpu[1]) and case.split("[")[1].rstrip("]") in device[1], (
            case,
            cpu,
            device,
        )
    assert r["tiers"].get("generated", 0) >= 1, r["tiers"]


EMPTY_OUTPUTS = """
torch.manual_seed(0)
cases = {
    "exp": lambda x: torch.exp(x),
    "add": lambda x: x + x,
    "sum_keep_empty": lambda x: x.sum(2),
    "softmax": lambda x: torch.softmax(x, -1),
    "cat": lambda x: torch.cat([x, x], 0),
}
x = torch.randn(1, 0, 3)
bad = {}
ft.reset_op_stats()
for name, fn in cases.items():
    want, got = fn(x), fn(x.to(dev))
    if got.shape != want.shape or got.dtype != want.dtype:
        bad[name] = [list(want.shape), list(got.shape), str(want.dtype), str(got.dtype)]
    else:
        torch.testing.assert_close(got.cpu(), want)
fallbacks = {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}
print(json.dumps({"bad": bad, "fallbacks": fallbacks}))
"""


def test_empty_outputs_need_no_kernel(backend, tmp_path):
    # Nothing to write: the bridge returns the meta-shaped outputs itself
    # instead of sending a zero-size call to the host.
    r = run(backend, EMPTY_OUTPUTS, tmp_path)
    assert r["bad"] == {}, r["bad"]
    assert r["fallbacks"] == {}, r["fallbacks"]


def test_hypot_at_the_float_max_and_logit_with_a_large_eps_match_cpu():
    # Samples torch 2.15's OpInfo added: sqrt(a*a + b*b) overflowed to inf
    # at 3.4e38, and clamp(x, eps, 1 - eps) with eps > 0.5 gave 1 - eps where
    # CPU's logit takes eps (x < eps is tested first); the backward ignored eps.
    a = torch.tensor([3.4028e38, 1.0, -3e38, 3.0])
    b = torch.tensor([1.0, 3.4028e38, 1.0, 4.0])
    torch.testing.assert_close(torch.hypot(a.to("flagos"), b.to("flagos")).cpu(), torch.hypot(a, b))
    x = torch.tensor([0.029, 0.4, 0.7, 1.2, -0.1, float("nan")], requires_grad=True)
    for eps in (None, 0.6, 0.1):
        xd = x.detach().to("flagos").requires_grad_()
        ref, out = torch.logit(x, eps), torch.logit(xd, eps)
        torch.testing.assert_close(out.cpu(), ref, equal_nan=True)
        (grad,) = torch.autograd.grad(ref.nansum(), x)
        (grad_dev,) = torch.autograd.grad(out.nansum(), xd)
        torch.testing.assert_close(grad_dev.cpu(), grad, equal_nan=True)


WORK_GROUPS = """
import torch.nn.functional as F
torch.manual_seed(0)
bad = {}
# Sizes around the local size and primes: every launch is padded up to a
# multiple of it, and the items past the end must do nothing.
for n in (1, 63, 64, 65, 3001, 9973):
    x, y = torch.randn(n, 3), torch.randn(3)
    cases = {
        "pointwise": lambda a, b: F.gelu(a * 1.5 + b).sigmoid() * a,
        "sum rows": lambda a, b: (a + b).sum(-1),
        "sum columns": lambda a, b: a.sum(0),
        "softmax": lambda a, b: torch.softmax(a.t() * 2, dim=-1),
        "in place": lambda a, b: a.clone().mul_(b).add_(1),
    }
    for name, fn in cases.items():
        try:
            torch.testing.assert_close(fn(x.to(dev), y.to(dev)).cpu(), fn(x, y), rtol=1e-5, atol=1e-5)
        except AssertionError as e:
            bad[f"{name} n={n}"] = str(e)[:200]
raw = json.loads(torch.ops.flagos._kernel_cache_stats())
print(json.dumps({"bad": bad, "local": [d["local_size"] for d in raw["devices"]],
                  "launches": stats()["launches"]}))
"""


def test_generated_launches_have_an_explicit_local_size_and_skip_the_padding(backend, tmp_path):
    # Note [Launch geometry]: the plugin's preferred size (host: its 4096-item
    # chunk) or min(256, the device's limit); FLAGOS_WORK_GROUP_SIZE overrides.
    r = run(backend, WORK_GROUPS, tmp_path / "default")
    assert r["bad"] == {} and r["launches"] > 0, r
    assert r["local"] == [4096 if backend == "host" else 256], r
    r = run(backend, WORK_GROUPS, tmp_path / "odd", FLAGOS_WORK_GROUP_SIZE="7")
    assert r["bad"] == {} and r["local"] == [7], r


def test_a_bad_work_group_size_is_a_clear_error(backend, tmp_path):
    proc = python_subprocess(
        f"""
        import torch, flagos_torchfl as ft
        ft.initialize({backend!r})
        (torch.ones(3, device="flagos") + 1).cpu()
        """,
        FLAGOS_CACHE_DIR=str(tmp_path),
        FLAGOS_WORK_GROUP_SIZE="0",
        **GENERATED_ROUTES,
    )
    assert proc.returncode != 0 and "FLAGOS_WORK_GROUP_SIZE='0'" in proc.stderr, proc.stderr[-800:]
