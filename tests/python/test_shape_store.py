"""Note [Shape inference across processes] (csrc/dispatch/shapes/shape_store.h):
the bridge's shape inference results outlive the process. Each case runs
fresh interpreters sharing one FLAGOS_CACHE_DIR on the host backend:
  - the first process writes the signatures it used; the next one loads
    them at initialize() and computes the same results as CPU;
  - a garbled file is ignored (nothing loaded, results still right) and
    rewritten; an edited entry fails its checksum and is dropped, counted,
    the rest loaded; FLAGOS_PRELOAD=off neither loads nor writes it.
"""

from __future__ import annotations

import json

import pytest
from conftest import CORE_ERROR, check_ok, python_subprocess

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")

STEP = """
import json, torch, flagos_torchfl as ft
ft.initialize("host")
info = json.loads(torch.ops.flagos._shape_store_info())
torch.manual_seed(0)
x, w = torch.randn(5, 7), torch.randn(3, 7)
want = torch.nn.functional.gelu(x @ w.t()).softmax(-1).sum(0)
got = torch.nn.functional.gelu(x.to("flagos") @ w.t().to("flagos")).softmax(-1).sum(0)
torch.testing.assert_close(got.cpu(), want)
print(json.dumps(info))
"""


def run(cache, **env):
    proc = python_subprocess(STEP, timeout=300, FLAGOS_CACHE_DIR=str(cache), **env)
    return json.loads(check_ok(proc).strip().splitlines()[-1])


def test_the_next_process_loads_the_shapes_this_one_used(tmp_path):
    tmp_path = tmp_path / "not-yet-created"  # the first process makes the dir
    first = run(tmp_path)
    assert first["loaded"] == 0, first
    stores = list(tmp_path.glob("shapes-*.txt"))
    assert len(stores) == 1 and first["path"] == str(stores[0]), (stores, first)
    lines = stores[0].read_text().splitlines()
    assert lines[0] == "flagos-shapes 2" and len(lines) > 3, lines
    second = run(tmp_path)
    assert second["loaded"] == len(lines) - 1, (second, lines)


def test_a_garbled_store_is_ignored_and_rewritten(tmp_path):
    run(tmp_path)
    store = next(tmp_path.glob("shapes-*.txt"))
    good = store.read_text()
    store.write_text("flagos-shapes 2\ngelu 3 1 2\n")  # a truncated line
    assert run(tmp_path)["loaded"] == 0
    assert store.read_text().splitlines()[0] == "flagos-shapes 2"
    assert len(store.read_text().splitlines()) == len(good.splitlines())


MM = """
import json, torch, flagos_torchfl as ft
ft.initialize("host")
info = json.loads(torch.ops.flagos._shape_store_info())
a, b = torch.randn(16, 3), torch.randn(3, 64)
out = a.to("flagos") @ b.to("flagos")
torch.testing.assert_close(out.cpu(), a @ b)
print(json.dumps(info))
"""


def test_an_edited_entry_fails_its_checksum_and_is_dropped(tmp_path):
    check_ok(python_subprocess(MM, timeout=300, FLAGOS_CACHE_DIR=str(tmp_path)))
    store = next(tmp_path.glob("shapes-*.txt"))
    lines = store.read_text().splitlines()
    (i,) = [k for k, line in enumerate(lines) if line.startswith("mm ")]
    # The stored output size 16 -> 17: trusted, mm answered [17, 64] from
    # memory past its input.
    body, _, digest = lines[i].rpartition(" #")
    fields = body.split()
    fields[fields.index("16", len(fields) - 6)] = "17"
    lines[i] = " ".join(fields) + " #" + digest
    store.write_text("\n".join(lines) + "\n")
    proc = python_subprocess(MM, timeout=300, FLAGOS_CACHE_DIR=str(tmp_path))
    info = json.loads(check_ok(proc).strip().splitlines()[-1])
    assert info["dropped"] == 1 and info["loaded"] == len(lines) - 2, info
    assert "failed its checksum" in proc.stderr, proc.stderr


def test_preload_off_neither_loads_nor_writes(tmp_path):
    off = run(tmp_path, FLAGOS_PRELOAD="off")
    assert off["loaded"] == 0 and not list(tmp_path.glob("shapes-*.txt"))


DEFAULT_DTYPE = """
import json, sys, torch, flagos_torchfl as ft
ft.initialize("host")
torch.set_default_dtype(getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "{dtype}"))
a, b = torch.arange(1, 7).reshape(2, 3), torch.tensor([2, 4, 5])
got, want = torch.div(a.to("flagos"), b.to("flagos")), torch.div(a, b)
torch.set_default_dtype(torch.float32)   # and back, in the same process
got2, want2 = torch.div(a.to("flagos"), b.to("flagos")), torch.div(a, b)
print(json.dumps([str(got.dtype), str(want.dtype), str(got2.dtype), str(want2.dtype)]))
"""


def test_the_default_dtype_is_part_of_a_stored_signature(tmp_path):
    # int / int takes the default dtype: a result stored under float64 must
    # not serve a process (or a later call) running under float32.
    for dtype in ("float64", "float32", "float64"):
        proc = python_subprocess(
            DEFAULT_DTYPE.replace("{dtype}", dtype), timeout=300, FLAGOS_CACHE_DIR=str(tmp_path)
        )
        got, want, got2, want2 = json.loads(check_ok(proc).strip().splitlines()[-1])
        assert (got, got2) == (want, want2) == (f"torch.{dtype}", "torch.float32"), dtype


OTHER = """
import torch, flagos_torchfl as ft
ft.initialize("host")
x = torch.randn(4, 9)
torch.testing.assert_close(torch.tanh(x.to("flagos")).relu().cpu(), torch.tanh(x).relu())
"""


def overloads(store) -> set[str]:
    return {line.split()[0] for line in store.read_text().splitlines()[1:]}


def test_scripts_run_in_turn_keep_each_others_shapes(tmp_path):
    # The last process writes its own signatures first, then the ones it
    # loaded and did not use: the first script's survive the second one.
    run(tmp_path)
    store = next(tmp_path.glob("shapes-*.txt"))
    first = overloads(store)
    assert {"gelu", "_softmax"} <= first, first
    check_ok(python_subprocess(OTHER, timeout=300, FLAGOS_CACHE_DIR=str(tmp_path)))
    both = overloads(store)
    assert first <= both and {"tanh", "relu"} <= both, (first, both)
    lines = store.read_text().splitlines()
    assert lines[1].split()[0] in {"tanh", "relu"}, lines[:3]  # this process's first
    assert len(lines) - 1 == len(set(lines[1:])), "an entry written twice"
    assert run(tmp_path)["loaded"] == len(lines) - 1
