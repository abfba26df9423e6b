"""How accelerate (1.16) decides the device type and the collective, in a
module outside torch: for test_cuda_alias.py's identity check, which must
not need accelerate installed."""

import torch

BACKENDS = {"cuda": "nccl", "xpu": "xccl", "npu": "hccl", "cpu": "gloo"}


def device_type_and_backend() -> tuple[str, str | None]:
    device = torch.accelerator.current_accelerator()
    return device.type, BACKENDS.get(device.type)
