"""Bad input gets CPU's error (type and message) or CPU's values: never a crash.

The rows of docs/reliability.md's bad-input table. Each case runs on CPU and
on flagos from the same inputs; an error must be the same exception type
with CPU's message (device names aside), a result must equal CPU's (NaN
where CPU has NaN). Out-of-range indices also name the index given.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from conftest import BACKEND

NAN, INF = math.nan, math.inf


def _on(device, value):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


CASES = {
    # shape and dtype mismatches
    "add of unbroadcastable shapes": (torch.add, torch.ones(3), torch.ones(4)),
    "mm of mismatched inner sizes": (torch.mm, torch.ones(2, 3), torch.ones(4, 2)),
    "mm of mismatched dtypes": (torch.mm, torch.ones(2, 2), torch.ones(2, 2, dtype=torch.float64)),
    "cat of mismatched ranks": (lambda a, b: torch.cat([a, b]), torch.ones(2, 2), torch.ones(2)),
    "view to a wrong size": (lambda a: a.view(5), torch.ones(2, 3)),
    # out-of-range indices
    "index_select -1": (lambda x, i: x.index_select(0, i), torch.arange(5.0), torch.tensor([-1])),
    "index_select -6": (lambda x, i: x.index_select(0, i), torch.arange(5.0), torch.tensor([-6])),
    "index_select 5": (lambda x, i: x.index_select(0, i), torch.arange(5.0), torch.tensor([0, 5])),
    "gather 3": (lambda x, i: torch.gather(x, 1, i), torch.ones(2, 3), torch.tensor([[0, 3]])),
    "gather -1": (lambda x, i: torch.gather(x, 1, i), torch.ones(2, 3), torch.tensor([[-1, 0]])),
    "embedding 7": (lambda i, w: F.embedding(i, w), torch.tensor([1, 7]), torch.ones(3, 2)),
    "embedding -1": (lambda i, w: F.embedding(i, w), torch.tensor([-1]), torch.ones(3, 2)),
    "nll_loss target 3": (F.nll_loss, torch.randn(2, 3).log_softmax(1), torch.tensor([0, 3])),
    "nll_loss target -2": (F.nll_loss, torch.randn(2, 3).log_softmax(1), torch.tensor([-2, 0])),
    "cross_entropy target 9": (F.cross_entropy, torch.randn(4, 3), torch.tensor([0, 1, 9, 2])),
    "x[5] of 5": (lambda x: x[torch.tensor([5])], torch.arange(5.0)),
    # empty tensors
    "sum of empty": (lambda x: x.sum(), torch.ones(0, 3)),
    "mean of empty": (lambda x: x.mean(1), torch.ones(2, 0)),
    "max of empty": (lambda x: x.max(), torch.ones(0)),
    "amax of empty dim": (lambda x: x.amax(0), torch.ones(0, 3)),
    "softmax of empty": (lambda x: x.softmax(1), torch.ones(0, 4)),
    "mm of empty": (torch.mm, torch.ones(3, 0), torch.ones(0, 2)),
    "cat of empties": (lambda a, b: torch.cat([a, b]), torch.ones(0, 2), torch.ones(0, 2)),
    # NaN and Inf
    "sum with NaN": (lambda x: x.sum(), torch.tensor([1.0, NAN, 2.0])),
    "max with NaN": (lambda x: x.max(), torch.tensor([1.0, NAN, 2.0])),
    "amax/argmax with NaN": (
        lambda x: torch.stack([x.amax(1), x.argmax(1).float()]),
        torch.tensor([[1.0, NAN, 2.0], [3.0, 4.0, 0.0]]),
    ),
    "softmax with Inf": (lambda x: x.softmax(0), torch.tensor([1.0, INF, 2.0])),
    "softmax with -Inf row": (lambda x: x.softmax(1), torch.tensor([[-INF, -INF], [0.0, 1.0]])),
    "log_softmax with NaN": (lambda x: x.log_softmax(0), torch.tensor([1.0, NAN])),
    "log of 0, -1, Inf": (torch.log, torch.tensor([0.0, -1.0, INF, NAN])),
    "mean with Inf and -Inf": (lambda x: x.mean(), torch.tensor([INF, -INF, 1.0])),
    "layer_norm with Inf": (lambda x: F.layer_norm(x, (3,)), torch.tensor([[1.0, INF, 2.0]])),
}


def _outcome(fn, args, device):
    try:
        out = fn(*[_on(device, a) for a in args])
    except Exception as err:  # noqa: BLE001 - the type is the point
        message = str(err).splitlines()[0]
        return type(err), re.sub(r"flagos:0|flagos", "cpu", message)
    return None, out.cpu()


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_gets_cpus_error_or_values(case):
    fn, *args = CASES[case]
    want_type, want = _outcome(fn, args, "cpu")
    got_type, got = _outcome(fn, args, "flagos")
    if want_type is not None:
        assert got_type is want_type, f"CPU raised {want_type.__name__}: {want}; flagos: {got}"
        # CPU's message; flagos may add the offending index after it.
        assert got.startswith(want.rstrip(".")), (got, want)
        return
    assert got_type is None, f"CPU computed {want}; flagos raised {got_type.__name__}: {got}"
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("index_select -6", "-6"),
        ("index_select 5", "5"),
        ("embedding 7", "7"),
        ("gather -1", "-1"),
        ("nll_loss target 3", "3"),
        ("nll_loss target -2", "-2"),
    ],
)
def test_out_of_range_errors_name_the_index_given(case, named):
    fn, *args = CASES[case]
    _, message = _outcome(fn, args, "flagos")
    assert re.search(rf"(index|Target) {re.escape(named)}\b", message), message


def test_a_huge_allocation_is_torch_oom_and_the_device_still_works():
    with pytest.raises(torch.OutOfMemoryError, match="out of memory"):
        torch.empty(1 << 45, device="flagos")
    assert (torch.ones(4, device="flagos") * 2).sum().item() == 8.0


@pytest.mark.skipif(BACKEND != "host", reason="the hint names the host plugin's variable")
@pytest.mark.parametrize(
    "use",
    [
        lambda: torch.empty(1, device="flagos:1"),
        lambda: torch.randn(2).to("flagos:1"),
        lambda: torch.flagos.set_device(1),
        lambda: torch.flagos.memory_allocated(1),
    ],
)
def test_a_device_index_past_the_count_says_how_to_get_more(use):
    count = torch.flagos.device_count()
    if count != 1:
        pytest.skip("one visible device")
    with pytest.raises(RuntimeError, match=r"invalid device index 1 \(1 device visible") as err:
        use()
    assert "FLAGOS_VISIBLE_DEVICES" in str(err.value) and "FLAGOS_HOST_DEVICES" in str(err.value)
