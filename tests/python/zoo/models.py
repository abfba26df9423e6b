"""The third-party model zoo of tests/python/test_model_zoo.py.

Each entry builds a real model class of torchvision, timm or transformers,
shrunk to a tiny configuration (random weights, seeded; nothing downloaded)
and returns (model, inputs, loss_fn). Architectures are the libraries' own:
only widths, depths and input sizes are small, so every operator a user's
full-size model reaches is reached here too.

Dropout-like layers are off by default (p=0 or eval mode), so that a step
compares with CPU's; the builders that take `dropout` switch them on (the
models of DROPOUT, tests/python/test_model_zoo.py: they train with p=0.1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Built = tuple[torch.nn.Module, tuple, Callable]


def _image_loss(out):
    return out.float().pow(2).mean()


def _images(n=2, size=32):
    return (torch.randn(n, 3, size, size),)


def _tv():
    import torchvision

    return torchvision


def resnet() -> Built:
    return _tv().models.resnet18(num_classes=10), _images(), _image_loss


def mobilenet_v3() -> Built:
    return _tv().models.mobilenet_v3_small(num_classes=10, dropout=0.0), _images(), _image_loss


def efficientnet(dropout: float = 0.0) -> Built:
    tv = _tv()
    from torchvision.models.efficientnet import MBConvConfig

    settings = [
        MBConvConfig(1, 3, 1, 16, 8, 1),
        MBConvConfig(4, 3, 2, 8, 16, 1),
        MBConvConfig(4, 5, 2, 16, 24, 1),
    ]
    model = tv.models.EfficientNet(
        settings, dropout=dropout, stochastic_depth_prob=dropout, num_classes=10
    )
    return model, _images(), _image_loss


def convnext() -> Built:
    tv = _tv()
    from torchvision.models.convnext import CNBlockConfig

    settings = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)]
    model = tv.models.ConvNeXt(settings, stochastic_depth_prob=0.0, num_classes=10)
    return model, _images(), _image_loss


def vit() -> Built:
    model = _tv().models.VisionTransformer(
        image_size=32,
        patch_size=8,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        mlp_dim=64,
        num_classes=10,
    )
    # torchvision zero-initializes the classifier: the output (and every
    # gradient but the head's) would be zero, a comparison that proves nothing.
    torch.nn.init.normal_(model.heads.head.weight, std=0.5)
    return model, _images(), _image_loss


def densenet() -> Built:
    model = _tv().models.DenseNet(
        growth_rate=8, block_config=(2, 2), num_init_features=16, num_classes=10
    )
    return model, _images(), _image_loss


def timm_swin(dropout: float = 0.0) -> Built:
    from timm.models.swin_transformer import SwinTransformer

    model = SwinTransformer(
        img_size=32,
        patch_size=2,
        window_size=4,
        embed_dim=16,
        depths=(1, 1),
        num_heads=(1, 2),
        drop_rate=dropout,
        drop_path_rate=dropout,
        num_classes=10,
    )
    return model, _images(), _image_loss


def timm_mobilevit() -> Built:
    import timm

    return timm.create_model("mobilevit_xxs", num_classes=10), _images(size=64), _image_loss


def timm_resnet() -> Built:
    import timm

    model = timm.create_model("resnet10t", num_classes=10, drop_rate=0.0)
    return model, _images(), _image_loss


def timm_convnext() -> Built:
    import timm

    return timm.create_model("convnext_atto", num_classes=10), _images(), _image_loss


def _tokens(vocab=96, n=2, length=12):
    return torch.randint(0, vocab, (n, length))


def _lm_loss(out):
    return out.logits.float().pow(2).mean()


def gpt2(dropout: float = 0.0) -> Built:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=96,
        n_positions=32,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
    )
    return GPT2LMHeadModel(config), (_tokens(),), _lm_loss


def bert(dropout: float = 0.0) -> Built:
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=96,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    return BertForMaskedLM(config), (_tokens(),), _lm_loss


def llama() -> Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    return LlamaForCausalLM(config), (_tokens(),), _lm_loss


def t5(dropout: float = 0.0) -> Built:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(
        vocab_size=96,
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_heads=2,
        dropout_rate=dropout,
        decoder_start_token_id=0,
    )
    model = T5ForConditionalGeneration(config)
    tokens = _tokens()
    return model, (tokens, None, _tokens()), _lm_loss


# name -> (package it needs, builder)
ZOO: dict[str, tuple[str, Callable[[], Built]]] = {
    "torchvision.resnet18": ("torchvision", resnet),
    "torchvision.mobilenet_v3_small": ("torchvision", mobilenet_v3),
    "torchvision.efficientnet": ("torchvision", efficientnet),
    "torchvision.convnext": ("torchvision", convnext),
    "torchvision.vit": ("torchvision", vit),
    "torchvision.densenet": ("torchvision", densenet),
    "timm.swin": ("timm", timm_swin),
    "timm.mobilevit_xxs": ("timm", timm_mobilevit),
    "timm.resnet10t": ("timm", timm_resnet),
    "timm.convnext_atto": ("timm", timm_convnext),
    "transformers.gpt2": ("transformers", gpt2),
    "transformers.bert": ("transformers", bert),
    "transformers.llama": ("transformers", llama),
    "transformers.t5": ("transformers", t5),
}

# The models whose builders take `dropout`: dropout and drop-path layers.
DROPOUT = [
    "torchvision.efficientnet",
    "timm.swin",
    "transformers.gpt2",
    "transformers.bert",
    "transformers.t5",
]
