"""An MLP with dropout (tests of validate's dropout handling)."""

import torch


def get_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 4)
    )
    x = torch.randn(8, 16)
    target = torch.randint(0, 4, (8,))
    return model, (x,), lambda out: torch.nn.functional.cross_entropy(out, target.to(out.device))
