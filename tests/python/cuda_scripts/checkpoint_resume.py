"""Save a checkpoint mid-training and resume from it, as training scripts do."""

import argparse
import json
import os
import tempfile

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--no-cuda", action="store_true")
args = parser.parse_args()
use_cuda = torch.cuda.is_available() and not args.no_cuda
map_location = "cuda:0" if use_cuda else "cpu"


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Dropout(0.1), nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x)


def build():
    model = MLP()
    if use_cuda:
        model = model.cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return model, optimizer


def batch(step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(16, 10, generator=g)
    y = x.sum(dim=1, keepdim=True)
    if use_cuda:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    return x, y


def train(model, optimizer, steps):
    losses = []
    for step in steps:
        x, y = batch(step)
        loss = nn.functional.mse_loss(model(x), y)  # dropout draws from the device RNG
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


torch.manual_seed(0)
if use_cuda:
    torch.cuda.manual_seed(0)
model, optimizer = build()
train(model, optimizer, range(0, 5))

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "checkpoint.pth.tar")
    torch.save(
        {
            "epoch": 5,
            "state_dict": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "cpu_rng_state": torch.get_rng_state(),
            "cuda_rng_state": torch.cuda.get_rng_state() if use_cuda else None,
        },
        path,
    )
    uninterrupted = train(model, optimizer, range(5, 10))

    # A fresh process would do this: rebuild, load onto the GPU, resume.
    resumed_model, resumed_optimizer = build()
    checkpoint = torch.load(path, map_location=map_location)
    resumed_model.load_state_dict(checkpoint["state_dict"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    torch.set_rng_state(checkpoint["cpu_rng_state"].cpu())  # map_location moved it too
    if use_cuda:
        torch.cuda.set_rng_state(checkpoint["cuda_rng_state"].cpu())
    resumed = train(resumed_model, resumed_optimizer, range(checkpoint["epoch"], 10))

    # The other spelling found in older scripts.
    if use_cuda:
        again = torch.load(path, map_location=lambda storage, loc: storage.cuda(0))
    else:
        again = torch.load(path, map_location=lambda storage, loc: storage)
    state = again["state_dict"]["body.0.weight"]

print(
    json.dumps(
        {
            "uninterrupted": uninterrupted,
            "resumed": resumed,
            "same": uninterrupted == resumed,
            "loaded_device": str(checkpoint["state_dict"]["body.0.weight"].device),
            "optimizer_state_device": str(
                resumed_optimizer.state_dict()["state"][0]["exp_avg"].device
            ),
            "lambda_loaded_is_cuda": state.is_cuda,
        }
    )
)
