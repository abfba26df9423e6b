"""How the tools are given a model (docs/tools.md, "Models").

A model spec is one of
    path/to/file.py            the file's get_model()
    path/to/file.py:FUNC       the file's FUNC()
    package.module:FUNC        an importable module's FUNC()
    torchvision:NAME, timm:NAME   a named model, when that package is installed:
                               seeded, batch 2, 64x64 inputs where the model
                               allows, cross-entropy on seeded labels

FUNC takes no arguments and returns (model, example_inputs) or
(model, example_inputs, loss_fn). example_inputs is a tensor or a tuple of
tensors passed positionally; loss_fn(output) returns a scalar tensor
(default: the sum of the float output, or of every tensor in a tuple/dict output).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_FUNCTION = "get_model"


@dataclass
class ModelCase:
    name: str
    model: Any  # torch.nn.Module
    inputs: tuple
    loss_fn: Callable[[Any], Any]


def default_loss(output: Any):
    """Sum of every floating tensor in the output (a tensor, tuple, list or dict)."""
    import torch

    if isinstance(output, torch.Tensor):
        return output.float().sum()
    if isinstance(output, dict):
        output = list(output.values())
    parts = [default_loss(o) for o in output if isinstance(o, torch.Tensor | list | tuple | dict)]
    return sum(parts[1:], parts[0])


# Named models made for validation: seeded (the same weights and data in
# every run), a batch of NAMED_BATCH (batch norm needs more than one value a
# channel), and cross-entropy on seeded labels (bounded below, unlike the
# sum of the logits, which training drives to -inf). Inputs are 64x64 except
# for models that need their native size (patch embeddings, windows).
NAMED_BATCH = 2
_NATIVE_SIZE = ("vit", "swin", "maxvit", "deit", "beit", "inception", "googlenet")


def _classifier_loss(labels):
    import torch

    def loss(output):
        logits = first_tensor(output)
        return torch.nn.functional.cross_entropy(logits.float(), labels.to(logits.device))

    return loss


def _named(package: str, name: str):
    import torch

    torch.manual_seed(0)
    if package == "torchvision":
        models = importlib.import_module("torchvision.models")
        model = models.get_model(name, weights=None).eval()
        size = (3, 224, 224) if name.startswith(_NATIVE_SIZE) else (3, 64, 64)
        if name.startswith("inception"):
            size = (3, 299, 299)
    else:
        timm = importlib.import_module("timm")
        model = timm.create_model(name, pretrained=False).eval()
        size = tuple(model.default_cfg.get("input_size", (3, 224, 224)))
        if not name.startswith(_NATIVE_SIZE):
            size = (size[0], 64, 64)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(NAMED_BATCH, *size, generator=g)
    with torch.no_grad():
        classes = first_tensor(model(x)).shape[-1]
    labels = torch.randint(0, classes, (NAMED_BATCH,), generator=g)
    return model, (x,), _classifier_loss(labels)


def disable_dropout(model) -> int:
    """Dropout-like layers off (p = 0), as the model-zoo tests run them: flagos
    and CPU draw different random numbers, so a curve with dropout compares two
    different experiments. Returns how many layers were changed."""
    changed = 0
    for module in model.modules():
        kind = type(module).__name__
        if "Dropout" in kind or "DropPath" in kind or "StochasticDepth" in kind:
            for attr in ("p", "drop_prob"):
                if isinstance(getattr(module, attr, None), float) and getattr(module, attr) > 0:
                    setattr(module, attr, 0.0)
                    changed += 1
    return changed


def _function(spec: str) -> Callable[[], Any]:
    target, _, func = spec.partition(":")
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise ValueError(f"model file not found: {target}")
        module_name = f"_flagos_model_{path.stem}"
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    else:
        if not func:
            raise ValueError(f"model spec {spec!r}: expected FILE.py[:FUNC] or MODULE:FUNC")
        module = importlib.import_module(target)
    func = func or DEFAULT_FUNCTION
    if not callable(getattr(module, func, None)):
        raise ValueError(f"model spec {spec!r}: {target} has no function {func}()")
    return getattr(module, func)


def load(spec: str) -> ModelCase:
    """The model, inputs and loss function a spec names (see the module docstring)."""
    import torch

    package, _, name = spec.partition(":")
    if package in ("torchvision", "timm") and name:
        if importlib.util.find_spec(package) is None:
            raise ValueError(f"model spec {spec!r}: {package} is not installed")
        result = _named(package, name)
    else:
        result = _function(spec)()
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        raise ValueError(
            f"model spec {spec!r} returned {type(result).__name__}; expected "
            "(model, example_inputs) or (model, example_inputs, loss_fn)"
        )
    model, inputs = result[0], result[1]
    loss_fn = result[2] if len(result) == 3 else default_loss
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    return ModelCase(spec, model, tuple(inputs), loss_fn)


def to_device(value: Any, device: str) -> Any:
    """Tensors (inside tuples, lists, dicts) moved to `device`; other values as they are."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple | list):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def first_tensor(value: Any):
    """The first tensor of an output (for comparisons), or None."""
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, tuple | list):
        for v in value:
            t = first_tensor(v)
            if t is not None:
                return t
    return None
