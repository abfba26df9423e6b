"""A model that amplifies rounding noise: batch norm over two values a channel,
five times, trained with a large step. CPU differs from itself (weights
perturbed by 1e-6) by far more than 1e-3 in the loss within a few dozen steps
(tests of validate's noise floor)."""

import torch


def get_model():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 32)]
    for _ in range(4):
        layers += [torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Linear(32, 32)]
    layers += [torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Linear(32, 4)]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(2, 8)
    y = torch.randint(0, 4, (2,))
    return model, (x,), lambda out: torch.nn.functional.cross_entropy(out, y.to(out.device))
