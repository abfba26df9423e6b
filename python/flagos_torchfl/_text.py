"""Small text helpers shared by the readable reports (backend_info, memory_summary)."""

from __future__ import annotations

from collections.abc import Sequence


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'; exact byte counts below 1 KiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def table(rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """Left-aligned columns, one line per row (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
