"""`ops`, `coverage`, `bench` and op_stats() agree on every operator's tier.

One "model" runs the first two float32 samples of every OpInfo of the
catalog sweep (test_opinfo_catalog.py), forward and backward. On it:

- coverage(verify=True) compares the tier `ops` predicts for each overload
  (its support list, Note [Predicted tier] in tools/ops.py) with the tiers
  op_stats() counted in the same device run;
- bench's per-operator table reads op_stats() the same way
  (coverage.observed_tier) and must give the same tier as coverage.

A prediction may still be beaten at run time by a kernel that declines one
call (a stride it does not take); those are listed in KNOWN_REFUSALS with
the reason, and a test fails when one stops happening, so the list stays
true. Run on host by the main suite and on opencl by scripts/test.sh.
"""

from __future__ import annotations

import pytest
import torch
from test_opinfo_catalog import OPINFOS, OVERLOADS, opinfo_id
from torch.utils._pytree import tree_flatten, tree_map

pytestmark = pytest.mark.skipif(not OVERLOADS, reason="the core was built without the catalog")

SAMPLES_PER_OPINFO = 2

# (backend, overload) -> why the tier it ran differs from the prediction.
# (Empty since the catalog's samples stopped reaching the generated serial
# scatter with a stride-0 `self`, which it still declines: see git log.)
KNOWN_REFUSALS: dict[tuple[str, str], str] = {}


def _floats(out) -> list[torch.Tensor]:
    return [
        t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]


def _loss(out):
    parts = [t.sum() for t in _floats(out)]
    return sum(parts[1:], parts[0]) if parts else None


def _call(op, sample, device):
    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.detach().to(device).requires_grad_(t.requires_grad)

    inp, args, kwargs = tree_map(move, (sample.input, sample.args, sample.kwargs))
    if "device" in kwargs:  # a factory (eye, linspace): made on the device asked for
        kwargs = {**kwargs, "device": device}
    return op.op(inp, *args, **kwargs)


def _runnable_samples():
    """(opinfo id, op, sample) that run forward and backward on the device."""
    chosen = []
    for op in OPINFOS:
        try:
            samples = list(
                op.sample_inputs("cpu", torch.float32, requires_grad=op.supports_autograd)
            )
        except Exception:  # noqa: BLE001 - an OpInfo that cannot make samples here
            continue
        for sample in samples[:SAMPLES_PER_OPINFO]:
            if float(sample.kwargs.get("dropout_p", 0) or 0) > 0:
                continue  # draws from the RNG: not the same call twice
            try:
                loss = _loss(_call(op, sample, "flagos"))
                if loss is not None and loss.device.type != "flagos":
                    continue  # a factory on the default device: nothing of it runs on flagos
                if loss is not None and loss.requires_grad:
                    loss.backward()
            except Exception:  # noqa: BLE001 - test_opinfo_catalog judges the samples
                continue
            chosen.append((opinfo_id(op), op, sample))
    return chosen


class CatalogProbe(torch.nn.Module):
    """Every chosen sample as one forward pass; the loss is the sum of their sums."""

    def __init__(self, samples):
        super().__init__()
        self.samples = samples

    def forward(self, anchor):
        losses = [_loss(_call(op, s, anchor.device)) for _, op, s in self.samples]
        return torch.stack([loss for loss in losses if loss is not None]).sum()


@pytest.fixture(scope="module")
def reports():
    import flagos_torchfl as ft
    from flagos_torchfl.tools import _model, bench, coverage

    ft.initialize()
    samples = _runnable_samples()
    case = _model.ModelCase("catalog", CatalogProbe(samples), (torch.zeros(1),), lambda out: out)
    cov = coverage.coverage(case, verify=True)
    ben = bench.bench(case, steps=1, warmup=0, train=True)
    return {"backend": cov["backends"][0], "coverage": cov, "bench": ben, "samples": samples}


def test_the_probe_reaches_most_of_the_catalog(reports):
    reached = {r["op"] for r in reports["coverage"]["ops"]} & set(OVERLOADS)
    # About 200 of the catalog's overloads (the rest are dtype/out variants
    # and ops OpInfo has no sample for): far below means the probe broke.
    assert len(reports["samples"]) > 300, len(reports["samples"])
    assert len(reached) > 150, sorted(reached)
    assert reports["coverage"]["verify"]["compared"] > 200


def test_predicted_tiers_match_what_ran(reports):
    backend = reports["backend"]
    wrong = [
        m
        for m in reports["coverage"]["verify"]["mismatches"]
        if (backend, m["op"]) not in KNOWN_REFUSALS
    ]
    assert not wrong, "\n".join(
        f"{m['op']}: predicted {m['predicted']}, ran {m['ran']}" for m in wrong
    )


def test_known_refusals_still_happen(reports):
    backend = reports["backend"]
    ran = {r["op"] for r in reports["coverage"]["ops"]}
    mismatched = {m["op"] for m in reports["coverage"]["verify"]["mismatches"]}
    stale = [
        op for (b, op) in KNOWN_REFUSALS if b == backend and op in ran and op not in mismatched
    ]
    assert not stale, f"no longer refused, remove from KNOWN_REFUSALS: {stale}"


def test_bench_reads_op_stats_as_coverage_does(reports):
    backend = reports["backend"]
    cov = {r["op"]: r["tiers"][backend] for r in reports["coverage"]["ops"]}
    rows = reports["bench"]["ops"]
    assert len(rows) > 150
    differ = [
        f"{r['op']}: bench {r['tier']}, coverage {cov[r['op']]}"
        for r in rows
        if r["op"] in cov and r["tier"] != cov[r["op"]]
    ]
    assert not differ, "\n".join(differ)


def test_support_list_is_the_prediction(reports):
    """coverage's predicted tier for a catalog overload is the one `ops` lists."""
    from flagos_torchfl.tools import ops

    listed = ops.support_list()["overloads"]
    rows = [r for r in reports["coverage"]["ops"] if r["op"] in listed]
    assert rows
    differ = [r["op"] for r in rows if r["predicted"] != listed[r["op"]]]
    assert not differ, differ
