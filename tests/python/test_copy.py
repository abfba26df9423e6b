"""Copies between CPU and flagos and within flagos: layouts, dtypes, async, edge sizes."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_close_to_cpu

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
]


def make(shape, dtype=torch.float32, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 10).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


# Views of unusual layouts: (shape of the base tensor, view of it).
LAYOUTS = {
    "contiguous": ((5, 7), lambda t: t),
    "transposed": ((5, 7), lambda t: t.t()),
    "sliced": ((9, 10), lambda t: t[1:8:2, ::3]),
    "expanded": ((1, 7), lambda t: t.expand(5, 7)),
    "permuted": ((2, 3, 4), lambda t: t.permute(2, 0, 1)),
    "offset": ((40,), lambda t: t[13:33].view(4, 5)),
    "channels_last": ((2, 3, 4, 5), lambda t: t.contiguous(memory_format=torch.channels_last)),
}
LAYOUT_IDS = list(LAYOUTS)


def layout_pair(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The same view made on CPU and on flagos from equal bases."""
    shape, view = LAYOUTS[name]
    base = make(shape)
    return view(base), view(base.to("flagos"))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_keeps_values_and_dtype(dtype):
    src = make((3, 17), dtype)
    on_device = src.to("flagos")
    assert on_device.dtype == dtype and on_device.device == torch.device("flagos", 0)
    assert torch.equal(on_device.cpu(), src)


@pytest.mark.parametrize("layout", LAYOUT_IDS)
def test_host_to_device_of_any_layout(layout):
    src, _ = layout_pair(layout)
    assert torch.equal(src.to("flagos").cpu(), src)


@pytest.mark.parametrize("layout", LAYOUT_IDS)
def test_device_views_copy_out_and_clone(layout):
    cpu, dev = layout_pair(layout)
    assert dev.stride() == cpu.stride()
    assert torch.equal(dev.cpu(), cpu)  # device -> host of a strided view
    assert torch.equal(dev.clone().cpu(), cpu)  # device -> device
    assert torch.equal(dev.contiguous().cpu(), cpu.contiguous())


@pytest.mark.parametrize("layout", LAYOUT_IDS)
def test_copy_into_non_contiguous_destination(layout):
    src, _ = layout_pair(layout)
    reverse = list(reversed(range(src.dim())))  # a destination with reversed strides
    dst_cpu = torch.zeros(src.shape[::-1]).permute(reverse)
    dst = torch.zeros(src.shape[::-1], device="flagos").permute(reverse)
    dst_cpu.copy_(src)
    dst.copy_(src)  # host -> device into a strided view
    assert_close_to_cpu(dst, dst_cpu)
    dst2 = torch.zeros(src.shape[::-1], device="flagos").permute(reverse)
    dst2.copy_(dst)  # device -> device, strided on both sides
    assert_close_to_cpu(dst2, dst_cpu)


@pytest.mark.parametrize(
    "src_dtype", [torch.float32, torch.int64, torch.bool, torch.float16], ids=str
)
@pytest.mark.parametrize(
    "dst_dtype", [torch.float64, torch.int32, torch.bfloat16, torch.uint8], ids=str
)
def test_dtype_conversion_across_and_on_device(src_dtype, dst_dtype):
    src = make((4, 9), src_dtype).abs() if src_dtype != torch.bool else make((4, 9), src_dtype)
    expected = src.to(dst_dtype)
    assert torch.equal(src.to("flagos").to(dst_dtype).cpu(), expected)  # on the device
    assert torch.equal(src.to("flagos", dst_dtype).cpu(), expected)  # while crossing
    dst = torch.empty(4, 9, dtype=dst_dtype, device="flagos")
    dst.copy_(src)  # copy_ converts
    assert torch.equal(dst.cpu(), expected)
    back = torch.empty(4, 9, dtype=dst_dtype)
    back.copy_(src.to("flagos"))  # device -> host with conversion
    assert torch.equal(back, expected)


def test_non_blocking_copies_with_pinned_memory():
    src = make((1000, 100)).pin_memory()
    assert src.is_pinned()
    on_device = src.to("flagos", non_blocking=True)
    out = torch.empty_like(src).pin_memory()
    out.copy_(on_device * 2, non_blocking=True)
    torch.flagos.synchronize()
    assert torch.equal(out, src * 2)


def test_non_blocking_without_pinned_memory_is_still_correct():
    src = make((300, 300))
    on_device = src.to("flagos", non_blocking=True)
    back = on_device.to("cpu", non_blocking=True)
    torch.flagos.synchronize()
    assert torch.equal(back, src)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_zero_size(shape):
    src = torch.empty(shape)
    on_device = src.to("flagos")
    assert on_device.shape == shape and on_device.cpu().shape == shape
    assert on_device.clone().shape == shape
    on_device.copy_(src)
    on_device.fill_(1)


@pytest.mark.parametrize("value", [3.5, -7, True, 2**40])
def test_scalar_tensors_and_item(value):
    src = torch.tensor(value)
    on_device = src.to("flagos")
    assert on_device.dim() == 0
    assert on_device.item() == value  # _local_scalar_dense
    assert torch.equal(on_device.cpu(), src)


def test_item_sees_queued_work():
    x = torch.ones(512, 512, device="flagos")
    y = (x @ x).sum()  # queued, then read
    assert y.item() == 512 * 512 * 512


@pytest.mark.parametrize(
    "dtype, scalar", [(torch.int64, 1), (torch.float32, 0.5), (torch.float64, 3), (torch.int32, 7)]
)
def test_cpu_scalar_operands_are_filled_not_copied(dtype, scalar):
    # Note [CPU scalars are filled, not copied]: num_batches_tracked.add_(1)
    # must not be a host-to-device copy (which synchronizes the stream).
    import flagos_torchfl as ft

    cpu = make((3, 4), dtype)
    dev = cpu.to("flagos")
    before = ft.op_stats()
    dev.add_(scalar)
    out = dev.mul(torch.tensor(scalar))  # an explicit CPU 0-dim tensor too
    after = ft.op_stats()
    changed = {k for k, v in after.items() if before.get(k) != v}
    assert "aten::_copy_from" not in changed, changed
    assert "aten::fill_.Scalar" in changed, changed
    assert torch.equal(dev.cpu(), cpu.add_(scalar))
    assert torch.equal(out.cpu(), cpu.mul(torch.tensor(scalar)))
    assert out.dtype == cpu.mul(torch.tensor(scalar)).dtype


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.bool], ids=str)
def test_fill_and_zero_on_non_contiguous(dtype):
    cpu = make((6, 8), dtype)
    dev = cpu.to("flagos")
    for t in (cpu, dev):
        t.t()[::2].fill_(1)
        t[:, 1::3].zero_()
    assert torch.equal(dev.cpu(), cpu)


def test_tensor_and_module_methods_for_flagos():
    x = make((3, 3))
    assert x.flagos().is_flagos and x.flagos().device.type == "flagos"
    m = torch.nn.Linear(3, 2).flagos()
    assert all(p.is_flagos for p in m.parameters())
    assert x.untyped_storage().flagos().device.type == "flagos"
