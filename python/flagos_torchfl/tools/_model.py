"""How the tools are given a model (docs/tools.md, "Models").

A model spec is one of
    path/to/file.py            the file's get_model()
    path/to/file.py:FUNC       the file's FUNC()
    package.module:FUNC        an importable module's FUNC()
    torchvision:NAME, timm:NAME   a named model, when that package is installed

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


def _named(package: str, name: str):
    import torch

    if package == "torchvision":
        models = importlib.import_module("torchvision.models")
        return models.get_model(name, weights=None).eval(), (torch.randn(1, 3, 224, 224),)
    timm = importlib.import_module("timm")
    model = timm.create_model(name, pretrained=False).eval()
    size = model.default_cfg.get("input_size", (3, 224, 224))
    return model, (torch.randn(1, *size),)


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
