"""The operator catalog: code generation (no core needed), routing overrides,
execution tiers and autograd through catalog ops.

The OpInfo sweep over every catalog operator is test_opinfo_catalog.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from conftest import CORE_ERROR, REPO, assert_close_to_cpu, check_ok

GEN = REPO / "codegen" / "gen_catalog.py"
CATALOG = REPO / "ops" / "catalog.yaml"


def catalog_built() -> bool:
    if CORE_ERROR is not None:
        return False
    try:
        torch.ops.flagos._catalog_overloads()
        return True
    except (AttributeError, RuntimeError):
        return False


needs_catalog = pytest.mark.skipif(
    not catalog_built(),
    reason=CORE_ERROR
    or "the core was built without the operator catalog (rebuild with -DFLAGOS_ENABLE_CATALOG=ON)",
)


# ------------------------------------------------------------ code generation


def generate(tmp_path: Path, catalog: dict | None = None) -> subprocess.CompletedProcess:
    path = CATALOG
    if catalog is not None:
        path = tmp_path / "catalog.yaml"
        path.write_text(yaml.safe_dump(catalog))
    return subprocess.run(
        [sys.executable, str(GEN), "--catalog", str(path), "--out-dir", str(tmp_path / "gen")],
        capture_output=True,
        text=True,
        timeout=300,
    )


def one_op(**fields) -> dict:
    op = {
        "id": "relu",
        "family": "pointwise",
        "aten": ["relu", "relu_"],
        "outputs": ["out"],
        "inputs": ["self"],
        "dtypes": ["float32"],
        "expr": "max(self, 0)",
    }
    op.update(fields)
    return {"version": 1, "ops": [op]}


@pytest.mark.no_core
def test_generator_writes_table_and_header(tmp_path):
    proc = generate(tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "gen" / "catalog_table.cpp").read_text()
    header = (tmp_path / "gen" / "include" / "flagos" / "ops.h").read_text()
    assert "TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)" in table
    assert '{"add.Tensor", ' in table and '{"add_.Tensor", ' in table and '{"add.out", ' in table
    assert '#define FLAGOS_OP_ADD "add"' in header
    assert "scalar:  alpha" in header
    n_overloads = sum(len(op["aten"]) for op in yaml.safe_load(CATALOG.read_text())["ops"])
    assert n_overloads >= 250


@pytest.mark.no_core
def test_generated_header_is_valid_c(tmp_path):
    proc = generate(tmp_path)
    assert proc.returncode == 0, proc.stderr
    src = tmp_path / "use.c"
    src.write_text('#include "flagos/ops.h"\nconst char* id = FLAGOS_OP_RELU;\n')
    cc = subprocess.run(
        [
            "cc",
            "-std=c99",
            "-Wall",
            "-Werror",
            "-c",
            str(src),
            "-o",
            str(tmp_path / "use.o"),
            f"-I{tmp_path / 'gen' / 'include'}",
            f"-I{REPO / 'include'}",
        ],
        capture_output=True,
        text=True,
    )
    assert cc.returncode == 0, cc.stderr


@pytest.mark.no_core
@pytest.mark.parametrize(
    "fields, message",
    [
        ({"family": "elementwise"}, "unknown family 'elementwise'"),
        ({"colour": "red"}, "unknown field(s) ['colour']"),
        ({"aten": ["relu", "no_such_op"]}, "aten::no_such_op does not exist"),
        ({"aten": ["relu6"]}, "CompositeImplicitAutograd"),
        ({"inputs": ["x"]}, "input 'x' is not an argument of aten::relu"),
        ({"outputs": ["a", "b"]}, "has 1 output(s), the entry names 2"),
        ({"dtypes": ["float33"]}, "unknown dtype or group 'float33'"),
        ({"id": "Relu"}, "id must match"),
    ],
)
def test_generator_rejects_bad_entries(tmp_path, fields, message):
    proc = generate(tmp_path, one_op(**fields))
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


@pytest.mark.no_core
def test_generator_skips_optional_overloads_missing_in_this_torch(tmp_path):
    proc = generate(
        tmp_path,
        one_op(aten=["relu", "relu.some_future_overload"], optional=["relu.some_future_overload"]),
    )
    assert proc.returncode == 0, proc.stderr
    report = (tmp_path / "gen" / "catalog_report.txt").read_text()
    assert "skipped aten::relu.some_future_overload" in report


# ----------------------------------------------------------------- at run time


def tiers(op_name: str) -> dict[str, int]:
    import flagos_torchfl as ft

    return ft.op_stats().get(op_name, {})


@needs_catalog
def matrix_pythons() -> list[Path]:
    """The torch-matrix virtualenvs scripts/torch_env.sh cached on this machine."""
    root = Path(os.environ.get("FLAGOS_ENV_CACHE", "/var/cache/flagos-torchfl"))
    return sorted(root.glob("venv-torch-*/bin/python"))


@pytest.mark.no_core
@pytest.mark.parametrize("python", matrix_pythons() or [None], ids=lambda p: p and p.parts[-3])
def test_the_catalog_validates_against_every_cached_torch(python, tmp_path):
    """The catalog is checked against each torch of the matrix it is cached
    for, in seconds: a CI run once failed two releases' builds on an overload
    those releases removed (aten::cholesky), after the main suite had passed
    on this machine's torch."""
    if python is None:
        pytest.skip("no torch-matrix virtualenv cached here (scripts/torch_env.sh makes them)")
    proc = subprocess.run(
        [str(python), str(GEN), "--catalog", str(CATALOG), "--out-dir", str(tmp_path / "gen")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_catalog_overloads_are_routed():
    rows = dict(r.split("=", 1) for r in torch.ops.flagos._catalog_overloads())
    assert rows["aten::add.Tensor"] == "add"
    assert rows["aten::mm"] == "mm"
    assert len(rows) >= 250


@needs_catalog
@pytest.mark.parametrize(
    "name, fn",
    [
        ("aten::add.Tensor", lambda x, y: x + y),
        ("aten::mul.Tensor", lambda x, y: x * 2.5),
        ("aten::relu", lambda x, y: torch.relu(x)),
        ("aten::mm", lambda x, y: x @ y.t()),
        ("aten::sum.dim_IntList", lambda x, y: x.sum(dim=1)),
        ("aten::_softmax", lambda x, y: torch.softmax(x, dim=-1)),
        ("aten::where.self", lambda x, y: torch.where(x > 0, x, y)),
    ],
)
def test_catalog_ops_match_cpu_and_are_counted(name, fn):
    import flagos_torchfl as ft

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(7, 5, generator=g), torch.randn(7, 5, generator=g)
    ft.reset_op_stats()
    assert_close_to_cpu(fn(x.to("flagos"), y.to("flagos")), fn(x, y))
    counted = tiers(name)
    assert sum(counted.values()) >= 1, ft.op_stats()
    native = set(torch.ops.flagos._catalog_native_ids())
    op_id = dict(r.split("=", 1) for r in torch.ops.flagos._catalog_overloads())[name]
    if op_id in native:
        assert counted.get("native", 0) >= 1, counted


@needs_catalog
def test_autograd_through_catalog_ops():
    g = torch.Generator().manual_seed(0)
    w_cpu = torch.randn(6, 4, generator=g, requires_grad=True)
    x_cpu = torch.randn(8, 6, generator=g)
    w_dev = w_cpu.detach().to("flagos").requires_grad_()
    x_dev = x_cpu.to("flagos")

    def loss(x, w):
        h = torch.nn.functional.gelu(x @ w, approximate="tanh")
        return torch.nn.functional.log_softmax(h, dim=-1).sum() + torch.sigmoid(h).mean()

    loss(x_cpu, w_cpu).backward()
    out = loss(x_dev, w_dev)
    assert out.grad_fn is not None
    out.backward()
    assert_close_to_cpu(w_dev.grad, w_cpu.grad, rtol=1e-4, atol=1e-5)


@needs_catalog
def test_in_place_and_out_variants():
    x = torch.randn(4, 3)
    d = x.to("flagos")
    d.add_(1.5)
    torch.testing.assert_close(d.cpu(), x + 1.5)
    out = torch.empty(0, device="flagos")
    torch.mul(d, d, out=out)
    assert out.shape == (4, 3)
    torch.testing.assert_close(out.cpu(), (x + 1.5) * (x + 1.5))


def run_routing(run_python, env: dict[str, str], code: str = "") -> subprocess.CompletedProcess:
    return run_python(
        textwrap.dedent("""
            import json, torch, flagos_torchfl as ft
            ft.initialize(backend="host")
            x = torch.randn(3, 4, device="flagos")
            torch.relu(x); x + x; x * x
            print(json.dumps(ft.op_stats()))
        """)
        + code,
        **env,
    )


@needs_catalog
def test_force_fallback_list(run_python):
    import json

    stats = json.loads(
        check_ok(run_routing(run_python, {"FLAGOS_FORCE_FALLBACK": "relu, aten::add.Tensor"}))
    )
    assert stats["aten::relu"] == {"fallback": 1}
    assert stats["aten::add.Tensor"] == {"fallback": 1}


@needs_catalog
def test_force_fallback_regex_and_per_op_override(run_python):
    import json

    stats = json.loads(
        check_ok(
            run_routing(
                run_python,
                {"FLAGOS_FORCE_FALLBACK": "^(add|mul)\\..*", "FLAGOS_OP_RELU": "fallback"},
            )
        )
    )
    assert stats["aten::relu"] == {"fallback": 1}
    assert stats["aten::add.Tensor"] == {"fallback": 1}
    assert stats["aten::mul.Tensor"] == {"fallback": 1}


@needs_catalog
@pytest.mark.parametrize(
    "env, message",
    [
        (
            {"FLAGOS_FORCE_FALLBACK": "relu,no_such_op"},
            "'no_such_op' is neither a semantic operator ID",
        ),
        (
            {"FLAGOS_OP_NO_SUCH_OP": "native"},
            "FLAGOS_OP_NO_SUCH_OP: 'no_such_op' is not a semantic operator ID",
        ),
        ({"FLAGOS_OP_RELU": "sometimes"}, "expected native, generated or fallback"),
        ({"FLAGOS_FORCE_FALLBACK": "(relu"}, "FLAGOS_FORCE_FALLBACK: bad regex"),
    ],
)
def test_bad_routing_is_rejected(run_python, env, message):
    proc = run_routing(run_python, env)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
