"""Access to the compiled core, flagos_torchfl._C (csrc/python/README.md).

Imported lazily: torch imports this package at `import torch` (backend
autoload), and that must stay cheap and must not fail when the extension is
missing or when another vendor already owns PrivateUse1.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_module: ModuleType | None = None


def C() -> ModuleType:
    """The extension module; ImportError with the build command if missing."""
    global _module
    if _module is None:
        try:
            _module = importlib.import_module("flagos_torchfl._C")
        except ImportError as err:
            raise ImportError(
                f"flagos_torchfl._C could not be loaded ({err}). Build it against the "
                "installed torch with: pip install --no-build-isolation -e ."
            ) from err
    return _module


def loaded() -> bool:
    """True once C() succeeded; never imports anything."""
    return _module is not None
