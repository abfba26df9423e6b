"""torch.load of CUDA checkpoints: storages tagged "cuda"/"cuda:N" restore onto flagos.

Every map_location form (None, "cuda:0", torch.device("cuda"), a dict, a
callable returning None) ends in torch.serialization.default_restore_location,
which asks the registered deserializers in priority order. We add one just
before CUDA's (priority 20) that restores "cuda[:N]" on "flagos[:N]"; a
callable map_location that calls storage.cuda() is covered by the storage
patches in _factories.py. Saving is unchanged: flagos tensors are tagged
"flagos:N" (docs/cuda-alias.md, known limits).
"""

from __future__ import annotations

import torch.serialization as serialization

from ._names import is_cuda_device, to_flagos

PRIORITY = 19  # just before CUDA's deserializer (20)


def _no_tag(obj):
    return None  # saving never tags anything "cuda"


def _restore_cuda_on_flagos(obj, location: str):
    if is_cuda_device(location):
        return serialization.default_restore_location(obj, to_flagos(location))
    return None


_ENTRY = (PRIORITY, _no_tag, _restore_cuda_on_flagos)


def install() -> None:
    registry = serialization._package_registry
    if _ENTRY in registry:
        return
    # Insert in place rather than through register_package(), which sorts the
    # tuples and would compare functions if another entry shared priority 19.
    position = next((i for i, entry in enumerate(registry) if entry[0] > PRIORITY), len(registry))
    registry.insert(position, _ENTRY)


def uninstall() -> None:
    registry = serialization._package_registry
    while _ENTRY in registry:
        registry.remove(_ENTRY)
