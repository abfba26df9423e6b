"""Every Note has one home (issue 33, point 5).

A Note is a named design explanation in a comment. It is defined once, where
a line holds only its title, underlined with tildes as long as the title:

    // Note [Title]            C and C++ (`# Note [Title]` in Python, CMake,
    // ~~~~~~~~~~~~            shell; `/* Note [Title]` over ` * ~~~` in a
    // the explanation ...     C header's block comment)

A Python docstring holds the title and its underline without a comment
marker; Markdown writes the definition as a setext heading (the title over a
line of `-`: tildes would open a code fence). Everywhere else, code and
Markdown, the Note is cited in prose: "(Note [Title])", "See Note [Title]",
also wrapped over comment lines; "Notes [A], [B]" cites several.

The tests check, over the files git tracks plus the untracked ones it does not
ignore: every title line is underlined and no title is defined twice; every
cited title has its definition. Bracketed titles ending in "..." are prose
(`Note [...]`), not citations.
"""

from __future__ import annotations

import bisect
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_core  # reads sources only: runs without the built core

ROOT = Path(__file__).resolve().parents[2]
# This file is left out of the repository's scan: its samples and messages
# spell Notes that exist nowhere else.
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

C_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".cu", ".cuh", ".cl"}
HASH_SUFFIXES = {".py", ".cmake", ".sh", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".in"}

# Cited titles with no definition, each with its reason. Keep it empty: a
# citation should name a Note that exists.
ALLOWED_UNDEFINED: dict[str, str] = {}

_TITLE = r"Note \[(?P<title>[^\[\]]+)\]"
_TITLE_LINE = {
    "c": re.compile(rf"^(?P<indent>\s*)(?P<prefix>//|/\*|\*) (?P<note>{_TITLE})\s*$"),
    "hash": re.compile(rf"^(?P<indent>\s*)(?P<prefix>#) (?P<note>{_TITLE})\s*$"),
    "py": re.compile(rf"^(?P<indent>\s*)(?:(?P<prefix>#) )?(?P<note>{_TITLE})\s*$"),
    "md": re.compile(rf"^(?P<indent>\s*)(?:(?P<prefix>#+) )?(?P<note>{_TITLE})\s*$"),
}
# A comment marker (or Markdown quote) at the start of a line: dropped when a
# citation is read across lines.
_LINE_PREFIX = re.compile(r"^\s*(?://+|#+|/\*+|\*+|>+)?\s?")
_CITATION = re.compile(
    r"\bNote\s+\[(?P<one>[^\[\]]+)\](?!\()"
    r"|\bNotes\s+(?P<many>\[[^\[\]]+\](?:\s*(?:,|and|, and)\s*\[[^\[\]]+\](?!\())*)"
)
_MAX_TITLE = 100  # longer bracketed text is not a title (a test's sample prose)


def _kind(path: str) -> str | None:
    p = Path(path)
    if p.suffix == ".md":
        return "md"
    if p.suffix == ".py":
        return "py"
    if p.suffix in C_SUFFIXES:
        return "c"
    if p.suffix in HASH_SUFFIXES or p.name == "CMakeLists.txt":
        return "hash"
    return None


def _underline(kind: str, indent: str, prefix: str | None, note: str) -> str:
    if kind == "md":
        return indent + "-" * len(note)
    if prefix == "/*":
        return f"{indent} * " + "~" * len(note)
    if prefix is None:  # a docstring
        return indent + "~" * len(note)
    return f"{indent}{prefix} " + "~" * len(note)


def _normalize(title: str) -> str:
    title = re.sub(r'"\s+"', "", title)  # a Python string continued on the next line
    return " ".join(title.split())


def _is_prose(title: str) -> bool:
    return title.endswith("...") or len(title) > _MAX_TITLE


def scan(files: dict[str, str]):
    """(definitions, citations, problems) of @p files ({path: text}):
    definitions and citations map a title to its [(path, line)]."""
    definitions: dict[str, list[tuple[str, int]]] = defaultdict(list)
    citations: dict[str, list[tuple[str, int]]] = defaultdict(list)
    problems: list[str] = []
    for path, text in sorted(files.items()):
        kind = _kind(path)
        lines = text.split("\n")
        prose: list[str] = []  # the lines without comment markers, title lines blanked
        for i, line in enumerate(lines):
            m = _TITLE_LINE[kind].match(line) if kind else None
            if m and not _is_prose(m["title"]):
                title = m["title"]
                definitions[title].append((path, i + 1))
                want = _underline(kind, m["indent"], m["prefix"], m["note"])
                got = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
                if kind == "md" and m["prefix"]:
                    problems.append(
                        f"{path}:{i + 1}: Note [{title}] is a heading: write it as a setext "
                        f"heading (the title over {want.strip()!r})"
                    )
                elif got != want:
                    problems.append(
                        f"{path}:{i + 1}: Note [{title}] is not underlined (want {want!r})"
                    )
                prose.append("")
                continue
            prose.append(_LINE_PREFIX.sub("", line, count=1).strip())
        # Citations may wrap: read the lines as one text, remembering where
        # each line starts.
        starts, offset = [], 0
        for line in prose:
            starts.append(offset)
            offset += len(line) + 1
        joined = " ".join(prose)
        for m in _CITATION.finditer(joined):
            line_no = bisect.bisect_right(starts, m.start())
            titles = [m["one"]] if m["one"] else re.findall(r"\[([^\[\]]+)\]", m["many"])
            for title in map(_normalize, titles):
                if not _is_prose(title):
                    citations[title].append((path, line_no))
    for title, places in sorted(definitions.items()):
        if len(places) > 1:
            where = ", ".join(f"{p}:{n}" for p, n in places)
            problems.append(f"Note [{title}] is defined {len(places)} times: {where}")
    for title, places in sorted(citations.items()):
        if title not in definitions and title not in ALLOWED_UNDEFINED:
            where = ", ".join(f"{p}:{n}" for p, n in places[:5])
            problems.append(f"Note [{title}] is cited but defined nowhere: {where}")
    return definitions, citations, problems


def _repository_files() -> dict[str, str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    files = {}
    for name in filter(None, listed):
        if name == SELF:
            continue
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree, or a submodule
            continue
        try:
            files[name] = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):  # binary
            continue
    return files


@pytest.fixture(scope="module")
def repository():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return scan(_repository_files())


def test_every_note_is_defined_once_and_underlined(repository):
    definitions, _, problems = repository
    assert len(definitions) > 100  # the scanner found the Notes
    mine = [p for p in problems if "cited but defined nowhere" not in p]
    assert not mine, "\n".join(mine)


def test_every_cited_note_has_a_definition(repository):
    _, citations, problems = repository
    assert len(citations) > 100
    mine = [p for p in problems if "cited but defined nowhere" in p]
    assert not mine, "\n".join(mine)


def test_allowlisted_titles_are_still_undefined(repository):
    definitions, _, _ = repository
    stale = sorted(set(ALLOWED_UNDEFINED) & set(definitions))
    assert not stale, f"defined now, drop from ALLOWED_UNDEFINED: {stale}"


GOOD_SAMPLE = {
    "a.cpp": (
        "// Note [Kept]\n"
        "// ~~~~~~~~~~~\n"
        "// The explanation.\n"
        "int f();  // See Note\n"
        "          // [Kept], wrapped.\n"
    ),
    "b.h": "/* Note [In a block]\n * ~~~~~~~~~~~~~~~~~\n * Text. */\n",
    "c.py": (
        '"""Module.\n\nNote [Docstring]\n~~~~~~~~~~~~~~~~\nText.\n"""\n'
        "# Note [Hash]\n# ~~~~~~~~~~~\n# Text (Note [Kept]).\n"
        'x = ("Note [Kept], Note [In a "\n     "block]")\n'
    ),
    "d.md": (
        "Note [Markdown]\n---------------\n\nText; Notes [Kept], [Hash] and [Docstring].\n"
        "The `Note [...]` comments.\n"
    ),
}
BAD_SAMPLE = {
    "a.cpp": (
        "// Note [Twice]\n// ~~~~~~~~~~~~\n// Text.\n"
        "// Note [Bare]\n// Text without an underline.\n"
        "x;  // see Note [Missing]\n"
    ),
    "b.cpp": "// Note [Twice]\n// ~~~~~~~~~~~~\n",
    "c.md": "## Note [Heading]\n\nText.\n",
}


def test_the_scanner_accepts_defined_notes_and_flags_the_rest():
    definitions, citations, problems = scan(GOOD_SAMPLE)
    assert problems == []
    assert set(definitions) == {"Kept", "In a block", "Docstring", "Hash", "Markdown"}
    assert citations["Kept"] == [("a.cpp", 4), ("c.py", 9), ("c.py", 10), ("d.md", 4)]
    assert citations["In a block"] == [("c.py", 10)]
    assert "..." not in citations

    _, _, problems = scan(BAD_SAMPLE)
    flagged = "\n".join(problems)
    assert "a.cpp:4: Note [Bare] is not underlined" in flagged
    assert "Note [Twice] is defined 2 times: a.cpp:1, b.cpp:1" in flagged
    assert "Note [Missing] is cited but defined nowhere: a.cpp:6" in flagged
    assert "c.md:1: Note [Heading] is a heading" in flagged
    assert len(problems) == 4
