"""The environment table in flagos_torchfl/config.py is complete and true.

Every FLAGOS_* variable the sources read is documented there, every
documented variable is read where the table says, only config.py reads the
environment on the Python side, and docs/env.md is the table's rendering.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import REPO
from flagos_torchfl import config

pytestmark = pytest.mark.no_core

# A variable is "read" where its name is a whole string literal (in quotes:
# a getenv/os.environ argument or a constant holding the name) or a shell
# variable; names inside longer strings (generated code, -D flags) are not.
LITERAL_NAME = re.compile(r"""["'](FLAGOS_[A-Z0-9_]+)["']""")
SHELL_NAME = re.compile(r"\$\{?(FLAGOS_[A-Z0-9_]+)|\b(FLAGOS_[A-Z0-9_]+)=")
C_DEFINE = re.compile(r"#\s*define\s+(FLAGOS_[A-Z0-9_]+)")
C_SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".cl", ".cu"}
SOURCE_SUFFIXES = C_SUFFIXES | {".py", ".sh"}
SOURCE_DIRS = [
    "python",
    "csrc",
    "backends",
    "include",
    "codegen",
    "scripts",
    ".ci",
    "examples",
    "benchmarks",
    "tests",
]
# Which sources a table entry's read_by refers to.
READERS = {
    "python": ["python/flagos_torchfl/config.py"],
    "host plugin": ["backends/host"],
    "core": ["csrc"],
    "setup.py": ["setup.py"],
    "opencl plugin": ["backends/opencl"],
    "cuda plugin": ["backends/cuda"],
    "device check": ["tests/device", "scripts/device_check.sh"],
    "C++ tests": ["tests/cpp"],
    "Python tests": ["tests/python"],
    "scripts": ["scripts"],
    "benchmarks": ["benchmarks"],
}


def _files(*roots: str):
    for root in roots:
        path = REPO / root
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (
                p for p in sorted(path.rglob("*")) if p.is_file() and "build" not in p.parts
            )


def _is_shell(path: Path, text: str) -> bool:
    return path.suffix == ".sh" or text.startswith("#!/usr/bin/env bash")


def _names_read(path: Path) -> set[str]:
    """FLAGOS_* names a source file reads (see LITERAL_NAME)."""
    text = path.read_text(errors="replace")
    if _is_shell(path, text):
        return {a or b for a, b in SHELL_NAME.findall(text)}
    if path.suffix in SOURCE_SUFFIXES:
        return set(LITERAL_NAME.findall(text))
    return set()


def _macros() -> set[str]:
    """FLAGOS_* C macros (status codes, ABI constants): names, not variables."""
    return {
        name
        for path in _files("include", "csrc", "backends", "tests")
        if path.suffix in C_SUFFIXES
        for name in C_DEFINE.findall(path.read_text(errors="replace"))
    }


def test_every_variable_read_is_documented():
    macros = _macros()
    undocumented = {}
    for path in _files(*SOURCE_DIRS, "setup.py"):
        for name in _names_read(path) - macros:
            if not config.documents(name):
                undocumented.setdefault(name, []).append(str(path.relative_to(REPO)))
    assert not undocumented, f"add these to config.ENV_VARS: {undocumented}"


def test_the_scan_finds_what_config_reads():
    # The scanner itself must see a real read, or the test above proves nothing.
    assert "FLAGOS_BACKEND" in _names_read(REPO / "python/flagos_torchfl/config.py")
    assert "FLAGOS_BUILD_JOBS" in _names_read(REPO / "setup.py")
    assert "FLAGOS_ERROR_OUT_OF_MEMORY" in _macros()


@pytest.mark.parametrize("var", config.ENV_VARS, ids=lambda v: v.name)
def test_every_documented_variable_is_read_where_the_table_says(var):
    assert var.read_by in READERS, f"{var.name}: unknown read_by {var.read_by!r}"
    if var.read_by == "python":  # read through config._get, not just listed in the table
        text = (REPO / READERS["python"][0]).read_text()
        assert f'_get("{var.name}")' in text
        return
    name = var.name.split("<")[0]  # a family like FLAGOS_OP_<ID> is read by its prefix
    readers = [p for p in _files(*READERS[var.read_by]) if name in _names_read(p)]
    assert readers, f"{var.name} is documented as read by {var.read_by}, which never reads it"


def test_only_config_reads_the_environment():
    package = REPO / "python" / "flagos_torchfl"
    readers = [
        str(p.relative_to(REPO))
        for p in package.rglob("*.py")
        if p.name != "config.py" and re.search(r"os\.environ|getenv\(", p.read_text())
    ]
    assert not readers, f"read environment variables through flagos_torchfl.config: {readers}"


def test_docs_env_md_is_generated_from_the_table():
    doc = REPO / "docs" / "env.md"
    assert doc.read_text() == config.markdown(), (
        "docs/env.md is stale: python -m flagos_torchfl env --markdown > docs/env.md"
    )


def test_table_cells_stay_in_their_column():
    for var in config.ENV_VARS:
        assert "|" not in var.meaning + var.default, f"{var.name}: '|' breaks docs/env.md"


@pytest.mark.parametrize(
    "text, expected",
    [("4096", 4096), ("512K", 512 << 10), ("64M", 64 << 20), ("2GiB", 2 << 30), ("1 kb", 1024)],
)
def test_parse_bytes(text, expected):
    assert config.parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "M", "12X", "-1", "1.5G"])
def test_parse_bytes_rejects_garbage(text):
    with pytest.raises(ValueError, match="not a byte size"):
        config.parse_bytes(text)


def test_accessors_read_the_environment(monkeypatch):
    monkeypatch.setenv("FLAGOS_PLUGIN_PATH", os.pathsep.join(["/a", "", "/b.so"]))
    monkeypatch.setenv("FLAGOS_LOG_FALLBACK", "1")
    monkeypatch.setenv("FLAGOS_BACKEND", "  host ")
    monkeypatch.setenv("FLAGOS_HOST_MEMORY_LIMIT", "64M")
    assert config.plugin_path() == ["/a", "/b.so"]
    assert config.log_fallback() is True
    assert config.backend() == "host"
    assert config.host_memory_limit() == 64 << 20
    monkeypatch.delenv("FLAGOS_BACKEND")
    monkeypatch.setenv("FLAGOS_LOG_FALLBACK", "0")
    assert config.backend() is None
    assert config.log_fallback() is False
