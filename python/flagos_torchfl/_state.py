"""The device type and whether a backend is up: a leaf module.

Every other module of the package may import this one; it imports none of
them (only _core, lazily), so `backend`, `amp`, `cuda_alias` and the
`torch.flagos` device module no longer import each other to ask "is a
backend initialized?" (that was an import cycle).
"""

from __future__ import annotations

# The PrivateUse1 name: tensors live on torch.device("flagos").
DEVICE_TYPE = "flagos"

# The backend initialize() brought up (set by backend.initialize only).
backend_name: str | None = None


def is_initialized() -> bool:
    """True once initialize() succeeded in this process."""
    return backend_name is not None


def require_initialized():
    """The extension module; a clear error before initialize()."""
    if not is_initialized():
        raise RuntimeError(
            "flagos-torchfl is not initialized: call flagos_torchfl.initialize() first"
        )
    from . import _core

    return _core.C()
