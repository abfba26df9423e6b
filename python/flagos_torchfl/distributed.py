"""torch.distributed on the flagos device: the ``fccl`` c10d backend.

After ``flagos_torchfl.initialize()`` (which calls :func:`register`) every
usual way of starting a process group reaches it::

    dist.init_process_group(device_id=torch.device("flagos", local_rank))  # backend=None
    dist.init_process_group("fccl")                    # flagos tensors only
    dist.init_process_group("cpu:gloo,flagos:fccl")    # CPU tensors too

DDP, FSDP2 (``fully_shard``), DeviceMesh and ``new_group`` use it unchanged.

Each process group takes one route, chosen when it is created
(``FLAGOS_COMM``, read by the core): ``vendor``, the active plugin's
collective library (``host-shm`` for the host plugin; NCCL, RCCL, HCCL, ...
for accelerators), or ``host``, which stages tensors through host memory and
runs gloo. ``auto`` (the default) takes the vendor route when the plugin has
a collectives table. :func:`comm_info` says what was chosen.

The C++ side is csrc/comm/ (README.md there explains the design).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from . import _core
from ._state import DEVICE_TYPE

BACKEND_NAME = "fccl"
#: What "nccl" becomes under the cuda alias (see rewrite_nccl_backend).
NCCL_REPLACEMENT = f"cpu:gloo,{DEVICE_TYPE}:{BACKEND_NAME}"

logger = logging.getLogger(__name__)
_registered = False


@dataclass
class Options:
    """Per-group options: ``dist.new_group(backend="fccl", pg_options=Options(route="host"))``.

    ``route``: "vendor", "host" or "auto"; None (default) follows FLAGOS_COMM.
    """

    route: str | None = None


def is_available() -> bool:
    """True when this torch has torch.distributed (and gloo, for the host route)."""
    import torch.distributed as dist

    return dist.is_available()


def register() -> None:
    """Register ``fccl`` with torch.distributed for the ``flagos`` device.

    Idempotent; called by ``initialize()`` once the device is named. Sets
    ``Backend.default_device_backend_map["flagos"] = "fccl"``, which is what
    ``init_process_group(backend=None)`` and ``device_id=`` rely on.
    """
    global _registered
    if _registered or not is_available():
        return
    import torch.distributed as dist

    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=[DEVICE_TYPE]
    )
    _registered = True


def _create_backend(opts: Any, pg_options: Any = None) -> Any:
    """torch.distributed's creator (extended API): one fccl backend per group."""
    from torch.distributed import PrefixStore, ProcessGroupGloo

    C = _core.C()
    requested = pg_options.route if isinstance(pg_options, Options) else None
    route = C._comm_choose_route(requested)  # raises when vendor is asked for but absent
    _check_same_route(opts, route)
    gloo = None
    if route == "host":
        # The inner CPU backend of the host route, on its own store prefix.
        gloo = ProcessGroupGloo(
            PrefixStore(f"{BACKEND_NAME}_gloo/", opts.store),
            opts.group_rank,
            opts.group_size,
            opts.timeout,
        )
    backend = C._comm_create_backend(
        opts.store,
        opts.group_rank,
        opts.group_size,
        opts.timeout,
        route,
        gloo,
        str(opts.group_id),
    )
    info = C._comm_backend_info(backend)
    logger.info(
        "fccl: group '%s' rank %d/%d takes the %s route (%s; FLAGOS_COMM=%s)",
        info["group"],
        info["rank"],
        info["size"],
        info["route"],
        info["library"],
        C._comm_mode(),
    )
    return backend


def _check_same_route(opts: Any, route: str) -> None:
    """Ranks on different routes would only time out: compare with rank 0's at creation."""
    key = f"{BACKEND_NAME}/route"
    if opts.group_rank == 0:
        opts.store.set(key, route)
        return
    theirs = opts.store.get(key).decode()
    if theirs != route:
        raise RuntimeError(
            f"fccl: rank {opts.group_rank} of group '{opts.group_id}' takes the {route} route "
            f"but rank 0 takes the {theirs} route; set FLAGOS_COMM (or Options.route) the same "
            "on every rank"
        )


def comm_info(group: Any = None) -> dict[str, Any]:
    """The communication route, for ``backend_info()`` and tools.

    With an initialized process group (``group`` or the default one) that
    has an fccl backend: what it runs on. Otherwise: what a new group would
    choose now. Keys: ``backend`` ("fccl"), ``mode`` (FLAGOS_COMM),
    ``route`` ("vendor", "host" or None when the choice fails), ``library``
    ("host-shm", "gloo", ...), ``initialized``; for a live group also
    ``rank``, ``size``, ``group``, ``timeout_ms``; ``error`` when
    FLAGOS_COMM is invalid or asks for a library the plugin lacks.
    """
    C = _core.C()
    info: dict[str, Any] = {"backend": BACKEND_NAME, "initialized": False}
    try:
        info["mode"] = C._comm_mode()
    except (RuntimeError, ValueError) as err:
        return {**info, "mode": None, "route": None, "library": None, "error": str(err)}
    live = _live_backend(group)
    if live is not None:
        return {**info, **C._comm_backend_info(live), "initialized": True}
    try:
        route = C._comm_choose_route()
    except (RuntimeError, ValueError) as err:
        return {**info, "route": None, "library": None, "error": str(err)}
    library = C._comm_vendor_library() if route == "vendor" else "gloo"
    return {**info, "route": route, "library": library}


def _live_backend(group: Any) -> Any:
    """The fccl backend of `group` (default: the default group), or None."""
    if not is_available():
        return None
    import torch.distributed as dist

    if group is None:
        if not dist.is_initialized():
            return None
        group = dist.distributed_c10d._get_default_group()
    try:
        backend = group._get_backend(torch.device(DEVICE_TYPE))
    except (RuntimeError, ValueError):
        return None
    return backend if _core.C()._comm_backend_info(backend) is not None else None


def rewrite_nccl_backend(backend: str | None) -> str | None:
    """A backend string with NCCL replaced by fccl, for the cuda alias.

    ``"nccl"`` -> ``"cpu:gloo,flagos:fccl"``; in ``"device:backend"`` lists
    ``nccl`` becomes ``fccl`` and ``cuda`` (the alias of flagos) becomes
    ``flagos`` (``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,flagos:fccl"``).
    Anything else, None included, is returned unchanged.
    """
    if backend is None:
        return None
    text = str(backend).strip().lower()
    if text == "nccl":
        return NCCL_REPLACEMENT
    if ":" not in text or "nccl" not in text:
        return backend
    pairs = []
    for pair in text.split(","):
        device, _, name = (part.strip() for part in pair.partition(":"))
        if name == "nccl":
            name = BACKEND_NAME
        if device == "cuda" and name == BACKEND_NAME:
            device = DEVICE_TYPE
        pairs.append(f"{device}:{name}")
    return ",".join(pairs)
