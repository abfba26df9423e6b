"""The small MLP in bfloat16 (a dtype that some backends' GEMMs decline)."""

import torch


def get_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 4),
    ).to(torch.bfloat16)
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    target = torch.randint(0, 4, (8,))
    return (
        model,
        (x,),
        lambda out: torch.nn.functional.cross_entropy(out.float(), target.to(out.device)),
    )
