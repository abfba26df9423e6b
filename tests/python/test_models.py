"""A small ResNet trained on flagos tracks the same model trained on CPU."""

from __future__ import annotations

import copy

import flagos_torchfl as ft
import pytest
import torch
from conftest import assert_close_to_cpu
from torch import nn


class Block(nn.Module):
    """conv-bn-relu-conv-bn plus a shortcut (1x1 conv when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)
        )
        self.layers = nn.Sequential(Block(8, 8), Block(8, 16, stride=2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, classes))

    def forward(self, x):
        return self.head(self.layers(self.stem(x)))


def setup():
    torch.manual_seed(0)
    model_cpu = TinyResNet()
    model_dev = copy.deepcopy(model_cpu).to("flagos")
    images = torch.randn(8, 3, 16, 16)
    labels = torch.randint(0, 10, (8,))
    return model_cpu, model_dev, images, labels


def step(model, images, labels, optimizer=None):
    loss = nn.functional.cross_entropy(model(images), labels)
    if optimizer is not None:
        optimizer.zero_grad()
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    return loss


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_forward_backward_matches_cpu(mode):
    model_cpu, model_dev, images, labels = setup()
    getattr(model_cpu, mode)()
    getattr(model_dev, mode)()
    loss_cpu = step(model_cpu, images, labels)
    loss_dev = step(model_dev, images.to("flagos"), labels.to("flagos"))
    assert_close_to_cpu(loss_dev.detach(), loss_cpu.detach(), rtol=1e-4, atol=1e-5)
    for (name, p_cpu), p_dev in zip(
        model_cpu.named_parameters(), model_dev.parameters(), strict=True
    ):
        assert_close_to_cpu(
            p_dev.grad, p_cpu.grad, rtol=1e-3, atol=1e-4, msg=lambda m, n=name: f"{n}: {m}"
        )
    for (name, b_cpu), b_dev in zip(model_cpu.named_buffers(), model_dev.buffers(), strict=True):
        assert_close_to_cpu(b_dev, b_cpu, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def test_sgd_steps_track_cpu():
    model_cpu, model_dev, images, labels = setup()
    opt_cpu = torch.optim.SGD(model_cpu.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    opt_dev = torch.optim.SGD(model_dev.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    images_dev, labels_dev = images.to("flagos"), labels.to("flagos")
    losses = []
    for _ in range(5):
        loss_cpu = step(model_cpu, images, labels, opt_cpu)
        loss_dev = step(model_dev, images_dev, labels_dev, opt_dev)
        losses.append(loss_dev.item())
        assert abs(loss_dev.item() - loss_cpu.item()) < 1e-3 * max(1.0, loss_cpu.item())
    assert losses[-1] < losses[0]
    for (name, p_cpu), p_dev in zip(
        model_cpu.named_parameters(), model_dev.parameters(), strict=True
    ):
        assert_close_to_cpu(
            p_dev.detach(), p_cpu.detach(), rtol=1e-3, atol=1e-4, msg=lambda m, n=name: f"{n}: {m}"
        )


def test_op_stats_of_a_training_step_are_exact_counts():
    _, model_dev, images, labels = setup()
    images, labels = images.to("flagos"), labels.to("flagos")
    step(model_dev, images, labels)  # warm-up: first-call work stays out of the counts
    ft.reset_op_stats()
    step(model_dev, images, labels)
    once = ft.op_stats()
    step(model_dev, images, labels)
    twice = ft.op_stats()
    assert once and any("conv" in op for op in once), once
    assert twice == {op: {t: 2 * n for t, n in tiers.items()} for op, tiers in once.items()}
    fallback = sum(tiers.get("fallback", 0) for tiers in once.values())
    total = sum(sum(tiers.values()) for tiers in once.values())
    print(f"one training step: {total} operator calls, {fallback} on the host fallback")
    assert 0 <= fallback <= total
