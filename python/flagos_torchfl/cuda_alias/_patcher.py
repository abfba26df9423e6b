"""Reversible attribute patches: every change the alias makes goes through here.

A Patcher records, for each (owner, name) it sets, what was there before
(or that nothing was), and undo() puts it all back in reverse order. The
alias keeps one Patcher while active, so deactivate() leaves torch exactly
as activate() found it.
"""

from __future__ import annotations

import functools
from typing import Any

_MISSING = object()


def missing() -> Any:
    """The `previous` of patched() for an attribute that did not exist before."""
    return _MISSING


def looking_like(original: Any, value: Any) -> Any:
    """@p value, made to answer what torch introspects on @p original.

    torch reads attributes of the callables it ships, not only calls them:
    torch._dynamo builds its tables at import from e.g.
    ``torch.cuda.use_mem_pool.__wrapped__`` (a contextmanager's generator
    function). A replacement that lacks them breaks ``import torchvision``
    (which imports dynamo) once the alias is on. So a plain function standing
    in for a wrapped one gets ``__wrapped__`` (and name, doc, signature
    through it); a shared implementation is wrapped first, so that it is not
    changed for its other users.
    """
    if not callable(original) or not callable(value) or isinstance(value, type):
        return value
    wrapped = getattr(original, "__wrapped__", _MISSING)
    if wrapped is _MISSING or hasattr(value, "__wrapped__"):
        return value

    @functools.wraps(value)
    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return value(*args, **kwargs)

    stand_in.__wrapped__ = wrapped
    return stand_in


class Patcher:
    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []
        self._seen: set[tuple[int, str]] = set()

    def set(self, owner: Any, name: str, value: Any) -> None:
        """setattr(owner, name, value), remembering the owner's own previous value.

        Only the owner's own attribute is remembered (its __dict__ entry for
        classes and modules), so a patched method inherited from a base class
        is removed again rather than copied onto the subclass.
        """
        key = (id(owner), name)
        if key not in self._seen:
            own = vars(owner) if hasattr(owner, "__dict__") else {}
            self._undo.append((owner, name, own.get(name, _MISSING)))
            self._seen.add(key)
        setattr(owner, name, looking_like(getattr(owner, name, None), value))

    def original(self, owner: Any, name: str) -> Any:
        """What owner.name was before this Patcher changed it (the current value if unchanged)."""
        for patched_owner, patched_name, previous in self._undo:
            if patched_owner is owner and patched_name == name:
                if previous is _MISSING:
                    # Inherited before: look it up past the owner's own dict.
                    for base in getattr(owner, "__mro__", ())[1:]:
                        if name in vars(base):
                            return vars(base)[name]
                    raise AttributeError(name)
                return previous
        return getattr(owner, name)

    def undo(self) -> None:
        """Restore every patched attribute, newest first."""
        while self._undo:
            owner, name, previous = self._undo.pop()
            if previous is _MISSING:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, previous)
        self._seen.clear()

    def patched(self) -> list[tuple[Any, str, Any]]:
        """(owner, name, previous) for each patched attribute; previous may be missing()."""
        return list(self._undo)

    def __len__(self) -> int:
        return len(self._undo)
