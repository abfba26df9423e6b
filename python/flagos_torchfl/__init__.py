"""flagos-torchfl: one PyTorch device, `flagos`, for any accelerator.

    import torch
    import flagos_torchfl as ft

    ft.initialize(backend="auto")      # find a plugin, register the `flagos` device
    y = torch.relu(torch.randn(128, 128, device="flagos"))
    ft.backend_info()                  # returns a dict, prints a summary

This file only re-exports: start-up and reports live in backend.py, the
torch.flagos device module in flagos/, the environment table in config.py.
Importing the package is cheap and never loads the compiled core, because
torch imports it inside `import torch` (see Note [Autoload re-entry]).
"""

# Note [Autoload re-entry]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# torch calls our `torch.backends` entry point, _autoload, at the end of
# `import torch`. When the user imports flagos_torchfl first, our own import
# of torch (below) runs that entry point while this module is half-built, so
# _autoload is defined before anything imports torch, and then only records
# that it was called; the real work runs once the package is complete.
_importing = True
_autoload_pending = False


def _autoload() -> None:
    """torch's backend autoload hook: brings the device up if FLAGOS_BACKEND is set."""
    global _autoload_pending
    if _importing:
        _autoload_pending = True
        return
    backend._autoload()


from importlib.metadata import PackageNotFoundError, version  # noqa: E402

from . import amp, backend, config, cuda_alias, distributed  # noqa: E402
from .backend import (  # noqa: E402
    backend_info,
    initialize,
    is_initialized,
    kernel_cache_stats,
    op_stats,
    reset_op_stats,
    wait_for_specializations,
)

try:
    __version__ = version("flagos-torchfl")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "__version__",
    "amp",
    "cuda_alias",
    "distributed",
    "backend_info",
    "get_include",
    "config",
    "initialize",
    "is_initialized",
    "kernel_cache_stats",
    "op_stats",
    "reset_op_stats",
    "wait_for_specializations",
]


def get_include() -> str:
    """The folder of the vendor headers, for building a plugin out of tree.

    It holds flagos/*.h (the vendor ABI), flagos/ops.h (the operator catalog's
    semantic IDs and argument orders, generated for this build) and
    flagos_kit/*.h (the header-only plugin kit): `-I$(python -c "import
    flagos_torchfl; print(flagos_torchfl.get_include())")`.
    """
    import os

    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


_importing = False
if _autoload_pending:
    backend._autoload()
