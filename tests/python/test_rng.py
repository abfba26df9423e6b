"""RNG on the flagos device: seeding, state round trips, one generator per device."""

from __future__ import annotations

import pytest
import torch
from conftest import check_ok

SAMPLERS = {
    "randn": lambda: torch.randn(1000, device="flagos"),
    "rand": lambda: torch.rand(1000, device="flagos"),
    "randint": lambda: torch.randint(0, 1000, (1000,), device="flagos"),
    "normal_": lambda: torch.empty(1000, device="flagos").normal_(2.0, 3.0),
    "dropout": lambda: torch.nn.functional.dropout(torch.ones(1000, device="flagos"), 0.5),
    "randperm": lambda: torch.randperm(100, device="flagos"),
}


@pytest.mark.parametrize("sample", SAMPLERS.values(), ids=SAMPLERS.keys())
def test_manual_seed_reproduces(sample):
    torch.flagos.manual_seed(1234)
    first = sample()
    assert first.device.type == "flagos"
    torch.flagos.manual_seed(1234)
    again = sample()
    torch.flagos.manual_seed(4321)
    other = sample()
    assert torch.equal(first.cpu(), again.cpu())
    assert not torch.equal(first.cpu(), other.cpu())


def test_torch_manual_seed_seeds_flagos():
    torch.manual_seed(7)
    first = torch.randn(100, device="flagos")
    torch.manual_seed(7)
    assert torch.equal(first.cpu(), torch.randn(100, device="flagos").cpu())
    assert torch.flagos.initial_seed() == 7


def test_samples_have_the_right_distribution():
    torch.flagos.manual_seed(0)
    x = torch.randn(200_000, device="flagos").cpu()
    assert abs(x.mean().item()) < 0.02 and abs(x.std().item() - 1) < 0.02
    u = torch.rand(200_000, device="flagos").cpu()
    assert 0 <= u.min().item() and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01


def test_rng_state_round_trip():
    torch.flagos.manual_seed(99)
    torch.randn(10, device="flagos")  # move away from the seed's start
    state = torch.flagos.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    first = torch.randn(100, device="flagos").cpu()
    torch.flagos.set_rng_state(state)
    assert torch.equal(torch.randn(100, device="flagos").cpu(), first)
    states = torch.flagos.get_rng_state_all()
    assert len(states) == torch.flagos.device_count()
    torch.flagos.set_rng_state_all(states)


def test_seed_gives_fresh_streams():
    torch.flagos.seed()
    a = torch.flagos.initial_seed()
    torch.flagos.seed()
    assert torch.flagos.initial_seed() != a


def test_each_device_has_its_own_generator(run_python):
    out = check_ok(
        run_python(
            """
            import torch, flagos_torchfl as ft
            ft.initialize("host")
            def draw(i):
                return torch.randn(50, device=f"flagos:{i}").cpu()
            torch.flagos.manual_seed_all(5)
            a0, a1 = draw(0), draw(1)
            torch.flagos.manual_seed_all(5)
            b0, b1 = draw(0), draw(1)
            print("seed_all reproduces:", torch.equal(a0, b0) and torch.equal(a1, b1))
            # Re-seeding device 1 alone leaves device 0's sequence where it was.
            torch.flagos.manual_seed_all(5)
            draw(0)
            with torch.flagos.device(1):
                torch.flagos.manual_seed(11)
            c0 = draw(0)
            torch.flagos.manual_seed_all(5)
            draw(0)
            print("independent:", torch.equal(draw(0), c0))
            states = torch.flagos.get_rng_state_all()
            print("states:", len(states))
            """,
            FLAGOS_HOST_DEVICES="2",
        )
    )
    assert out.split() == "seed_all reproduces: True independent: True states: 2".split()


def test_seeding_before_first_use_waits_for_the_device_as_on_cuda(run_python):
    # torch.cuda's manual_seed* queue until CUDA initializes; DeviceMesh (and
    # so FSDP2) picks the device from LOCAL_RANK only while it has not.
    out = check_ok(
        run_python(
            """
            import torch, flagos_torchfl as ft
            ft.initialize("host")
            torch.manual_seed(7)
            print(torch.flagos.is_initialized())
            a = torch.randn(5, device="flagos").cpu()      # first use: the seed applies
            torch.flagos.manual_seed_all(7)
            b = torch.randn(5, device="flagos").cpu()
            print(torch.flagos.is_initialized(), torch.equal(a, b))
            """
        )
    )
    assert out.split() == ["False", "True", "True"], out
