"""OpInfo sweep of the operator catalog: every catalog operator, run on the
flagos device and on the CPU, sample by sample, compared with assert_close.

Which OpInfos belong to the catalog: those whose ATen name is an operator of
ops/catalog.yaml, plus the composite OpInfos in CATALOG_VIA (softmax,
linear, conv2d, cross_entropy, ... reach catalog ops through their
decompositions). Each test records, per OpInfo: passed / failed samples,
the reason when skipped, and the tiers the catalog overloads ran on
(op_stats). With FLAGOS_OPINFO_REPORT=<path> the records are written as
JSON at the end; codegen/gen_operator_support.py turns them into
docs/operator-support.md:

    FLAGOS_OPINFO_REPORT=build/opinfo.json pytest tests/python/test_opinfo_catalog.py
    python3 codegen/gen_operator_support.py --report build/opinfo.json

Skipped as a whole when the core was built without the catalog
(-DFLAGOS_ENABLE_CATALOG=OFF).
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from conftest import CORE_ERROR
from torch.utils._pytree import tree_flatten, tree_map


def catalog_overloads() -> dict[str, str]:
    """ATen overload ("aten::add.Tensor") -> semantic ID, from the core; {} without the catalog."""
    if CORE_ERROR is not None:
        return {}
    try:
        rows = torch.ops.flagos._catalog_overloads()
    except (AttributeError, RuntimeError):
        return {}
    return dict(row.split("=", 1) for row in rows)


OVERLOADS = catalog_overloads()
pytestmark = pytest.mark.skipif(
    not OVERLOADS,
    reason=CORE_ERROR
    or "the core was built without the operator catalog (rebuild with -DFLAGOS_ENABLE_CATALOG=ON)",
)
PACKETS = {name.split("::")[1].split(".")[0] for name in OVERLOADS}

# OpInfos whose own ATen op is CompositeImplicit (or named differently) but
# which reach catalog ops.
CATALOG_VIA = {
    "softmax",
    "log_softmax",
    "nn.functional.softmin",
    "matmul",
    "nn.functional.linear",
    "nn.functional.bilinear",
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.conv3d",
    "nn.functional.conv_transpose1d",
    "nn.functional.conv_transpose2d",
    "nn.functional.cross_entropy",
    "nn.functional.nll_loss",
    "nn.functional.layer_norm",
    "nn.functional.batch_norm",
    "nn.functional.group_norm",
    "nn.functional.embedding",
    "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d",
    "nn.functional.adaptive_max_pool2d",
    "nn.functional.mse_loss",
    "nn.functional.relu6",
    "nn.functional.smooth_l1_loss",
    "nn.functional.huber_loss",
    "nn.functional.binary_cross_entropy",
    "nn.functional.interpolate",
    "nn.functional.pad",
    "nn.functional.max_unpool1d",
    "nn.functional.max_unpool2d",
    "nn.functional.max_unpool3d",
    "nn.functional.upsample_nearest",
    "nn.functional.normalize",
    "nn.functional.logsigmoid",
    "nn.functional.softsign",
    "nn.functional.tanhshrink",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.glu",
    "nn.functional.prelu",
    "cross",
    "square",
    "rsub",
    "max.reduction_with_dim",
    "max.reduction_no_dim",
    "min.reduction_with_dim",
    "min.reduction_no_dim",
    "var",
    "std",
    "logsumexp",
    "linalg.vector_norm",
    "einsum",
    "inner",
    "outer",
    "addr",
    "tensordot",
    "masked_fill",
    "clamp_min",
    "clamp_max",
    "true_divide",
    "mvlgamma",
    "special.entr",
    "xlogy",
    "lerp",
    "cumsum",
    "cummax",
    "cummin",
    "logcumsumexp",
    "unique",
    "argwhere",
    "topk",
    "sort",
    "index_select",
    "gather",
    "scatter",
    "scatter_add",
    "index_add",
    "cat",
    "stack",
    "flip",
    "roll",
    "repeat",
    "tril",
    "triu",
    "where",
    "addcmul",
    "addcdiv",
    "dot",
    "mv",
    "addmv",
    "addbmm",
    "baddbmm",
    "bmm",
    "mm",
    "addmm",
}
# Random OpInfos: their samples are not comparable across devices.
RANDOM = ("dropout", "bernoulli", "normal", "rand", "uniform", "multinomial", "rrelu")
DTYPE = torch.float32
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def selected_opinfos():
    from torch.testing._internal.common_methods_invocations import op_db

    chosen = []
    for op in op_db:
        if any(r in op.name for r in RANDOM):
            continue
        base = op.name.removeprefix("nn.functional.")
        aten = (op.aten_name or "").split(".")[0]
        if op.name in CATALOG_VIA or base in PACKETS or aten in PACKETS:
            if DTYPE in op.supported_dtypes("cpu"):
                chosen.append(op)
    return chosen


OPINFOS = selected_opinfos() if OVERLOADS else []
RECORDS: dict[str, dict] = {}


def opinfo_id(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def to_device(x):
    return x.to("flagos") if isinstance(x, torch.Tensor) else x


def to_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def run(fn, sample):
    return fn(sample.input, *sample.args, **sample.kwargs)


def catalog_tiers() -> dict[str, dict[str, int]]:
    import flagos_torchfl as ft

    return {op: tiers for op, tiers in ft.op_stats().items() if op in OVERLOADS}


@pytest.fixture(scope="module", autouse=True)
def write_report():
    yield
    path = os.environ.get("FLAGOS_OPINFO_REPORT")
    if path and RECORDS:
        existing = {}
        if os.path.exists(path):
            with open(path) as f:
                existing = json.load(f)
        existing.update(RECORDS)
        import flagos_torchfl as ft

        existing["_meta"] = {
            "backend": ft._core.C()._backend_info().get("name", "?"),
            "torch": torch.__version__,
            "native_ids": sorted(torch.ops.flagos._catalog_native_ids()),
        }
        with open(path, "w") as f:
            json.dump(existing, f, indent=1, sort_keys=True)


@pytest.mark.parametrize("op", OPINFOS, ids=opinfo_id)
def test_opinfo(op):
    import flagos_torchfl as ft

    record = {"passed": 0, "failed": 0, "errors": [], "tiers": {}, "skip": None}
    RECORDS[opinfo_id(op)] = record
    samples = list(op.sample_inputs("cpu", DTYPE, requires_grad=False))
    if not samples:
        record["skip"] = "no float32 samples"
        pytest.skip(record["skip"])
    variants = [("", op.op)]
    if op.inplace_variant is not None:
        variants.append(("_", op.inplace_variant))
    ft.reset_op_stats()
    for i, sample in enumerate(samples):
        # Attention with dropout draws from the device RNG, whose numbers
        # differ from CPU's for one seed (as CUDA's do): not comparable.
        if float(sample.kwargs.get("dropout_p", 0) or 0) > 0:
            continue
        for suffix, fn in variants:
            cpu_sample = sample.transform(lambda t: t.clone() if isinstance(t, torch.Tensor) else t)
            dev_sample = sample.transform(
                lambda t: to_device(t) if isinstance(t, torch.Tensor) else t
            )
            if "device" in dev_sample.kwargs:  # factories (eye, linspace): made on flagos
                dev_sample.kwargs = {**dev_sample.kwargs, "device": "flagos"}
            elif not any(
                isinstance(t, torch.Tensor)
                for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
            ):
                continue  # a factory on the default device: nothing runs on flagos
            try:
                expected = run(fn, cpu_sample)
            except Exception:  # the CPU rejects it (e.g. in-place dtype): not a test
                continue
            try:
                actual = run(fn, dev_sample)
                actual_cpu = tree_map(to_cpu, actual)
                leaves, _ = tree_flatten(actual)
                for t in leaves:
                    if isinstance(t, torch.Tensor):
                        assert t.device.type == "flagos", f"result on {t.device}"
                torch.testing.assert_close(actual_cpu, expected, equal_nan=True, **TOLERANCE)
                if suffix:  # in-place: the input itself was updated
                    torch.testing.assert_close(
                        dev_sample.input.cpu(), cpu_sample.input, equal_nan=True, **TOLERANCE
                    )
                record["passed"] += 1
            except Exception as err:  # noqa: BLE001 - recorded, then reported
                record["failed"] += 1
                message = f"sample {i}{suffix} ({sample.summary() if hasattr(sample, 'summary') else ''}): "
                record["errors"].append((message + str(err).splitlines()[0])[:300])
    record["tiers"] = catalog_tiers()
    if record["passed"] + record["failed"] == 0:
        record["skip"] = "the CPU rejects every sample"
        pytest.skip(record["skip"])
    assert record["failed"] == 0, "\n".join(record["errors"][:5])
