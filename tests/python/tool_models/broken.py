"""A model whose forward raises: `validate --level 5` must fail on it and name it."""

import torch


class Broken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        raise RuntimeError("deliberately broken forward")


def get_model():
    torch.manual_seed(0)
    return Broken(), torch.randn(2, 4)
