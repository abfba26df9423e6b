"""Output shared by the tools: tables with optional colour, JSON and JUnit files."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
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


# Seconds between the plain progress lines written where stderr is not a
# terminal (CI logs): a 40 s validation is not silent, a 2 s one prints nothing.
PLAIN_PROGRESS_EVERY = 5.0


def progress(iterable: Sequence[Any], label: str, stream=None, every: float | None = None):
    """Yield from `iterable`, showing `label i/n` on stderr.

    On a terminal the line is redrawn in place each step and cleared at the
    end. Elsewhere (CI logs, pipes) a plain line `label i/n` is written at
    most every `every` seconds (PLAIN_PROGRESS_EVERY), so a short run stays
    quiet and a long one shows it is alive.
    """
    stream = stream or sys.stderr
    total = len(iterable)
    if not getattr(stream, "isatty", lambda: False)():
        every = PLAIN_PROGRESS_EVERY if every is None else every
        last = time.monotonic()
        for i, item in enumerate(iterable, 1):
            yield item
            now = time.monotonic()
            if now - last >= every and i < total:
                stream.write(f"{label} {i}/{total}\n")
                stream.flush()
                last = now
        return
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


# Where `--json -` writes: the real stdout while json_only_stdout() holds it.
_json_stream = None


@contextlib.contextmanager
def json_only_stdout(active: bool):
    """With `--json -`, keep stdout for the JSON alone: while the command runs,
    everything else written to stdout (the user's model file printing, a
    library's banner, native code writing to fd 1) goes to stderr."""
    global _json_stream
    if not active:
        yield
        return
    sys.stdout.flush()
    saved_fd = os.dup(1)
    saved_stdout = sys.stdout
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _json_stream = os.fdopen(os.dup(saved_fd), "w")
    try:
        yield
    finally:
        sys.stderr.flush()
        _json_stream.flush()
        _json_stream.close()
        _json_stream = None
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        sys.stdout = saved_stdout


def json_stdout():
    """The stream `--json -` writes to (the real stdout under json_only_stdout)."""
    return _json_stream or sys.stdout


def write_json(path: str | None, data: Any) -> None:
    """Write `data` to `path` as JSON; '-' is stdout; None does nothing."""
    if not path:
        return
    text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
    if path == "-":
        json_stdout().write(text)
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
