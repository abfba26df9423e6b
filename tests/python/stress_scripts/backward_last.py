"""One short process of the exit stress test whose last statement is a backward.

Note [Autograd threads at exit] (csrc/python/autograd_exit.cpp): autograd's
device thread lets go of the finished graph task after backward() has
returned, and what it releases may need the GIL. Here the loss is a
temporary and nothing follows the backward but interpreter exit, so a
device thread still holding it meets a finalizing interpreter. The test
looks at the exit code and "ok" only; the gradient is checked against CPU so
that the process did real work.
"""

import sys

import flagos_torchfl as ft
import torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    )


def main(argv: list[str]) -> int:
    ft.initialize(backend=argv[0])
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    on_cpu = model()
    on_cpu(x).sum().backward()
    net = model().to("flagos")
    net(x.to("flagos")).sum().backward()
    torch.testing.assert_close(net[0].weight.grad.cpu(), on_cpu[0].weight.grad)
    print("ok", flush=True)
    net(x.to("flagos")).sum().backward()  # the last statement: no wait after it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
