"""Host-fallback calls while a ResNet-style CNN (SGD) and a small transformer
(Adam; attention through matmul/softmax, and AdamW with SDPA) train 3 steps
on flagos next to the same model on CPU; prints both losses per step and the
op_stats() "fallback" / "decomposition" counts per operator.

    TORCH_DEVICE_BACKEND_AUTOLOAD=0 PYTHONPATH=<pkg dir> python benchmarks/count_fallbacks.py
"""

import copy
import sys
from pathlib import Path

import flagos_torchfl as ft
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import ResNet, Transformer, cnn_loss, lm_loss  # noqa: E402


def run(name, model, inputs, loss_fn, opt_cls, steps=3, **kw):
    ref, dev = copy.deepcopy(model), copy.deepcopy(model).to("flagos")
    o_ref, o_dev = opt_cls(ref.parameters(), **kw), opt_cls(dev.parameters(), **kw)
    ft.reset_op_stats()
    for s in range(steps):
        losses = []
        for m, o, d in ((ref, o_ref, "cpu"), (dev, o_dev, "flagos")):
            o.zero_grad()
            loss = loss_fn(m, *[t.to(d) for t in inputs])
            loss.backward()
            o.step()
            losses.append(loss.item())
        print(f"{name} step {s}: cpu {losses[0]:.6f} flagos {losses[1]:.6f}")
    stats = ft.op_stats()
    fb = {k: v["fallback"] for k, v in stats.items() if v.get("fallback")}
    dec = {k: v["decomposition"] for k, v in stats.items() if v.get("decomposition")}
    print(f"{name} fallbacks: {sum(fb.values())} {fb}")
    print(f"{name} decompositions: {dec}")


def main():
    ft.initialize(backend="host")
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    run("cnn", ResNet(width=8), (x, y), cnn_loss, torch.optim.SGD, lr=0.1, momentum=0.9)
    idx, tgt = torch.randint(0, 256, (4, 32)), torch.randint(0, 256, (4, 32))
    run("transformer", Transformer(), (idx, tgt), lm_loss, torch.optim.Adam, lr=1e-3)
    run("transformer-sdpa", Transformer(sdpa=True), (idx, tgt), lm_loss, torch.optim.AdamW, lr=1e-3)


if __name__ == "__main__":
    main()
