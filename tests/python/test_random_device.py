"""Random numbers on the device: Philox4x32-10 kernels (Note [Random numbers on the device]).

A reference Philox in numpy, checked against the paper's known-answer
vectors, predicts every element the kernels draw: uniform, Bernoulli and
integer draws bit for bit, normals within float rounding. Then the stream
contract (offsets, generators, state round trips), independence from launch
geometry and from the backend (host and opencl give the same bits), the
statistics on 10^6 samples, CPU's errors for bad arguments, and that none of
it reaches the host fallback.
"""

from __future__ import annotations

import json
import math
import os

import flagos_torchfl as ft
import numpy as np
import pytest
import torch
from conftest import check_ok, python_subprocess

# --- the reference ----------------------------------------------------------------

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
MASK = np.uint64(0xFFFFFFFF)


def philox(c0, c1, c2, c3, k0: int, k1: int):
    """Philox4x32-10 (Salmon et al., SC'11) on arrays of 32-bit words held in uint64."""
    c = [np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3)]
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0),
            p1 & MASK,
            (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1),
            p0 & MASK,
        ]
    return c


def stream(seed: int, offset: int, n: int):
    """The blocks of elements 0..n-1 of a call at (seed, offset)."""
    ctr = (np.arange(n, dtype=np.uint64) + np.uint64(offset)) & np.uint64(2**64 - 1)
    zeros = np.zeros(n, dtype=np.uint64)
    return philox(ctr & MASK, ctr >> np.uint64(32), zeros, zeros, seed & 0xFFFFFFFF, seed >> 32)


def seed_offset() -> tuple[int, int]:
    state = torch.flagos.get_rng_state().numpy().tobytes()
    return int.from_bytes(state[:8], "little"), int.from_bytes(state[8:], "little")


KAT = [  # Random123's kat_vectors: counter, key -> output
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_reference_philox_matches_the_papers_vectors(ctr, key, want):
    got = philox(*[[c] for c in ctr], *key)
    assert [int(w[0]) for w in got] == list(want)


# --- every element as the reference predicts ------------------------------------------


def test_uniform_float32_is_the_stream_bit_for_bit():
    torch.flagos.manual_seed(0)
    x = torch.empty(1000, device="flagos").uniform_().cpu().numpy()
    w = stream(0, 0, 1000)
    assert x[0] == np.float32(0x6627E8D5 >> 8) / np.float32(2**24)  # the first KAT vector
    np.testing.assert_array_equal(x, (w[0] >> np.uint64(8)).astype(np.float32) / np.float32(2**24))


def test_uniform_other_dtypes_and_bounds_are_the_stream():
    torch.flagos.manual_seed(12345)
    seed, offset = seed_offset()
    d = torch.empty(300, dtype=torch.float64, device="flagos").uniform_(-2, 3).cpu().numpy()
    w = stream(seed, offset, 300)
    u53 = (((w[0] << np.uint64(32)) | w[1]) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    np.testing.assert_array_equal(d, -2.0 + 5.0 * u53)
    seed, offset = seed_offset()
    h = torch.empty(300, dtype=torch.float16, device="flagos").uniform_().cpu()
    w = stream(seed, offset, 300)
    want = torch.from_numpy((w[0] >> np.uint64(21)).astype(np.float32) / np.float32(2**11))
    assert torch.equal(h, want.half())


def test_noncontiguous_output_takes_the_elements_row_major_index():
    torch.flagos.manual_seed(3)
    seed, offset = seed_offset()
    t = torch.empty(8, 6, device="flagos").t()  # (6, 8) with strides (1, 6)
    t.uniform_()
    w = stream(seed, offset, 48)
    want = (w[0] >> np.uint64(8)).astype(np.float32).reshape(6, 8) / np.float32(2**24)
    np.testing.assert_array_equal(t.cpu().numpy(), want)


def test_bernoulli_and_dropout_masks_are_the_stream():
    torch.flagos.manual_seed(5)
    seed, offset = seed_offset()
    b = torch.empty(4096, device="flagos").bernoulli_(0.3).cpu().numpy()
    w = stream(seed, offset, 4096)
    np.testing.assert_array_equal(b, ((w[0] >> np.uint64(8)) < 0.3 * 2**24).astype(np.float32))
    seed, offset = seed_offset()
    p = torch.linspace(0, 1, 4096, device="flagos")
    bt = torch.empty(4096, dtype=torch.int64, device="flagos").bernoulli_(p).cpu().numpy()
    w = stream(seed, offset, 4096)
    keep = (w[0] >> np.uint64(8)).astype(np.float64) < p.cpu().double().numpy() * 2**24
    np.testing.assert_array_equal(bt, keep.astype(np.int64))
    seed, offset = seed_offset()
    x = torch.randn(64, 64).to("flagos")
    out, mask = torch.ops.aten.native_dropout(x, 0.25, True)
    w = stream(seed, offset, 64 * 64)
    keep = ((w[0] >> np.uint64(8)) < 0.75 * 2**24).reshape(64, 64)
    np.testing.assert_array_equal(mask.cpu().numpy(), keep)
    xs = x.cpu().numpy()
    np.testing.assert_array_equal(out.cpu().numpy(), xs * keep * np.float32(1 / 0.75))


def test_integers_are_atens_range_reduction_of_the_stream():
    torch.flagos.manual_seed(11)
    seed, offset = seed_offset()
    r = torch.randint(-5, 1000, (2000,), device="flagos").cpu().numpy()
    w = stream(seed, offset, 2000)
    np.testing.assert_array_equal(r, (w[0] % np.uint64(1005)).astype(np.int64) - 5)
    seed, offset = seed_offset()
    big = torch.randint(0, 2**40, (500,), device="flagos").cpu().numpy()
    w = stream(seed, offset, 500)
    want = ((w[0] << np.uint64(32)) | w[1]) % np.uint64(2**40)
    np.testing.assert_array_equal(big, want.astype(np.int64))
    seed, offset = seed_offset()
    u8 = torch.empty(500, dtype=torch.uint8, device="flagos").random_().cpu().numpy()
    w = stream(seed, offset, 500)
    np.testing.assert_array_equal(u8, (w[0] % np.uint64(256)).astype(np.uint8))


def test_normals_follow_box_muller_on_the_pair():
    torch.flagos.manual_seed(21)
    seed, offset = seed_offset()
    z = torch.randn(20000, device="flagos").cpu().numpy().astype(np.float64)
    w = stream(seed, offset, 20000)
    u1 = 1.0 - (w[0] >> np.uint64(8)).astype(np.float64) / 2**24
    u2 = (w[1] >> np.uint64(8)).astype(np.float64) / 2**24
    want = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    # float32 arithmetic on both sides of a sqrt(-2 log u1) of at most ~5.9
    np.testing.assert_allclose(z, want, rtol=2e-6, atol=2e-6)
    seed, offset = seed_offset()
    zd = torch.randn(5000, dtype=torch.float64, device="flagos").cpu().numpy()
    w = stream(seed, offset, 5000)
    u1 = 1.0 - ((((w[0] << np.uint64(32)) | w[1]) >> np.uint64(11)).astype(np.float64) * 2.0**-53)
    u2 = (((w[2] << np.uint64(32)) | w[3]) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    np.testing.assert_allclose(
        zd, np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2), rtol=1e-13, atol=1e-13
    )


# --- the stream contract ----------------------------------------------------------------


def test_each_call_advances_the_offset_by_its_elements_rounded_to_4():
    torch.flagos.manual_seed(1)
    assert seed_offset() == (1, 0)
    torch.rand(10, device="flagos")
    assert seed_offset() == (1, 12)
    torch.nn.functional.dropout(torch.ones(3, 5, device="flagos"), 0.5)
    assert seed_offset() == (1, 28)


def test_explicit_generator_and_fork_rng():
    g = torch.Generator(device="flagos").manual_seed(77)
    a = torch.rand(100, device="flagos", generator=g)
    torch.flagos.manual_seed(77)
    assert torch.equal(a.cpu(), torch.rand(100, device="flagos").cpu())
    g.manual_seed(77)
    with torch.random.fork_rng(devices=[0], device_type="flagos"):
        torch.flagos.manual_seed(1)
        torch.rand(10, device="flagos")
    assert torch.equal(torch.rand(100, device="flagos", generator=g).cpu(), a.cpu())
    with pytest.raises(RuntimeError):
        torch.rand(10, device="flagos", generator=torch.Generator())  # a CPU generator


def _run(code: str, **env: str) -> dict:
    return json.loads(check_ok(python_subprocess(code, **env)).strip().splitlines()[-1])


# One script, several environments: the same seed and calls, hashed.
DRAWS = """
import hashlib, json, torch, flagos_torchfl as ft
ft.initialize()
torch.flagos.manual_seed(2024)
x = torch.randn(3000, 7).to("flagos")
draws = {
    "rand": torch.rand(100003, device="flagos"),
    "randn": torch.randn(1001, 33, device="flagos"),
    "randn64": torch.randn(999, dtype=torch.float64, device="flagos"),
    "rand_bf16": torch.rand(5000, dtype=torch.bfloat16, device="flagos"),
    "randint": torch.randint(-3, 70000, (12345,), device="flagos"),
    "bernoulli": torch.empty(7777, device="flagos").bernoulli_(0.1),
    "dropout": torch.ops.aten.native_dropout(x, 0.1, True)[1],
    "exponential": torch.empty(999, device="flagos").exponential_(2.0),
    "cauchy": torch.empty(999, device="flagos").cauchy_(),
    "log_normal": torch.empty(999, device="flagos").log_normal_(),
    "geometric": torch.empty(999, device="flagos").geometric_(0.2),
}
print(json.dumps({k: hashlib.sha256(v.cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest() for k, v in draws.items()}))
"""


@pytest.mark.parametrize("size", ["7", "64", "256"])
def test_same_numbers_whatever_the_work_group_size(size):
    base = _run(DRAWS, FLAGOS_WORK_GROUP_SIZE="1")
    assert _run(DRAWS, FLAGOS_WORK_GROUP_SIZE=size) == base


def _opencl_available() -> bool:
    proc = python_subprocess(
        "import flagos_torchfl as ft; ft.initialize('opencl')", FLAGOS_BACKEND="opencl"
    )
    return proc.returncode == 0


def test_host_and_opencl_draw_the_same_bits():
    if not _opencl_available():
        if os.environ.get("CI"):
            pytest.fail("opencl is not available (scripts/setup.sh installs PoCL)")
        pytest.skip("no opencl backend")
    assert _run(DRAWS, FLAGOS_BACKEND="host") == _run(DRAWS, FLAGOS_BACKEND="opencl")


# Two training steps of a transformer layer with dropout 0.1 (attention's
# too): every dropout mask, hashed, and the generator's state after them.
TRAINING_STEP = """
import hashlib, json, torch, flagos_torchfl as ft
import torch.nn.functional as F
ft.initialize()
torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1, batch_first=True)
model = torch.nn.ModuleDict({"layer": layer, "head": torch.nn.Linear(32, 10)}).to("flagos").train()
masks = []
def hook(mod, inp, out):
    masks.append(((out == 0) & (inp[0] != 0)).cpu())
for m in model.modules():
    if isinstance(m, torch.nn.Dropout):
        m.register_forward_hook(hook)
x, y = torch.randn(4, 12, 32).to("flagos"), torch.randint(0, 10, (4, 12)).to("flagos")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
torch.flagos.manual_seed(1234)
ft.reset_op_stats()
for _ in range(2):
    F.cross_entropy(model["head"](model["layer"](x)).reshape(-1, 10), y.reshape(-1)).backward()
    opt.step()
    opt.zero_grad()
stats = ft.op_stats()
print(json.dumps({
    "masks": [hashlib.sha256(m.numpy().tobytes()).hexdigest() for m in masks],
    "dropped": [int(m.sum()) for m in masks],
    "state": torch.flagos.get_rng_state().tolist(),
    "fallbacks": {op: t["fallback"] for op, t in stats.items() if t.get("fallback")},
    "dropout_calls": stats["aten::native_dropout"].get("generated", 0),
}))
"""


def test_a_training_step_with_dropout_draws_the_same_masks_on_host_and_opencl():
    host = _run(TRAINING_STEP, FLAGOS_BACKEND="host")
    assert host["fallbacks"] == {}, host
    assert host["dropout_calls"] == 8, host  # 3 nn.Dropout + attention's, 2 steps
    assert len(host["masks"]) == 6 and all(60 < d < 240 for d in host["dropped"]), host
    if not _opencl_available():
        if os.environ.get("CI"):
            pytest.fail("opencl is not available (scripts/setup.sh installs PoCL)")
        pytest.skip("no opencl backend")
    opencl = _run(TRAINING_STEP, FLAGOS_BACKEND="opencl")
    assert opencl["fallbacks"] == {}, opencl
    assert (opencl["masks"], opencl["state"]) == (host["masks"], host["state"])


# --- statistics, 10^6 samples ----------------------------------------------------------


def _ks_pvalue(samples: np.ndarray, cdf) -> float:
    """Kolmogorov-Smirnov: p-value of the largest distance to @p cdf."""
    x = np.sort(samples.astype(np.float64))
    n = len(x)
    f = cdf(x)
    d = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return min(
        1.0,
        max(
            0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
        ),
    )


N = 1_000_000


def test_kolmogorov_smirnov_uniform_normal_exponential():
    torch.flagos.manual_seed(8)
    u = torch.rand(N, device="flagos").cpu().numpy()
    assert _ks_pvalue(u, lambda x: x) > 1e-3
    z = torch.randn(N, device="flagos").cpu().numpy()
    erf = np.vectorize(math.erf)
    assert _ks_pvalue(z[:200_000], lambda x: 0.5 * (1 + erf(x / math.sqrt(2)))) > 1e-3
    e = torch.empty(N, device="flagos").exponential_(3.0).cpu().numpy()
    assert e.min() > 0
    assert _ks_pvalue(e, lambda x: 1 - np.exp(-3.0 * x)) > 1e-3


def test_dropout_keeps_one_minus_p_and_scales():
    torch.flagos.manual_seed(9)
    p = 0.1
    out, mask = torch.ops.aten.native_dropout(torch.ones(N, device="flagos"), p, True)
    keep = mask.cpu().numpy().mean()
    sigma = math.sqrt(p * (1 - p) / N)
    assert abs(keep - (1 - p)) < 5 * sigma
    o = out.cpu().numpy()
    assert set(np.unique(o)) == {0.0, np.float32(1 / (1 - p))}


def test_randperm_is_a_uniform_permutation_on_the_device():
    torch.flagos.manual_seed(10)
    ft.reset_op_stats()
    p = torch.randperm(N, device="flagos")
    assert torch.equal(p.cpu().sort().values, torch.arange(N))
    stats = ft.op_stats()
    assert stats["aten::randperm"] == {"decomposition": 1}, stats
    assert not any(t.get("fallback") for t in stats.values()), stats
    # Where element 0 lands, over 4000 permutations of 8: chi-square, 7 dof.
    first = torch.stack([torch.randperm(8, device="flagos") for _ in range(4000)]).cpu()
    counts = np.bincount(first.argmin(dim=1).numpy(), minlength=8)
    chi2 = ((counts - 500.0) ** 2 / 500.0).sum()
    assert chi2 < 24.3, counts  # p = 1e-3


def test_multinomial_frequencies_and_zero_weights():
    torch.flagos.manual_seed(12)
    w = torch.tensor([1.0, 0.0, 6.0, 3.0, 0.0], device="flagos")
    expected = (w / w.sum()).cpu().numpy()
    ft.reset_op_stats()
    draws = {
        "replacement": torch.multinomial(w, 100_000, replacement=True).cpu(),
        "one sample a row": torch.multinomial(w.repeat(100_000, 1), 1).cpu().flatten(),
    }
    for what, d in draws.items():
        counts = np.bincount(d.numpy(), minlength=5)
        assert counts[1] == counts[4] == 0, (what, counts)
        keep = expected > 0
        chi2 = ((counts[keep] - 1e5 * expected[keep]) ** 2 / (1e5 * expected[keep])).sum()
        assert chi2 < 16.3, (what, counts)  # 3 dof, p = 1e-3
    without = torch.multinomial(w.repeat(1000, 1), 3).cpu()
    assert all(sorted(r.tolist()) == [0, 2, 3] for r in without)
    stats = ft.op_stats()
    assert stats["aten::multinomial"] == {"decomposition": 3}, stats
    assert not any(t.get("fallback") for t in stats.values()), stats


@pytest.mark.parametrize(
    "weights,n", [([0.0, 0.0], 1), ([1.0, -1.0], 1), ([1.0, float("inf")], 1), ([1.0, 1.0], 3)]
)
def test_multinomial_errors_are_cpus(weights, n):
    with pytest.raises(RuntimeError) as cpu:
        torch.multinomial(torch.tensor(weights), n)
    with pytest.raises(RuntimeError) as dev:
        torch.multinomial(torch.tensor(weights, device="flagos"), n)
    assert str(dev.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def test_rrelu_and_attention_dropout_stay_on_the_device():
    torch.flagos.manual_seed(13)
    ft.reset_op_stats()
    x = torch.randn(20000, device="flagos", requires_grad=True)
    y = torch.nn.RReLU(0.1, 0.3).train()(x)
    y.sum().backward()
    xs, ys, g = x.detach().cpu(), y.detach().cpu(), x.grad.cpu()
    slope = ys[xs < 0] / xs[xs < 0]
    assert 0.1 <= slope.min() and slope.max() <= 0.3 and abs(slope.mean() - 0.2) < 0.005
    assert torch.equal(ys[xs > 0], xs[xs > 0]) and torch.allclose(g[xs < 0], slope)
    q = torch.randn(2, 4, 16, 8, device="flagos", requires_grad=True)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.2)
    out.sum().backward()
    stats = ft.op_stats()
    assert stats["aten::rrelu_with_noise"] == {"decomposition": 1}, stats
    assert stats["aten::native_dropout"] == {"generated": 1}, stats
    assert not any(t.get("fallback") for t in stats.values()), stats


# --- errors and tiers -------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.uniform_(1, 0),
        lambda t: t.normal_(0, -1),
        lambda t: t.bernoulli_(1.5),
        lambda t: t.exponential_(-1),
        lambda t: t.geometric_(0),
        lambda t: t.random_(5, 3),
        lambda t: torch.ops.aten.native_dropout(t, 1.5, True),
    ],
)
def test_bad_arguments_raise_cpus_error(call):
    with pytest.raises(RuntimeError) as cpu:
        call(torch.empty(10))
    with pytest.raises(RuntimeError) as dev:
        call(torch.empty(10, device="flagos"))
    assert str(dev.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def test_random_operators_run_generated_with_no_fallback():
    ft.reset_op_stats()
    x = torch.randn(64, 8, device="flagos", requires_grad=True)
    torch.nn.functional.dropout(x, 0.2).sum().backward()
    torch.rand(10, device="flagos")
    torch.randint(0, 5, (10,), device="flagos")
    torch.empty(10, device="flagos").normal_()
    torch.bernoulli(torch.full((10,), 0.5, device="flagos"))
    torch.empty(10, device="flagos").exponential_()
    stats = ft.op_stats()
    random_ops = {
        op: tiers
        for op, tiers in stats.items()
        if any(
            k in op for k in ("dropout", "uniform", "random_", "normal", "bernoulli", "exponential")
        )
    }
    assert random_ops, stats
    for op, tiers in random_ops.items():
        assert tiers.get("fallback", 0) == 0, (op, tiers)
    assert stats["aten::native_dropout"].get("generated", 0) == 1, stats


# PyTorch's OpInfos of random operators (left out of the catalog sweep, whose
# values they cannot match): run on the device, none of their catalog random
# overloads may reach the host.


def _random_opinfos():
    from torch.testing._internal.common_methods_invocations import op_db

    names = ("dropout", "bernoulli", "normal", "rand", "uniform", "multinomial", "rrelu")
    # Names alike, and a variant that draws nothing (training=False).
    not_random = ("normalize", "__rand__", "native_dropout_backward")
    return [
        op
        for op in op_db
        if any(n in op.name for n in names)
        and op.variant_test_name != "without_train"
        and not any(n in op.name for n in not_random)
    ]


@pytest.mark.parametrize("op", _random_opinfos(), ids=lambda op: op.name + op.variant_test_name)
def test_random_opinfos_take_no_host_fallback(op):
    catalog_random = {
        row.split("=")[0]
        for row in torch.ops.flagos._catalog_overloads()
        if row.split("=")[1] in RANDOM_IDS
    }
    ran = 0
    for dtype in (torch.float32, torch.float16):
        if dtype not in op.supported_dtypes("cpu"):
            continue
        # Samples made for the device: factories get device="flagos".
        for s in op.sample_inputs("flagos", dtype, requires_grad=False):
            if str(s.kwargs.get("device", "")) == "cpu":
                continue  # samples that ask for a CPU result
            ft.reset_op_stats()
            try:
                out = op(s.input, *s.args, **s.kwargs)
            except (RuntimeError, ValueError):
                continue  # arguments CPU rejects too (the error tests above)
            outs = out if isinstance(out, (tuple, list)) else [out]
            assert all(o.device.type == "flagos" for o in outs if isinstance(o, torch.Tensor))
            for name, tiers in ft.op_stats().items():
                if name in catalog_random:
                    assert tiers.get("fallback", 0) == 0, (op.name, name, tiers)
                    ran += tiers.get("generated", 0)
    assert ran > 0, f"{op.name}: no random catalog operator ran"


RANDOM_IDS = {
    "uniform",
    "normal",
    "log_normal",
    "exponential",
    "cauchy",
    "geometric",
    "bernoulli_scalar",
    "bernoulli_tensor",
    "native_dropout",
    "random_from_to",
    "random",
    "normal_tensor_float",
    "normal_float_tensor",
    "normal_tensor_tensor",
    "randperm",
    "multinomial",
    "rrelu_with_noise",
}
