"""torch.flagos streams and events.

torch.flagos.Stream subclasses PyTorch's device-generic torch.Stream and
torch.flagos.Event makes torch.Events, both bound to the flagos device: all the work (create, record, wait, query, synchronize,
elapsed time) goes through the core's device guard, the same path
torch.accelerator and autograd use.
"""

from __future__ import annotations

from typing import Any

import torch

from . import _index

__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
]


class Stream(torch.Stream):
    """An in-order queue of work on one flagos device.

    Args:
        device: int, "flagos:N" or torch.device; default the current device.
        priority: 0 (normal) or negative (higher priority, a hint).
    """

    def __new__(cls, device: Any = None, priority: int = 0, **handle: int):
        if handle:  # stream_id=, device_index=, device_type=: wrap an existing stream
            return super().__new__(cls, **handle)
        return super().__new__(
            cls, device=torch.device("flagos", _index(device)), priority=priority
        )

    @classmethod
    def _wrap(cls, base: torch.Stream) -> Stream:
        return cls(
            stream_id=base.stream_id, device_index=base.device_index, device_type=base.device_type
        )


# Note [Events are plain torch.Events]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# torch's C code accepts only objects whose type is exactly torch.Event in
# Event.elapsed_time(other) and Stream.record_event(event), so a subclass
# would break timing. torch.flagos.Event therefore builds plain torch.Events
# on the flagos device; isinstance(e, torch.flagos.Event) is true for every
# torch.Event of the flagos device.
class _EventType(type):
    def __call__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ):
        return torch.Event(
            device=torch.device("flagos"),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch.Event) and obj.device.type == "flagos"


class Event(metaclass=_EventType):
    """A marker in a flagos stream, for ordering streams and timing work.

    Returns a torch.Event on the flagos device (Note [Events are plain torch.Events]).

    Args:
        enable_timing: record timestamps so elapsed_time() works.
    """


def current_stream(device: Any = None) -> Stream:
    """The calling thread's current stream on `device` (default: current device)."""
    return Stream._wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: Any = None) -> Stream:
    """The stream work runs on unless another is selected (stream id 0, see csrc/runtime/stream.h)."""
    current = torch.accelerator.current_stream(_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Make `stream` current on its device (and its device the current device)."""
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager: run the enclosed work on `stream` (None: no-op)."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream

    def __enter__(self) -> torch.Stream | None:
        if self.stream is not None:
            self.stream.__enter__()
        return self.stream

    def __exit__(self, *exc) -> bool:
        if self.stream is not None:
            self.stream.__exit__(*exc)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """`with torch.flagos.stream(s):` runs the enclosed work on `s`."""
    return StreamContext(stream)
