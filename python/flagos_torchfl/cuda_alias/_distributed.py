"""init_process_group("nccl") under the alias: routed to the flagos comm backend.

"nccl" is a built-in name that torch.distributed checks before any plugin
(notes §3), so it cannot be registered over; the calls that take a backend
string are wrapped instead and hand the string to
flagos_torchfl.distributed.rewrite_nccl_backend(). Without that module a
clear error replaces torch's "Distributed package doesn't have NCCL built in".
A `device_id` naming a CUDA device is the flagos device of that index
(flagos_device_id). DDP needs nothing more: it follows the process group and
the parameters' device, and device_ids=[i] / torch.device("cuda", i) give index i.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re

from ._patcher import Patcher

_TOKEN = re.compile(r"[,:]")


def names_nccl(backend) -> bool:
    """True when the backend string asks for NCCL ("nccl", "cpu:gloo,cuda:nccl", Backend.NCCL)."""
    return isinstance(backend, str) and "nccl" in (t.strip().lower() for t in _TOKEN.split(backend))


def _flagos_distributed():
    try:
        module = importlib.import_module("flagos_torchfl.distributed")
    except ImportError as err:
        raise RuntimeError(
            "init_process_group('nccl') under the flagos cuda alias needs the flagos "
            f"communication backend (flagos_torchfl.distributed), which is not available: {err}. "
            "Use backend='gloo' for CPU tensors, or set FLAGOS_ALIAS_CUDA=0 on a machine with NCCL."
        ) from err
    register = getattr(module, "register", None)
    if register is not None:
        register()  # idempotent; initialize() normally did it already
    return module


def rewrite(backend):
    """The backend string to use instead of an NCCL one (others unchanged)."""
    if not names_nccl(backend):
        return backend
    return _flagos_distributed().rewrite_nccl_backend(str(backend))


def flagos_device_id(device_id):
    """A `device_id` naming a CUDA device (torch.device("cuda", n), "cuda:n")
    as the flagos device it means under the alias; anything else unchanged.
    torch checks the device's type against its accelerator (flagos), so
    init_process_group(..., device_id=torch.device("cuda", n)), the form
    PyTorch recommends and Lightning's DDP always uses, failed without this."""
    import torch

    if isinstance(device_id, str) and device_id.split(":")[0].strip() == "cuda":
        device_id = torch.device(device_id)
    if isinstance(device_id, torch.device) and device_id.type == "cuda":
        index = device_id.index if device_id.index is not None else torch.flagos.current_device()
        return torch.device("flagos", index)
    return device_id


def _make_backend_wrapper(original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs)
        if "backend" in bound.arguments:
            bound.arguments["backend"] = rewrite(bound.arguments["backend"])
        if "device_id" in bound.arguments:
            bound.arguments["device_id"] = flagos_device_id(bound.arguments["device_id"])
        return original(*bound.args, **bound.kwargs)

    return wrapper


def _is_nccl_available() -> bool:
    try:
        _flagos_distributed()
    except RuntimeError:
        return False
    return True


def install(patcher: Patcher) -> None:
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if not dist.is_available():
        return
    for name in (
        "init_process_group",
        "new_group",
        "new_subgroups",
        "new_subgroups_by_enumeration",
    ):
        fn = getattr(dist, name, None)
        if fn is not None and "backend" in inspect.signature(fn).parameters:
            patcher.set(dist, name, _make_backend_wrapper(fn))
            c10d = dist.distributed_c10d
            if getattr(c10d, name, None) is fn:
                patcher.set(c10d, name, dist.__dict__[name])
    patcher.set(dist, "is_nccl_available", _is_nccl_available)
