"""Operators the model zoo reached as host fallbacks, now on the device, against CPU.

- x[idx], x[idx] = v, x[idx] += v (Swin's relative-position table, its
  backward): Note [Advanced indexing as one flat gather];
- arange(start, end, step) (RoPE, GPT-2 and T5 positions): a core factory;
- grouped and depthwise convolution (ConvNeXt, MobileNet, EfficientNet):
  one GEMM per product whatever the groups (Note [Grouped convolution in
  one GEMM]), not a GEMM per group joined by a cat.
"""

from __future__ import annotations

import flagos_torchfl as ft
import pytest
import torch
import torch.nn.functional as F

X = torch.randn(5, 4, 3, generator=torch.Generator().manual_seed(0))
IDX = torch.tensor([[0, 4], [-1, 2]])
JDX = torch.tensor([1, 3])

INDEXERS = {
    "leading": lambda t, d: t[IDX.to(d)],
    "cpu index tensor": lambda t, d: t[IDX],
    "second dim": lambda t, d: t[:, JDX.to(d)],
    "two dims": lambda t, d: t[IDX.to(d), JDX.to(d)],
    "trailing pair": lambda t, d: t[:, JDX.to(d), torch.tensor([0, 2], device=d)],
    "int32 after ellipsis": lambda t, d: t[..., (JDX - 1).int().to(d)],
}


def fallbacks():
    return {op: t["fallback"] for op, t in ft.op_stats().items() if t.get("fallback")}


@pytest.mark.parametrize("name", list(INDEXERS))
def test_index_matches_cpu_on_the_device(name):
    f = INDEXERS[name]
    ft.reset_op_stats()
    torch.testing.assert_close(f(X.to("flagos"), "flagos").cpu(), f(X, "cpu"))
    assert fallbacks() == {}


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_matches_cpu(accumulate):
    values = torch.randn(2, 2, 3)
    cpu = torch.zeros(5, 4, 3)
    dev = cpu.to("flagos")
    idx = torch.tensor([[0, 4], [4, 2]])  # 4 twice: accumulate adds both
    ft.reset_op_stats()
    dev.index_put_(
        (idx.to("flagos"),), values.reshape(2, 2, 1, 3).expand(2, 2, 4, 3).to("flagos"), accumulate
    )
    cpu.index_put_((idx,), values.reshape(2, 2, 1, 3).expand(2, 2, 4, 3), accumulate)
    if accumulate:
        torch.testing.assert_close(dev.cpu(), cpu)
    else:  # duplicate indices: either write may win, as on CPU and CUDA
        torch.testing.assert_close(dev.cpu()[[0, 2]], cpu[[0, 2]])
    assert fallbacks() == {}


def test_index_backward_accumulates_like_cpu():
    table_cpu = torch.randn(7, 2, requires_grad=True)
    table_dev = table_cpu.detach().to("flagos").requires_grad_()
    idx = torch.tensor([[0, 3, 3], [6, 0, 1]])
    grad = torch.randn(2, 3, 2)
    table_cpu[idx].backward(grad)
    ft.reset_op_stats()
    table_dev[idx.to("flagos")].backward(grad.to("flagos"))
    torch.testing.assert_close(table_dev.grad.cpu(), table_cpu.grad)
    assert fallbacks() == {}


def test_out_of_range_index_raises_cpus_index_error():
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 5"):
        X.to("flagos")[torch.tensor([1, 5], device="flagos")]
    with pytest.raises(IndexError, match="index -6 is out of bounds for dimension 0 with size 5"):
        X.to("flagos")[torch.tensor([-6], device="flagos")]


@pytest.mark.parametrize(
    "args, dtype",
    [
        ((3, 11, 2), torch.int64),
        ((0.0, 1.0, 0.1), torch.float32),
        ((-2.5, 4.0, 0.75), torch.float64),
        ((10,), torch.int64),
        ((5, 0, -1), torch.int32),
    ],
)
def test_arange_is_cpus_on_the_device(args, dtype):
    ft.reset_op_stats()
    out = torch.arange(*args, dtype=dtype, device="flagos")
    assert out.device.type == "flagos"
    assert torch.equal(out.cpu(), torch.arange(*args, dtype=dtype))
    assert fallbacks() == {}


@pytest.mark.parametrize("channels, groups", [(16, 1), (16, 4), (16, 16), (48, 48)])
def test_grouped_convolution_is_three_gemms_whatever_the_groups(channels, groups):
    torch.manual_seed(0)
    x = torch.randn(2, channels, 9, 9, dtype=torch.float64, requires_grad=True)
    w = torch.randn(channels, channels // groups, 7, 7, dtype=torch.float64, requires_grad=True)
    ref = F.conv2d(x, w, padding=3, groups=groups)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    xd = x.detach().to("flagos").requires_grad_()
    wd = w.detach().to("flagos").requires_grad_()
    ft.reset_op_stats()
    out = F.conv2d(xd, wd, padding=3, groups=groups)
    out.backward(grad.to("flagos"))
    stats = ft.op_stats()
    torch.testing.assert_close(out.detach().cpu(), ref.detach())
    torch.testing.assert_close(xd.grad.cpu(), x.grad)
    torch.testing.assert_close(wd.grad.cpu(), w.grad)
    assert fallbacks() == {}
    if stats["aten::convolution"].get("decomposition"):  # the composite: GEMMs counted
        assert sum(stats["aten::bmm"].values()) == 3, stats["aten::bmm"]
        assert "aten::cat" not in stats


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_convolution_of_a_permuted_input_matches_cpu(groups):
    # ConvNeXt's blocks end in permute(0, 3, 1, 2): the next (depthwise) conv
    # sees channels-last strides and CPU answers channels-last outputs. (The
    # host's oneDNN kernel takes contiguous operands only; strided ones take
    # the im2col + GEMM composite.)
    torch.manual_seed(0)
    x = torch.randn(2, 9, 9, 16).permute(0, 3, 1, 2).requires_grad_()
    w = torch.randn(16, 16 // groups, 7, 7, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    ref = F.conv2d(x, w, b, padding=3, groups=groups)
    grad = torch.randn_like(ref)
    ref.backward(grad)
    xd, wd, bd = (t.detach().to("flagos").requires_grad_() for t in (x, w, b))
    ft.reset_op_stats()
    out = F.conv2d(xd, wd, bd, padding=3, groups=groups)
    out.backward(grad.to("flagos"))
    for got, want in ((out, ref), (xd.grad, x.grad), (wd.grad, w.grad), (bd.grad, b.grad)):
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-4)
    assert fallbacks() == {}


def test_layer_norm_over_a_permuted_view_matches_cpu():
    # ConvNeXt normalizes channels over permute(0, 2, 3, 1) of an NCHW tensor.
    torch.manual_seed(0)
    x = torch.randn(2, 16, 5, 5).permute(0, 2, 3, 1).requires_grad_()
    w = torch.randn(16, requires_grad=True)
    b = torch.randn(16, requires_grad=True)
    ref = F.layer_norm(x, (16,), w, b)
    grad = torch.randn(2, 16, 5, 5).permute(0, 2, 3, 1)  # a strided gradient too
    ref.backward(grad)
    xd, wd, bd = (t.detach().to("flagos").requires_grad_() for t in (x, w, b))
    ft.reset_op_stats()
    out = F.layer_norm(xd, (16,), wd, bd)
    out.backward(grad.to("flagos"))
    for got, want in ((out, ref), (xd.grad, x.grad), (wd.grad, w.grad), (bd.grad, b.grad)):
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    assert fallbacks() == {}
    if ft.backend_info(verbose=False)["backend"] == "host":
        stats = ft.op_stats()
        assert stats["aten::native_layer_norm"] == {"native": 1}, stats
        assert stats["aten::native_layer_norm_backward"] == {"native": 1}
