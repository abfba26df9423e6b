"""Third-party models (torchvision, timm, transformers) on flagos against CPU.

Each model of zoo/models.py (the libraries' own classes, tiny configurations,
random seeded weights) runs one forward and backward in training mode on
CPU and on flagos from the same weights. Compared: the output and every
parameter's gradient. And counted: host fallbacks (the target is none).

Tolerances, with their reason. Most tensors agree to rtol 1e-4. Some models
amplify rounding noise: batch norm over a handful of values (a ResNet's
last stage sees 2 values per channel at batch 2) divides by a tiny
variance. For those the yardstick is CPU against CPU: the same model with
its weights perturbed by 1e-6 relative gives the noise floor of that very
tensor, and flagos must stay within a few times it (float32 rounding is
~6e-8 per operation, well below a 1e-6 perturbation). No tolerance is
loosened across the board.

With dropout on (p=0.1, drop-path where the model has it: DROPOUT), flagos
and CPU draw different masks, so a step cannot match CPU's; instead a few
SGD steps on one batch must lower the loss as they do on CPU, with the
random operators generated on the device and no host fallback.

Packages that are not installed are skipped, unless FLAGOS_REQUIRE_ZOO=1
(CI's model-zoo environment, scripts/torch_env.sh 2.14.1).
"""

from __future__ import annotations

import copy

import flagos_torchfl as ft
import pytest
import torch
from conftest import needs_package
from zoo.models import DROPOUT, ZOO

BASE_RTOL = 1e-4
NOISE_FACTOR = 4.0
PERTURBATION = 1e-6


def to(value, device):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def run(model, inputs, loss_fn, device):
    """Forward + backward; the output and the gradients by parameter name, on CPU."""
    model = model.to(device).train()
    model.zero_grad(set_to_none=True)
    out = model(*(to(x, device) for x in inputs))
    loss = loss_fn(out)
    loss.backward()
    tensors = {"loss": loss.detach()}
    logits = getattr(out, "logits", out)
    tensors["output"] = logits.detach()
    for name, p in model.named_parameters():
        if p.grad is not None:
            tensors[f"grad {name.removeprefix('_orig_mod.')}"] = p.grad  # torch.compile's wrapper
    return {k: v.detach().cpu().double() for k, v in tensors.items()}


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / (scale if scale > 0 else 1.0)


def perturbed(model, rel: float):
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + rel * (2 * torch.rand(p.shape, generator=gen) - 1))
    return model


def differences(
    name: str, change_device_model=None, compiled: bool = False
) -> tuple[list[str], dict[str, int]]:
    """(tensors beyond tolerance, host fallbacks) of one zoo model's step on flagos
    (through torch.compile's default backend when @p compiled)."""
    package, build = ZOO[name]
    needs_package(package)
    torch.manual_seed(0)
    model, inputs, loss_fn = build()
    cpu = run(copy.deepcopy(model), inputs, loss_fn, "cpu")
    noise = run(perturbed(copy.deepcopy(model), PERTURBATION), inputs, loss_fn, "cpu")
    device_model = copy.deepcopy(model)
    if change_device_model is not None:
        change_device_model(device_model)
    if compiled:
        torch._dynamo.reset()
        device_model = torch.compile(device_model.to("flagos"))
    ft.reset_op_stats()
    dev = run(device_model, inputs, loss_fn, "flagos")
    fallbacks = {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}
    assert dev.keys() == cpu.keys()
    bad = []
    for key, ref in cpu.items():
        err = relative_error(dev[key], ref)
        floor = relative_error(noise[key], ref)
        if err > max(BASE_RTOL, NOISE_FACTOR * floor):
            bad.append(f"{key}: error {err:.2e}, CPU noise floor {floor:.2e}")
    return bad, fallbacks


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_matches_cpu_without_fallbacks(name):
    bad, fallbacks = differences(name)
    assert not fallbacks, f"{name}: host fallbacks {fallbacks}"
    assert not bad, f"{name}: {len(bad)} tensors differ:\n" + "\n".join(bad[:20])


# torch.compile on flagos (issue 19): inductor's fused kernels through the
# plugin's compiler, the rest as eager flagos operators.
COMPILED = ["torchvision.resnet18", "timm.resnet10t", "transformers.gpt2", "transformers.llama"]


@pytest.mark.parametrize("name", COMPILED)
def test_zoo_model_compiles_and_matches_cpu(name):
    from flagos_torchfl import extension
    from flagos_torchfl.inductor import runtime

    if not extension.language():
        pytest.skip("the backend has no compiler")
    before = runtime.launches()
    bad, fallbacks = differences(name, compiled=True)
    torch._dynamo.reset()
    assert runtime.launches() > before, f"{name}: no fused kernel ran"
    assert not fallbacks, f"{name}: host fallbacks {fallbacks}"
    assert not bad, f"{name}: {len(bad)} tensors differ:\n" + "\n".join(bad[:20])


def test_the_comparison_sees_a_real_difference():
    # The negative control: weights off by 1e-4 relative on the device side
    # (100x the perturbation that sets the noise floor) must be caught.
    bad, _ = differences("transformers.gpt2", lambda m: perturbed(m, 1e-4))
    assert len(bad) > 5, bad


STEPS = 6


def losses_with_dropout(name: str, device: str) -> list[float]:
    package, build = ZOO[name]
    needs_package(package)
    torch.manual_seed(0)
    model, inputs, loss_fn = build(dropout=0.1)
    model = model.to(device).train()
    inputs = tuple(to(x, device) for x in inputs)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1)  # the masks: CPU's generator and flagos's
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(*inputs))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", DROPOUT)
def test_zoo_model_trains_with_dropout_on_the_device(name):
    cpu = losses_with_dropout(name, "cpu")
    ft.reset_op_stats()
    dev = losses_with_dropout(name, "flagos")
    stats = ft.op_stats()
    fallbacks = {op: t["fallback"] for op, t in stats.items() if t.get("fallback")}
    assert not fallbacks, f"{name}: host fallbacks {fallbacks}"
    drew = sum(
        t.get("generated", 0) for op, t in stats.items() if "dropout" in op or "bernoulli" in op
    )
    assert drew >= STEPS, f"{name}: no random kernel ran: {stats}"
    # The first step sees the same weights, only other masks: CPU's loss
    # within dropout's spread; then the loss falls on both, by as much.
    assert abs(dev[0] - cpu[0]) <= 0.25 * abs(cpu[0]), (cpu, dev)
    assert cpu[-1] < cpu[0] and dev[-1] < dev[0], (cpu, dev)
    fall_cpu, fall_dev = cpu[0] - cpu[-1], dev[0] - dev[-1]
    assert 0.5 * fall_cpu <= fall_dev <= 2 * fall_cpu, (cpu, dev)
