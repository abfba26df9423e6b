"""Every source folder under csrc/ has a README whose tables list exactly
its files and subfolders (issue 33: the READMEs had drifted, missing 16
files). A file is listed when its name, in backticks, opens the first
column of a table row: `stream.cpp`, `allocator.{h,cpp}`, `tiers/`."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_core  # reads the tree only

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(
    p for p in (ROOT / "csrc").rglob("*") if p.is_dir() and any(c.is_file() for c in p.iterdir())
)
FOLDERS.insert(0, ROOT / "csrc")


def _expand(token):
    m = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", token)
    if not m:
        return [token]
    return [m.group(1) + alt + m.group(3) for alt in m.group(2).split(",")]


def listed(readme):
    names = set()
    for line in readme.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        first = line.split("|")[1]
        for token in re.findall(r"`([^`]+)`", first):
            # file names only: the python/ and comm/ tables list functions
            if re.fullmatch(r"[\w.{},/-]+", token) and ("." in token or token.endswith("/")):
                names.update(_expand(token))
    return names


def present(folder):
    names = set()
    for p in folder.iterdir():
        if p.name == "README.md" or p.name.startswith("."):
            continue
        names.add(p.name + "/" if p.is_dir() else p.name)
    return names


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_readme_lists_exactly_the_folders_files(folder):
    readme = folder / "README.md"
    assert readme.is_file(), f"{folder.relative_to(ROOT)} has no README.md"
    have, said = present(folder), listed(readme)
    assert not have - said, f"{readme.relative_to(ROOT)} does not list {sorted(have - said)}"
    assert not said - have, (
        f"{readme.relative_to(ROOT)} lists what is not there: {sorted(said - have)}"
    )


def test_a_listed_name_is_found():
    """The checker itself: a README table row names its file."""
    assert listed(ROOT / "csrc" / "runtime" / "README.md") >= {"backend.cpp", "stream.cpp"}
    assert _expand("allocator.{h,cpp}") == ["allocator.h", "allocator.cpp"]
