"""Mixed-precision training, as in PyTorch's "Automatic Mixed Precision" recipe."""

import argparse
import json

import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description="AMP recipe")
parser.add_argument("--no-cuda", action="store_true", help="train on the CPU")
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

use_cuda = not args.no_cuda and torch.cuda.is_available()
device = "cuda" if use_cuda else "cpu"

torch.manual_seed(0)
torch.cuda.manual_seed_all(0)
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True

batch_size, in_size, out_size, num_layers, num_batches = 32, 64, 64, 3, 8


def make_model(in_size, out_size, num_layers):
    layers = []
    for _ in range(num_layers - 1):
        layers.append(nn.Linear(in_size, in_size))
        layers.append(nn.ReLU())
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers).to(device)


data = [torch.randn(batch_size, in_size) for _ in range(num_batches)]
targets = [torch.randn(batch_size, out_size) for _ in range(num_batches)]
data = [d.to(device) for d in data]
targets = [t.to(device) for t in targets]
loss_fn = nn.MSELoss().to(device)

net = make_model(in_size, out_size, num_layers)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=4)

losses = []
for _ in range(args.epochs):
    for input, target in zip(data, targets, strict=True):
        with torch.autocast(device_type=device, dtype=torch.float16):
            output = net(input)
            assert output.dtype is torch.float16
            loss = loss_fn(output, target)
            assert loss.dtype is torch.float32
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    losses.append(loss.item())

checkpoint = {
    "model": net.state_dict(),
    "optimizer": opt.state_dict(),
    "scaler": scaler.state_dict(),
}
print(
    json.dumps(
        {
            "device": str(next(net.parameters()).device),
            "is_cuda": next(net.parameters()).is_cuda,
            "losses": losses,
            "scale": scaler.get_scale(),
            "checksum": sum(p.double().sum().item() for p in net.parameters()),
            "saved_scale": checkpoint["scaler"]["scale"],
        }
    )
)
