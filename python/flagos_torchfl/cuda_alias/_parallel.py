"""nn.DataParallel, and torch's "which accelerator?" helper that it relies on.

torch._utils._get_available_device_type() tries CUDA first, so under the
alias it would answer "cuda"; DataParallel would then expect its parameters
on torch.device("cuda", 0), which no flagos tensor equals, and scatter its
inputs with torch._C._scatter, a CUDA-only function. Under the alias the
helper answers "flagos", and DataParallel over one device (the common
`nn.DataParallel(model).cuda()` on a one-GPU machine) moves the inputs
itself and calls the module, which is what scatter amounts to there. Over
several devices it raises a clear error: use DistributedDataParallel.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import torch
from torch.utils._pytree import tree_map_only

from ._patcher import Patcher


def _available_device_type() -> str:
    return "flagos"


def _make_forward(original):
    @functools.wraps(original)
    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if not self.device_ids:
            return original(self, *inputs, **kwargs)
        if len(self.device_ids) > 1:
            raise NotImplementedError(
                f"nn.DataParallel over {len(self.device_ids)} devices is not supported under the "
                "flagos cuda alias (it needs CUDA's scatter/broadcast kernels); use "
                "DistributedDataParallel (torchrun), or DataParallel with one device."
            )
        device = self.src_device_obj
        for t in self.module.parameters():
            if t.device != device:
                raise RuntimeError(
                    f"module must have its parameters and buffers on device {device} "
                    f"(device_ids[0]) but found one of them on device: {t.device}"
                )
        inputs, kwargs = tree_map_only(
            torch.Tensor, lambda t: t.to(device, non_blocking=True), (inputs, kwargs)
        )
        with torch.autograd.profiler.record_function("DataParallel.forward"):
            return self.module(*inputs, **kwargs)

    return forward


def install(patcher: Patcher) -> None:
    # import_module: the package attribute `data_parallel` is the function of that name.
    data_parallel = importlib.import_module("torch.nn.parallel.data_parallel")
    for module in (importlib.import_module("torch._utils"), data_parallel):
        patcher.set(module, "_get_available_device_type", _available_device_type)
    data_parallel_class = torch.nn.DataParallel
    patcher.set(data_parallel_class, "forward", _make_forward(data_parallel_class.forward))
