"""Mixed precision on flagos (flagos_torchfl.amp) and as CUDA scripts spell it under the alias."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from flagos_torchfl import amp, cuda_alias


@pytest.fixture(autouse=True)
def clean_policy():
    was_active = cuda_alias.is_active()
    cuda_alias.activate()
    amp.reset_policy()
    amp._warned_cuda_default = False
    yield
    amp.reset_policy()
    amp._warned_cuda_default = False
    if not was_active:
        cuda_alias.deactivate()


def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(8, 4).cuda(), torch.randn(2, 8, device="cuda")


def cuda_default_warnings(record):
    return [w for w in record if "without dtype=" in str(w.message)]


def test_host_policy_prefers_bfloat16():
    policy = amp.get_policy()
    assert policy.dtype == torch.bfloat16
    assert "host" in policy.source
    assert policy.op_lists == "cuda"
    assert set(policy.supported_dtypes) >= {torch.float16, torch.bfloat16}
    assert torch.cuda.is_bf16_supported()


def test_autocast_cuda_without_dtype_runs_the_policy_dtype_and_warns_once():
    model, x = linear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            with torch.autocast("cuda"):
                y = model(x)
    assert y.dtype == torch.bfloat16
    (warning,) = cuda_default_warnings(record)
    text = str(warning.message)
    assert "float16 on CUDA" in text and "bfloat16" in text and "dtype=" in text
    assert "FLAGOS_AMP_DTYPE" in text and "set_policy" in text
    assert warning.filename == __file__  # points at the script, not at torch or us


def test_pytorch_default_autocast_dtype_for_flagos_is_float16():
    # amp.resolve_dtype tells "not set by this thread" by this value.
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.get_autocast_dtype("flagos")))
    thread.start()
    thread.join()
    assert seen == [amp._TORCH_DEFAULT_DTYPE] == [torch.float16]


def test_explicit_dtype_wins_and_does_not_warn():
    model, x = linear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with torch.autocast("cuda", dtype=torch.float16):
            assert model(x).dtype == torch.float16
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            assert model(x).dtype == torch.bfloat16
        with torch.autocast("flagos"):  # flagos spelled out: the policy, no CUDA default involved
            assert model(x).dtype == torch.bfloat16
    assert not cuda_default_warnings(record)


def test_policy_dtype_matching_cuda_does_not_warn():
    amp.set_policy(dtype=torch.float16)
    model, x = linear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with torch.autocast("cuda"):
            assert model(x).dtype == torch.float16
    assert not cuda_default_warnings(record)
    assert amp.get_policy().source == "set_policy"


def test_thread_set_dtype_and_enclosing_autocast_are_respected():
    model, x = linear()
    with torch.autocast("cuda", dtype=torch.float16):
        with torch.autocast("cuda"):  # inherits float16, as on CUDA
            assert model(x).dtype == torch.float16
    previous = torch.get_autocast_dtype("flagos")
    torch.set_autocast_dtype("cuda", torch.float16)  # "cuda" means flagos here too
    try:
        assert torch.get_autocast_dtype("flagos") == torch.float16
    finally:
        torch.set_autocast_dtype("flagos", previous)


def test_other_threads_use_the_policy():
    model, x = linear()
    dtypes = []

    def work():
        with torch.autocast("flagos"):
            dtypes.append(model(x).dtype)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert dtypes == [torch.bfloat16]


def test_autocast_state_queries_with_cuda():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("cuda") and torch.is_autocast_enabled()
        assert torch.get_autocast_dtype("cuda") == torch.bfloat16
        assert torch.get_autocast_gpu_dtype() == torch.bfloat16
    assert not torch.is_autocast_enabled("cuda")


def test_torch_cuda_amp_autocast_and_custom_fwd():
    model, x = linear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with torch.cuda.amp.autocast():
            y = model(x)
    assert y.dtype == torch.bfloat16
    assert cuda_default_warnings(record)

    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx, a):
            return a * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx, grad):
            return grad * 2

    a = torch.ones(2, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = Scale.apply(a)
    assert out.dtype == torch.float32  # cast_inputs applied: the inputs were on "cuda"
    out.sum().backward()


def test_fp32_and_lower_precision_overrides():
    model, x = linear()
    amp.set_policy(fp32_ops=["linear", "addmm"])
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert model(x).dtype == torch.float32
        assert torch.mm(x, x.t()).dtype == torch.bfloat16  # not overridden
    amp.set_policy(fp32_ops=[], lower_precision_ops=["softmax"])
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert model(x).dtype == torch.bfloat16  # back to CUDA's list
        assert torch.softmax(x, dim=1).dtype == torch.bfloat16  # fp32 on CUDA's list
    amp.reset_policy()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert torch.softmax(x, dim=1).dtype == torch.float32
    assert amp.get_policy().fp32_ops == ()


def test_bad_policies_are_refused_without_changes():
    before = amp.get_policy()
    with pytest.raises(ValueError, match="unknown ATen operator 'no_such_op'"):
        amp.set_policy(fp32_ops=["linear", "no_such_op"])
    with pytest.raises(ValueError, match="unknown autocast dtype"):
        amp.set_policy(dtype="float8")
    with pytest.raises(ValueError, match="not in supported_dtypes"):
        amp.set_policy(supported_dtypes=[torch.float16])
    with pytest.raises(ValueError, match="both in fp32_ops and lower_precision_ops"):
        amp.set_policy(fp32_ops=["mm"], lower_precision_ops=["mm"])
    assert amp.get_policy() == before
    model, x = linear()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert model(x).dtype == torch.bfloat16  # no override left behind


def test_unsupported_dtype_disables_autocast_with_a_warning():
    amp.set_policy(dtype=torch.bfloat16, supported_dtypes=[torch.bfloat16])
    assert torch.cuda.is_bf16_supported()
    model, x = linear()
    with pytest.warns(UserWarning, match="not in the backend's supported autocast dtypes"):
        with torch.autocast("cuda", dtype=torch.float16):
            assert model(x).dtype == torch.float32


def test_parse_dtype():
    assert amp.parse_dtype("bf16") == amp.parse_dtype(" BFloat16 ") == torch.bfloat16
    assert amp.parse_dtype("half") == torch.float16
    assert amp.parse_dtype(torch.float32) == torch.float32


# ------------------------------------------------------------------ GradScaler


def scaler_run(device: str, scaler_factory):
    """A few scaled steps; step 2 gets an inf gradient. Returns (scales, weights per step)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = scaler_factory()
    scales, weights = [], []
    for step in range(6):
        optimizer.zero_grad()
        x = torch.arange(8.0).reshape(2, 4).to(device) / 8
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        if step == 2:
            model.weight.grad[0, 0] = float("inf")
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(model.weight.detach().cpu().clone())
    return scales, weights, scaler


@pytest.mark.parametrize(
    "factory",
    [
        lambda: torch.amp.GradScaler("cuda", init_scale=2.0**8, growth_interval=2),
        lambda: torch.amp.GradScaler(init_scale=2.0**8, growth_interval=2),  # default "cuda"
        lambda: torch.cuda.amp.GradScaler(init_scale=2.0**8, growth_interval=2),
    ],
    ids=["amp.GradScaler('cuda')", "amp.GradScaler()", "cuda.amp.GradScaler()"],
)
def test_grad_scaler_on_cuda_matches_cpu(factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.cuda.amp is deprecated
        scales, weights, scaler = scaler_run("cuda", factory)
    cpu_scales, cpu_weights, _ = scaler_run(
        "cpu", lambda: torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    )
    assert scaler.is_enabled() and scaler._device == "flagos"
    assert scales == cpu_scales == [256.0, 512.0, 256.0, 256.0, 512.0, 512.0]
    assert torch.equal(weights[2], weights[1])  # the inf step was skipped
    for mine, reference in zip(weights, cpu_weights, strict=True):
        torch.testing.assert_close(mine, reference)
    state = scaler.state_dict()
    assert state["scale"] == 512.0
