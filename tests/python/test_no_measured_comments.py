"""No C/C++ comment carries a measured figure (issue 33, point 5).

Measured times, bandwidths, FLOP rates and speed ratios go stale with the
next change to the code or the machine; they live in docs/benchmarks.md
(current results, each with its command; "Measurements behind design
decisions" for the figures that explain a choice), and history stays in git.
A comment keeps the reasoning and points there.

The scanner reads the comments of csrc/, backends/, kit/, include/ and
tests/cpp/ (`//` lines and `/* */` blocks; string and character literals are
skipped with a simple lexer) and flags a figure: a number with a time unit
(ns, us, µs, ms, s), a bandwidth (GB/s), a FLOP rate (GFLOP/s) or a ratio
(1.3x, 2× faster). A bound that is a parameter, not a measurement (a
timeout, a test's tolerance, a limit), may stay when its line says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_core  # reads sources only: runs without the built core

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("csrc", "backends", "kit", "include", "tests/cpp")
SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh"}

_NUM = r"\d+(?:[.,]\d+)?"
_RANGE = rf"{_NUM}(?:\s*(?:-|–|to)\s*{_NUM})?"
MEASURED = re.compile(
    "|".join(
        (
            # a time: 3 ns, 10-40 us, ~2.5 ms, 1.3 s, 180 -> 50 ms (not "1s", "2s + 1")
            rf"(?<![\w.^]){_RANGE}\s?(?:ns|us|µs|μs|ms|msec|sec|seconds?)\b(?!/)",
            rf"(?<![\w.^]){_RANGE} s\b(?!/)",
            # a bandwidth: 25.9 GB/s, 4 GiB/s
            rf"(?<![\w.]){_NUM}\s?[KMGT]i?B/s\b",
            # a FLOP rate: 14 GFLOP/s, 290 GFLOPS
            rf"(?<![\w.]){_NUM}\s?[KMGTP]?FLOP(?:/s|S)\b",
            # a ratio: 1.3x, 0.85×, 5-7x below, 2 x faster, 25× its exp (not 8x8, "4 x float")
            rf"(?<![\w.]){_NUM}[x×](?=\s|[),.;:]|$)",
            rf"(?<![\w.]){_NUM}\s?[x×]\s+(?:faster|slower|quicker|as fast|as slow|the cost)\b",
            # a ratio in words
            r"\b(?:twice|thrice|\d+ times) as (?:fast|slow|quick)\b",
            r"\b(?:faster|slower) by \d",
        )
    ),
    re.IGNORECASE,
)
# A figure that a bound word precedes on its line (a timeout, a test's
# tolerance, an allowed error) is a parameter of the code or the test, not a
# measurement.
BOUND = re.compile(
    r"\b(?:timeouts?|time-out|tolerances?|tolerates?|allowed|allowance|deadline|budget|"
    r"at most|no more than|up to|limit|bound|sleeps?|polls? every|waits? up to)\b",
    re.IGNORECASE,
)


def _is_measured(body: str) -> bool:
    return any(not BOUND.search(body, 0, m.start()) for m in MEASURED.finditer(body))


def comments(text: str) -> list[tuple[int, str]]:
    """(line number, comment text) for each line of each comment in C/C++ source.

    A small lexer: it skips string literals (with escapes), character
    literals and raw strings R"d( ... )d", so that "http://" or "/*" inside a
    literal opens no comment. A quote right after a letter or digit (a digit
    separator: 1'000) opens no character literal.
    """
    out: list[tuple[int, str]] = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2 : end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2 : end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 2
        elif c == "R" and text.startswith('"', i + 1) and not (i and text[i - 1].isalnum()):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            close = ")" + m.group(1) + '"'
            end = text.find(close, i + m.end())
            end = n if end < 0 else end + len(close)
            line += text.count("\n", i, end)
            i = end
        elif c == '"' or (c == "'" and not (i and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def measured_lines(text: str) -> list[tuple[int, str]]:
    """The comment lines of `text` that carry a measured figure."""
    return [(ln, body.strip()) for ln, body in comments(text) if _is_measured(body)]


def sources():
    for folder in FOLDERS:
        base = ROOT / folder
        if base.is_dir():
            yield from sorted(p for p in base.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def test_no_comment_carries_a_measured_figure():
    found = []
    for path in sources():
        text = path.read_text(encoding="utf-8", errors="replace")
        for ln, body in measured_lines(text):
            found.append(f"{path.relative_to(ROOT)}:{ln}: {body}")
    assert not found, (
        "comments with measured figures (move them to docs/benchmarks.md, "
        "section 'Measurements behind design decisions', and keep the reasoning):\n"
        + "\n".join(found)
    )


# Lines of the comments this test was written against (before issue 33).
OLD_SAMPLE = r"""
// Skipping it saves one command per mm/bmm, ~10-40 us on PoCL (Note [GEMM
// parts picks 256): 16M sigmoids 14.4-19.4 -> 12.8-13.5 ms, softmax rows
/* A recipe is ~20-90 us: parsing a gelu-like expression and one
   lowering. */
int x = 1;  // CLBlast reaches ~14 GFLOP/s; a copy 25.9 GB/s
// the own kernel is 1.3x faster at 16^3, and 2x slower at 2^20
// PoCL's erff is 25× its exp
"""

# Text the scanner must leave alone: literals, dimensions, bounds, units
# without numbers.
CLEAN_SAMPLE = r"""
const char* kUrl = "http://example.org/* not a comment */ 10 ms";
const char* kFmt = "%.3f ms, 2.5x";  // the format of the report line
auto raw = R"cl(// 3 ms inside a raw string)cl";
char q = '"';  // a quote character; the tile is 8x8 and the image 3x224x224
// The test's tolerance: the timer's error may be up to 1 ms.
// Timeout of 30 s for the child process.
// A recipe takes far longer than a launch, so recipes are made once.
/* a 4x4 block of 16 elements; milliseconds add up over a step */
int y = 1'000;  // digit separators are not character literals
"""


def test_the_scanner_flags_measured_figures_and_nothing_else():
    flagged = [ln for ln, _ in measured_lines(OLD_SAMPLE)]
    assert flagged == [2, 3, 4, 6, 7, 8], measured_lines(OLD_SAMPLE)
    assert measured_lines(CLEAN_SAMPLE) == []
    lines = dict(comments(CLEAN_SAMPLE))
    assert 2 not in lines and 4 not in lines  # inside string literals only
    assert "the format of the report line" in lines[3]
    assert "digit separators" in lines[10]
