"""A model using torch.special.bessel_j0, which the operator catalog does not list:
coverage must report its host fallback."""

import torch


class Bessel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = self.linear(x)
        return h.sum(dim=1) + torch.special.bessel_j0(h.detach()).sum(dim=1)


def get_model():
    torch.manual_seed(0)
    return Bessel(), torch.randn(4, 6)
