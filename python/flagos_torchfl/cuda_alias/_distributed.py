"""init_process_group("nccl") under the alias: routed to the flagos comm backend.

"nccl" is a built-in name that torch.distributed checks before any plugin
(notes §3), so it cannot be registered over; the calls that take a backend
string are wrapped instead and hand the string to
flagos_torchfl.distributed.rewrite_nccl_backend(). Without that module a
clear error replaces torch's "Distributed package doesn't have NCCL built in".
A `device_id` naming a CUDA device is the flagos device of that index
(flagos_device_id). DDP needs nothing more: it follows the process group and
the parameters' device, and device_ids=[i] / torch.device("cuda", i) give index i.

torch.distributed.get_backend() of a group that was asked for as "nccl"
answers "nccl" to code outside torch (Note [One accelerator identity under
the alias]): frameworks branch on it (Lightning's barrier, FSDP set-up) as
they branch on the accelerator's type. torch's own modules see the backend
that runs, fccl.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import weakref

from ._accelerator import caller_is_truthful
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


# Process groups created from an "nccl" request (the default group included).
_asked_for_nccl: weakref.WeakSet = weakref.WeakSet()


def _make_backend_wrapper(original):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs)
        nccl = False
        if "backend" in bound.arguments:
            nccl = names_nccl(bound.arguments["backend"])
            bound.arguments["backend"] = rewrite(bound.arguments["backend"])
        if "device_id" in bound.arguments:
            bound.arguments["device_id"] = flagos_device_id(bound.arguments["device_id"])
        result = original(*bound.args, **bound.kwargs)
        if nccl:
            import torch.distributed as dist

            group = result if original.__name__ == "new_group" else None
            if group is None and original.__name__ == "init_process_group":
                group = dist.distributed_c10d._get_default_group()
            if group is not None:
                _asked_for_nccl.add(group)
        return result

    return wrapper


def _make_get_backend(original):
    @functools.wraps(original)
    def get_backend(group=None):
        backend = original(group)
        import torch

        if torch.compiler.is_compiling() or caller_is_truthful(1):
            return backend
        import torch.distributed as dist

        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        return dist.Backend("nccl") if pg in _asked_for_nccl else backend

    return get_backend


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
    get_backend = dist.get_backend
    patcher.set(dist, "get_backend", _make_get_backend(get_backend))
    if getattr(dist.distributed_c10d, "get_backend", None) is get_backend:
        patcher.set(dist.distributed_c10d, "get_backend", dist.__dict__["get_backend"])
