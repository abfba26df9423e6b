"""The caching allocator as torch.flagos reports it: reuse, statistics, cache, OOM."""

from __future__ import annotations

import pytest
import torch
from conftest import check_ok

MiB = 1 << 20


@pytest.fixture(autouse=True)
def quiet_device():
    """Start from an idle device with an empty cache."""
    torch.flagos.synchronize()
    torch.flagos.empty_cache()
    yield
    torch.flagos.synchronize()


@pytest.mark.parametrize("nbytes", [512, 3 * MiB + 17])
def test_freed_block_is_reused(nbytes):
    x = torch.empty(nbytes, dtype=torch.uint8, device="flagos")
    reserved = torch.flagos.memory_reserved()
    mallocs = torch.flagos.memory_stats()["num_device_alloc"]
    del x
    for _ in range(3):
        y = torch.empty(nbytes, dtype=torch.uint8, device="flagos")
        del y
    assert torch.flagos.memory_reserved() == reserved
    assert torch.flagos.memory_stats()["num_device_alloc"] == mallocs


def test_allocated_and_peak_follow_tensors():
    base = torch.flagos.memory_allocated()
    torch.flagos.reset_peak_memory_stats()
    assert torch.flagos.max_memory_allocated() == base
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="flagos")
    y = torch.empty(2 * MiB, dtype=torch.uint8, device="flagos")
    assert torch.flagos.memory_allocated() >= base + 6 * MiB
    del x
    after_free = torch.flagos.memory_allocated()
    assert base + 2 * MiB <= after_free < base + 6 * MiB
    assert torch.flagos.max_memory_allocated() >= base + 6 * MiB
    assert torch.flagos.max_memory_reserved() >= torch.flagos.memory_reserved()
    torch.flagos.reset_peak_memory_stats()
    assert torch.flagos.max_memory_allocated() == after_free
    del y
    assert torch.flagos.memory_allocated() == base


def test_counters_and_their_reset():
    torch.flagos.reset_accumulated_memory_stats()
    stats = torch.flagos.memory_stats()
    assert stats["allocation.all.allocated"] == 0 and stats["allocation.all.freed"] == 0
    for _ in range(3):
        del_me = torch.empty(1000, device="flagos")
        del del_me
    stats = torch.flagos.memory_stats()
    assert stats["allocation.all.allocated"] == 3 and stats["allocation.all.freed"] == 3


def test_empty_cache_returns_cached_blocks():
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="flagos")
    del x
    cached = torch.flagos.memory_reserved()
    assert cached >= 8 * MiB  # freed but kept for reuse
    free_before, total = torch.flagos.mem_get_info()
    torch.flagos.empty_cache()
    assert torch.flagos.memory_reserved() <= cached - 8 * MiB
    free_after, _ = torch.flagos.mem_get_info()
    assert free_after >= free_before + 8 * MiB
    assert free_after <= total == torch.flagos.get_device_properties().total_memory


def test_memory_summary_is_readable():
    x = torch.empty(MiB, dtype=torch.uint8, device="flagos")
    summary = torch.flagos.memory_summary()
    for words in ("flagos:0", "allocated", "reserved", "MiB", "free of"):
        assert words in summary
    del x


def test_torch_accelerator_sees_the_same_numbers():
    x = torch.empty(MiB, dtype=torch.uint8, device="flagos")
    assert torch.accelerator.memory_allocated(0) == torch.flagos.memory_allocated(0)
    assert torch.accelerator.memory_reserved(0) == torch.flagos.memory_reserved(0)
    del x


def test_out_of_memory_is_torch_oom_and_recoverable(run_python):
    out = check_ok(
        run_python(
            """
            import torch, flagos_torchfl as ft
            ft.initialize("host")
            MiB = 1 << 20
            try:
                torch.empty(128 * MiB, dtype=torch.uint8, device="flagos")
                print("no error")
            except torch.OutOfMemoryError as err:
                print("oom:", "out of memory" in str(err))
            print("ooms:", torch.flagos.memory_stats()["num_ooms"])
            # Recovery: the device still works, and a cached block is given back
            # (cache flush + retry) when a new size would not fit beside it.
            x = torch.ones(40 * MiB, dtype=torch.uint8, device="flagos")
            del x
            y = torch.full((48 * MiB,), 3, dtype=torch.uint8, device="flagos")
            print("recovered:", int(y.sum().item()) == 3 * 48 * MiB)
            """,
            FLAGOS_HOST_MEMORY_LIMIT="64M",
        )
    )
    assert out.split() == "oom: True ooms: 1 recovered: True".split()
