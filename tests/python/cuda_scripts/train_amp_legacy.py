"""Mixed precision the way older repositories wrote it (torch.cuda.amp, no dtype)."""

import json
import sys

import torch
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast

use_amp = torch.cuda.is_available() and "--no-cuda" not in sys.argv

torch.manual_seed(1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(20, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


model = Net()
x = torch.randn(64, 20)
y = torch.randint(0, 4, (64,))
if use_amp:
    model = model.cuda()
    x, y = x.cuda(), y.cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
scaler = GradScaler(enabled=use_amp)

losses = []
for _ in range(10):
    optimizer.zero_grad()
    with autocast(enabled=use_amp):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.item())

print(json.dumps({"amp": use_amp, "logits_dtype": str(logits.dtype), "losses": losses}))
