"""Streams and events: ordering between streams, queries, timing, current stream."""

from __future__ import annotations

import torch
from conftest import assert_close_to_cpu


def work(x: torch.Tensor, rounds: int = 8) -> torch.Tensor:
    """Enough queued device work to take measurable time."""
    for _ in range(rounds):
        x = torch.tanh(x @ x) * 0.5
    return x


def test_stream_and_event_are_torch_types_on_flagos():
    s = torch.flagos.Stream()
    e = torch.flagos.Event()
    assert isinstance(s, torch.Stream) and isinstance(s, torch.flagos.Stream)
    assert type(e) is torch.Event and isinstance(e, torch.flagos.Event)
    assert not isinstance(torch.Event(device="cpu"), torch.flagos.Event)
    assert s.device == torch.device("flagos", 0)
    assert s != torch.flagos.default_stream()


def test_side_stream_work_ordered_by_wait_stream():
    a_cpu = torch.randn(256, 256) / 16
    a = a_cpu.to("flagos")
    main = torch.flagos.current_stream()
    side = torch.flagos.Stream()
    side.wait_stream(main)  # a is ready before side reads it
    with torch.flagos.stream(side):
        assert torch.flagos.current_stream() == side
        b = work(a)
        c = b + 1
    assert torch.flagos.current_stream() == main
    main.wait_stream(side)
    d = c * 2  # on the main stream, after the side stream's work
    assert_close_to_cpu(d, (work(a_cpu) + 1) * 2, rtol=1e-4, atol=1e-5)


def test_event_orders_streams():
    x_cpu = torch.randn(256, 256) / 16
    x = x_cpu.to("flagos")
    side = torch.flagos.Stream()
    done = torch.flagos.Event()
    with torch.flagos.stream(side):
        y = work(x)
        done.record()
    torch.flagos.current_stream().wait_event(done)
    assert_close_to_cpu(y.sum(dim=0), work(x_cpu).sum(dim=0), rtol=1e-4, atol=1e-4)


def test_query_and_synchronize():
    s = torch.flagos.Stream()
    x = torch.randn(256, 256, device="flagos") / 16
    s.wait_stream(torch.flagos.current_stream())
    with torch.flagos.stream(s):
        work(x, rounds=20)
        e = s.record_event()
    s.synchronize()
    assert s.query() and e.query()
    torch.flagos.synchronize()
    assert torch.flagos.current_stream().query()


def test_elapsed_time_between_timing_events():
    x = torch.randn(256, 256, device="flagos") / 16
    start = torch.flagos.Event(enable_timing=True)
    end = torch.flagos.Event(enable_timing=True)
    start.record()
    work(x, rounds=20)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0
    side = torch.flagos.Stream()
    side.wait_stream(torch.flagos.current_stream())
    first = side.record_event(torch.flagos.Event(enable_timing=True))
    with torch.flagos.stream(side):
        work(x, rounds=5)
    last = side.record_event(torch.flagos.Event(enable_timing=True))
    last.synchronize()
    assert first.elapsed_time(last) > 0


def test_set_stream_and_default_stream():
    default = torch.flagos.default_stream()
    assert torch.flagos.current_stream() == default
    s = torch.flagos.Stream(priority=-1)
    torch.flagos.set_stream(s)
    try:
        assert torch.flagos.current_stream() == s
        assert torch.accelerator.current_stream() == s
    finally:
        torch.flagos.set_stream(default)
    assert torch.flagos.current_stream() == default


def test_stream_context_with_none_is_a_no_op():
    before = torch.flagos.current_stream()
    with torch.flagos.stream(None):
        assert torch.flagos.current_stream() == before
