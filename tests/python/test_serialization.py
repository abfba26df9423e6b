"""torch.save / torch.load of flagos tensors and modules."""

from __future__ import annotations

import io

import pytest
import torch


def save(obj) -> io.BytesIO:
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


def sample(device: str = "cpu") -> dict:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 5, generator=g).to(device)
    return {
        "dense": base,
        "view": base.t()[1:4],  # shares storage with "dense"
        "ints": torch.arange(10, dtype=torch.int64).to(device),
        "half": base.to(torch.float16),
        "scalar": torch.tensor(2.5).to(device),
    }


@pytest.mark.parametrize("map_location", [None, "flagos", "flagos:0", torch.device("flagos", 0)])
def test_flagos_tensors_round_trip_on_flagos(map_location):
    cpu = sample()
    loaded = torch.load(save(sample("flagos")), map_location=map_location)
    for key, value in cpu.items():
        assert loaded[key].device == torch.device("flagos", 0), key
        assert torch.equal(loaded[key].cpu(), value), key


def test_flagos_tensors_load_on_cpu():
    cpu = sample()
    loaded = torch.load(save(sample("flagos")), map_location="cpu")
    for key, value in cpu.items():
        assert loaded[key].device.type == "cpu" and torch.equal(loaded[key], value), key


def test_cpu_checkpoint_loads_onto_flagos():
    cpu = sample()
    loaded = torch.load(save(cpu), map_location="flagos")
    for key, value in cpu.items():
        assert loaded[key].is_flagos and torch.equal(loaded[key].cpu(), value), key


def test_views_keep_sharing_storage_after_load():
    loaded = torch.load(save(sample("flagos")))
    loaded["dense"].zero_()
    assert loaded["view"].abs().sum().item() == 0


def test_module_state_dict_round_trip():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8)).to("flagos")
    model(torch.randn(16, 4, device="flagos"))  # update the BN running stats
    state = torch.load(save(model.state_dict()), map_location="flagos")
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8)).to("flagos")
    fresh.load_state_dict(state)
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values(), strict=True):
        assert b.is_flagos and torch.equal(a.cpu(), b.cpu()), name
