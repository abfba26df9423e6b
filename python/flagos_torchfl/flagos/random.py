"""torch.flagos RNG: each device has one default torch.Generator owned by the core.

torch.manual_seed() reaches manual_seed_all() here (torch/random.py seeds the
PrivateUse1 device module), so seeding works the way it does on CUDA.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import _core
from . import _index, _lazy_call, device_count

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]


def _generator(device: Any = None) -> torch.Generator:
    return _core.C()._get_default_generator(_index(device))


def manual_seed(seed: int) -> None:
    """Seed the current device's generator (once the device is in use, as on CUDA)."""
    seed = int(seed)
    _lazy_call(lambda: _generator().manual_seed(seed), "seed")


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (once the device is in use, as on CUDA)."""
    seed = int(seed)

    def apply() -> None:
        for index in range(device_count()):
            _generator(index).manual_seed(seed)

    _lazy_call(apply, "seed_all")


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    _lazy_call(lambda: _generator().seed(), "seed")


def seed_all() -> None:
    """One non-deterministic seed for every device's generator."""

    def apply() -> None:
        if device_count():
            value = _generator(0).seed()
            for index in range(1, device_count()):
                _generator(index).manual_seed(value)

    _lazy_call(apply, "seed_all")


def initial_seed() -> int:
    """The seed of the current device's generator."""
    return _generator().initial_seed()


# Generator state moves between host and device memory outside any graph:
# dynamo would trace into these (they are not torch's) and fail on the CPU
# state tensor (torch.random.fork_rng inside compiled code, checkpointing).
@torch._disable_dynamo
def get_rng_state(device: Any = "flagos") -> torch.Tensor:
    """The generator state of `device` as a CPU uint8 tensor."""
    return _generator(device).get_state()


@torch._disable_dynamo
def set_rng_state(new_state: torch.Tensor, device: Any = "flagos") -> None:
    """Restore a state returned by get_rng_state()."""
    _generator(device).set_state(new_state.clone())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)
