"""Module.to() keeps Parameter objects, as on CUDA (Note [Parameter identity across .to()]).

nn.Module._apply swaps a Parameter's .data in place only when
torch._has_compatible_shallow_copy_type(cpu, device) holds; otherwise it makes
new Parameters, which unties tied weights and strands optimizers.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn


class TiedLM(nn.Module):
    """An embedding and an output projection sharing one weight (GPT-2's lm_head)."""

    def __init__(self, vocab: int = 20, dim: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(torch.tanh(self.mix(self.embed(tokens))))


def test_shallow_copy_type_is_compatible_between_cpu_and_flagos():
    cpu, dev = torch.ones(2), torch.ones(2, device="flagos")
    assert torch._has_compatible_shallow_copy_type(cpu, dev)
    assert torch._has_compatible_shallow_copy_type(dev, cpu)
    assert torch._has_compatible_shallow_copy_type(dev, dev)
    # Not every pair: a sparse tensor is no dense tensor's substitute.
    assert not torch._has_compatible_shallow_copy_type(dev, torch.ones(2).to_sparse())


@pytest.mark.parametrize("how", ["to", "flagos", "cuda_alias"])
def test_to_device_and_back_keeps_the_parameters(how):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(model.parameters())
    if how == "to":
        model.to("flagos")
    elif how == "flagos":
        model.flagos()
    else:
        from flagos_torchfl import cuda_alias

        if not cuda_alias.is_active():
            pytest.skip("the cuda alias is off in this process")
        model.cuda()
    assert all(p.device.type == "flagos" for p in model.parameters())
    assert all(a is b for a, b in zip(model.parameters(), params, strict=True))
    model.to("cpu")
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert all(a is b for a, b in zip(model.parameters(), params, strict=True))


def test_param_data_assignment_across_devices():
    p = nn.Parameter(torch.randn(3))
    p.data = torch.zeros(3, device="flagos")
    assert p.device.type == "flagos" and isinstance(p, nn.Parameter)
    torch.testing.assert_close(p.cpu(), torch.zeros(3))


def train(model, device, steps=3):
    torch.manual_seed(1)
    tokens = torch.randint(0, 20, (4, 6))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)  # built before .to(): it must still train
    model.to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(tokens.to(device))
        loss = nn.functional.cross_entropy(logits.reshape(-1, 20), tokens.reshape(-1).to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def test_tied_weights_stay_tied_and_an_earlier_optimizer_trains():
    torch.manual_seed(0)
    base = TiedLM()
    cpu_model, cpu_losses = train(copy.deepcopy(base), "cpu")
    dev_model, dev_losses = train(copy.deepcopy(base), "flagos")
    assert dev_model.head.weight is dev_model.embed.weight
    assert dev_losses[-1] < dev_losses[0]  # the optimizer holds the moved tensors
    torch.testing.assert_close(
        torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(
        dev_model.embed.weight.detach().cpu(), cpu_model.embed.weight.detach()
    )
