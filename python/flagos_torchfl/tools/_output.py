"""Output shared by the tools: tables with optional colour, JSON and JUnit files."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import config
from .._text import table

_COLOURS = {
    "ok": "32",
    "native": "32",
    "core": "32",
    "pass": "32",
    "warn": "33",
    "decomposition": "33",
    "generated": "33",
    "error": "31",
    "fail": "31",
    "fallback": "31",
}


def use_colour(stream=None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and not config.no_color()


def progress(iterable: Sequence[Any], label: str, stream=None):
    """Yield from `iterable`, drawing `label i/n` on a terminal's stderr.

    Long runs (training steps, benchmark repetitions) show they are alive;
    nothing is written when stderr is not a terminal (CI logs, pipes).
    """
    stream = stream or sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        yield from iterable
        return
    total = len(iterable)
    for i, item in enumerate(iterable, 1):
        stream.write(f"\r{label} {i}/{total}")
        stream.flush()
        yield item
    stream.write("\r" + " " * (len(label) + 2 * len(str(total)) + 2) + "\r")
    stream.flush()


def paint(text: str, key: str, colour: bool) -> str:
    """`text` in the colour of `key` (a tier, severity or verdict) when `colour`."""
    code = _COLOURS.get(key.split()[0] if key else key)
    return f"\033[{code}m{text}\033[0m" if colour and code else text


def render(rows: Sequence[Sequence[str]], colour_column: int | None = None) -> str:
    """_text.table, then colour one column's cells by their own value (after padding,
    so the escape codes do not upset the widths)."""
    text = table(rows)
    if colour_column is None or not use_colour():
        return text
    lines = text.split("\n")
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    start = 2 + sum(w + 2 for w in widths[:colour_column])
    out = [lines[0]]
    for line, row in zip(lines[1:], rows[1:], strict=True):
        cell = row[colour_column]
        out.append(line[:start] + paint(cell, cell, True) + line[start + len(cell) :])
    return "\n".join(out)


def write_json(path: str | None, data: Any) -> None:
    """Write `data` to `path` as JSON; '-' is stdout; None does nothing."""
    if not path:
        return
    text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        Path(path).write_text(text)


def write_junit(path: str | None, suite: str, cases: list[dict[str, Any]]) -> None:
    """JUnit XML for CI: one <testcase> per case {name, ok, message, time}."""
    if not path:
        return
    failures = sum(not c["ok"] for c in cases)
    root = ET.Element("testsuites")
    node = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors="0"
    )
    for case in cases:
        tc = ET.SubElement(
            node,
            "testcase",
            classname=suite,
            name=case["name"],
            time=f"{case.get('time', 0.0):.3f}",
        )
        if not case["ok"]:
            ET.SubElement(tc, "failure", message=case.get("message", "failed")).text = case.get(
                "message", ""
            )
        elif case.get("message"):
            ET.SubElement(tc, "system-out").text = case["message"]
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def add_output_arguments(parser, junit: bool = False) -> None:
    """--json FILE (and --junit FILE) for a command's parser."""
    parser.add_argument(
        "--json", metavar="FILE", default=None, help="also write the result as JSON ('-': stdout)"
    )
    if junit:
        parser.add_argument("--junit", metavar="FILE", default=None, help="write JUnit XML for CI")
