"""Quick start: unchanged PyTorch code on the `flagos` device.

    python examples/quickstart.py            # or: bash scripts/demo.sh

1. The quick start of the source article: bring the backend up, run an
   operator, look at what is running.
2. A small training loop run twice from the same weights and data, on
   flagos and on CPU: the losses must agree and fall.
3. op_stats(): which execution tier each operator took (native kernel,
   generated kernel, decomposition, host fallback, core).

Exits non-zero when flagos and CPU disagree.
"""

import copy
import sys

import flagos_torchfl as ft
import torch
from flagos_torchfl.backend import format_op_stats
from torch import nn


def quick_start() -> None:
    ft.initialize(backend="auto")  # scan plugins + SDKs, register the device, map devices
    x = torch.randn(128, 128, device="flagos")
    y = torch.relu(x)
    assert torch.equal(y.cpu(), torch.relu(x.cpu())), "relu on flagos differs from CPU"
    ft.backend_info()  # returns a dict and prints a readable summary


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 32),
        nn.ReLU(),
        nn.Linear(32, 3),
    )


def train(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, steps: int) -> list[float]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> int:
    quick_start()

    torch.manual_seed(0)
    images = torch.randn(64, 1, 8, 8)
    labels = images.mean(dim=(1, 2, 3)).gt(0).long() + images[:, 0, 0, 0].gt(1).long()
    model_cpu = make_model()
    model_flagos = copy.deepcopy(model_cpu).to("flagos")

    steps = 30
    ft.reset_op_stats()
    losses_flagos = train(model_flagos, images.to("flagos"), labels.to("flagos"), steps)
    losses_cpu = train(model_cpu, images, labels, steps)

    print("\nstep   loss (flagos)   loss (cpu)")
    for step in range(0, steps, 5):
        print(f"{step:4d}   {losses_flagos[step]:13.6f}   {losses_cpu[step]:10.6f}")
    worst = max(abs(a - b) for a, b in zip(losses_flagos, losses_cpu, strict=True))
    falls = losses_flagos[-1] < 0.5 * losses_flagos[0]
    print(f"largest loss difference flagos vs cpu: {worst:.2e}; loss falls: {falls}")

    print("\noperators of the training loop and the tier they ran on:")
    print(format_op_stats(ft.op_stats()))

    if worst > 1e-3 or not falls:
        print("FAILED: training on flagos does not track CPU", file=sys.stderr)
        return 1
    print("\nOK: training on flagos tracks CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
