"""Reversible attribute patches: every change the alias makes goes through here.

A Patcher records, for each (owner, name) it sets, what was there before
(or that nothing was), and undo() puts it all back in reverse order. The
alias keeps one Patcher while active, so deactivate() leaves torch exactly
as activate() found it.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


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
        setattr(owner, name, value)

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

    def __len__(self) -> int:
        return len(self._undo)
