"""A small transformers GPT-2 with random weights (tied lm_head), seeded, for
`validate` (docs/tools.md): language-model loss on seeded tokens."""

import torch


def get_model():
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config)
    tokens = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))

    def loss(output):
        logits = output.logits if hasattr(output, "logits") else output[0]
        return torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
            tokens[:, 1:].reshape(-1).to(logits.device),
        )

    return model, (tokens,), loss
