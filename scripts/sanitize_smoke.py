"""The Python part of scripts/sanitize.sh: the paths a training process takes.

Run under ASan+UBSan with the instrumented core and plugins: a few training
steps of a small CNN and a transformer layer with batch sizes that change
(the generated tier and the background pool), checked against CPU; copies,
a side stream and events; an out-of-memory recovery; a forked child; exit.
Exits 0 and prints "smoke ok" when every check passed and no sanitizer fired
(a report aborts the process).
"""

import os
import sys

import flagos_torchfl as ft
import torch


def train(make, device, batches, loss_fn):
    torch.manual_seed(0)
    net = make().to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(net(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return torch.tensor(losses)


def cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 10),
    )


def transformer():
    return torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)


def main(backend: str) -> int:
    ft.initialize(backend)
    gen = torch.Generator().manual_seed(1)
    images = [
        (torch.randn(n, 3, 8, 8, generator=gen), torch.randint(0, 10, (n,), generator=gen))
        for n in (4, 7, 5)
    ]
    seqs = [
        (torch.randn(2, n, 16, generator=gen), torch.randn(2, n, 16, generator=gen))
        for n in (5, 9, 3)
    ]
    ce, mse = torch.nn.functional.cross_entropy, torch.nn.functional.mse_loss
    for make, batches, loss in [(cnn, images, ce), (transformer, seqs, mse)]:
        torch.testing.assert_close(
            train(make, "flagos", batches, loss),
            train(make, "cpu", batches, loss),
            rtol=1e-3,
            atol=1e-4,
        )

    x = torch.randn(1000)
    s = torch.flagos.Stream()
    with torch.flagos.stream(s):
        y = (x.to("flagos", non_blocking=True) * 2).sin()
    s.synchronize()
    torch.testing.assert_close(y.cpu(), (x * 2).sin())

    try:
        torch.empty(1 << 45, device="flagos")
        raise AssertionError("a 32 TiB allocation succeeded")
    except torch.OutOfMemoryError:
        pass

    pid = os.fork()
    if pid == 0:
        try:
            (y + 1).cpu()
            os._exit(1)
        except RuntimeError:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    print("smoke ok", backend)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "host"))
