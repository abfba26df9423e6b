"""A small word-level Transformer LM (nn.TransformerEncoder: scaled_dot_product_attention
inside), for coverage: on CPU, SDPA takes a CPU-only flash kernel that flagos never sees."""

import torch


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 32)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = torch.nn.Linear(32, 100)

    def forward(self, x):
        return self.out(self.enc(self.emb(x)))


def get_model():
    torch.manual_seed(0)
    x = torch.randint(0, 100, (2, 12))
    return LM(), (x,), lambda out: out.float().logsumexp(-1).mean()
