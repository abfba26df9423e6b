"""The layers of csrc/ as the tree states them (docs/architecture.md, "The
tree and the tier walk"): each folder includes only the folders below it,
and no client of the compiled-kernel service reaches into another client
(issue 33). Read from the sources: runs without the built core."""

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_core

CSRC = Path(__file__).resolve().parents[2] / "csrc"
# folder -> the csrc/ folders its files may include (its own always may).
# "flagos/" (the ABI) and "flagos_kit/" (the kit) are open to every folder.
ALLOWED = {
    "runtime": set(),
    "jit/gen": set(),
    "jit": {"runtime", "jit/gen"},
    "dispatch": {"runtime", "jit", "dispatch"},
    "extension": {"runtime", "jit", "python"},
    "comm": {"runtime", "python"},
    "python": {"runtime", "dispatch/core", "dispatch/tiers/host", "python"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    rel = path.relative_to(CSRC).as_posix()
    return max((name for name in ALLOWED if rel.startswith(name + "/")), key=len)


def reaches(include, folder):
    return include.startswith(folder + "/")


def violations():
    for path in sorted(CSRC.rglob("*")):
        if path.suffix not in {".h", ".cpp"}:
            continue
        layer = layer_of(path)
        own = [layer] + sorted(ALLOWED[layer])
        for include in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if include.split("/")[0] in {"flagos", "flagos_kit"} or "/" not in include:
                continue
            if not any(reaches(include, folder) for folder in own):
                yield f"{path.relative_to(CSRC)} includes {include}"


def test_each_folder_includes_only_the_layers_below_it():
    assert list(violations()) == []


def test_the_rules_catch_a_client_reaching_into_another():
    """The checker itself: extension/ including a dispatch/ file is refused."""
    path = CSRC / "extension" / "custom_kernel.cpp"
    layer = layer_of(path)
    assert layer == "extension"
    assert not any(reaches("dispatch/bridge/catalog.h", f) for f in [layer, *ALLOWED[layer]])
    gen = CSRC / "jit" / "gen" / "emit.h"
    assert layer_of(gen) == "jit/gen"
    assert not any(reaches("jit/devices.h", f) for f in ["jit/gen", *ALLOWED["jit/gen"]])
