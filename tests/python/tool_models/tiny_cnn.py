"""A tiny CNN classifier (second model of the regression-run tests and the README)."""

import torch


def get_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 4 * 4, 10),
    )
    x = torch.randn(8, 1, 8, 8)
    target = torch.randint(0, 10, (8,))
    return model, (x,), lambda out: torch.nn.functional.cross_entropy(out, target.to(out.device))
