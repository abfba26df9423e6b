"""One short process of the exit stress test (tests/python/test_exit_stress.py).

Trains a tiny CNN for a few steps on flagos and on CPU from the same weights,
with a batch size that changes every step (so the background specialization
pool gets new shapes to build), checks that the losses agree, prints "ok",
and returns from main. The test only looks at the exit code and "ok": what
is being tested is that a process that did its work exits 0, every time,
also while the kernel cache is still building in the background.
"""

import sys

import flagos_torchfl as ft
import torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 4 * 4, 10),
        torch.nn.GELU(),
        torch.nn.Linear(10, 10),
    )


def train(net, device, batches):
    net = net.to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for x, target in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x.to(device)), target.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main(argv: list[str]) -> int:
    ft.initialize(backend=argv[0])
    seed = int(argv[1]) if len(argv) > 1 else 0
    gen = torch.Generator().manual_seed(seed)
    # Batch sizes no earlier process used (seeds differ): each step's new
    # shapes queue specialized builds that are still running at exit.
    sizes = [3 + (seed * 37 + 11 * i) % 97 for i in range(6)]
    batches = [
        (torch.randn(n, 1, 8, 8, generator=gen), torch.randint(0, 10, (n,), generator=gen))
        for n in sizes
    ]
    on_device = train(model(), "flagos", batches)
    on_cpu = train(model(), "cpu", batches)
    torch.testing.assert_close(torch.tensor(on_device), torch.tensor(on_cpu), rtol=1e-4, atol=1e-5)
    print("ok", sizes, f"{on_device[-1]:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
