"""torch.fft on the device through the plugin's FFT library slot
(include/flagos/fft.h, Note [FFT through the library slot]): every torch.fft
function, each norm, float32 and float64, odd, even and prime lengths,
trimmed and padded signals, dims in any order, strided, broadcast and
conjugated inputs, stft/istft and autograd, compared with CPU. On a backend
with an FFT table (host: KISS FFT) op_stats() must show the three primitives
on the native tier and no host fallback; on one without (opencl today) they
must show up as counted fallbacks, with the same values."""

from __future__ import annotations

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"
PRIMITIVES = ("aten::_fft_c2c", "aten::_fft_r2c", "aten::_fft_c2r")


def has_slot() -> bool:
    import flagos_torchfl as ft

    return ft.backend_info(verbose=False)["fft"] is not None


def check_tiers(expect_native=True):
    """The primitives that ran took the slot (native), or, without one, the
    counted host fallback; at least one of them ran."""
    import flagos_torchfl as ft

    stats = ft.op_stats()
    ran = {p: stats[p] for p in PRIMITIVES if p in stats}
    assert ran, stats
    for name, tiers in ran.items():
        if has_slot() and expect_native:
            assert set(tiers) == {"native"}, (name, tiers)
        else:
            assert tiers.get("fallback", 0) > 0, (name, tiers)


def close(on_device, on_cpu, dtype):
    assert on_device.device.type == DEV
    # The slot computes in double (Note [Host FFT]); CPU's float32 FFT
    # rounds at every stage: torch's own float32 tolerances hold for the
    # short signals here, scaled by the signal's magnitude.
    if dtype == torch.float32:
        scale = max(1.0, on_cpu.abs().max().item())
        torch.testing.assert_close(on_device.cpu(), on_cpu, rtol=1e-5, atol=1e-5 * scale)
    else:
        torch.testing.assert_close(on_device.cpu(), on_cpu)


C2C = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn"]
R2C = ["rfft", "rfft2", "rfftn", "ihfft", "ihfft2", "ihfftn"]
C2R = ["irfft", "irfft2", "irfftn", "hfft", "hfft2", "hfftn"]
NORMS = [None, "ortho", "forward"]


def same(fn, x, dtype, **kwargs):
    """fn on the device gives CPU's values, or CPU's error (irfft of a
    one-bin signal asks for zero points)."""
    try:
        expected = fn(x, **kwargs)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as device_error:
            fn(x.to(DEV), **kwargs)
        assert str(device_error.value) == str(e)
        return
    close(fn(x.to(DEV), **kwargs), expected, dtype)


def signal(shape, complex_, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, dtype=dtype, generator=g)
    if complex_:
        x = torch.complex(x, torch.randn(*shape, dtype=dtype, generator=g))
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", C2C + R2C + C2R)
def test_every_fft_function_matches_cpu(name, norm, dtype):
    import flagos_torchfl as ft

    fn = getattr(torch.fft, name)
    complex_in = name not in R2C
    two_d = name.endswith("2") or name.endswith("n")
    # Odd, even and prime lengths; a batch dim in front.
    ft.reset_op_stats()
    for shape in [(3, 8, 12), (2, 7, 5), (1, 17, 1), (4, 1, 2)]:
        x = signal(shape, complex_in, dtype)
        same(fn, x, dtype, norm=norm)
        if two_d:
            # Dims in another order (the halved dim is the last listed).
            same(fn, x, dtype, norm=norm, dim=(2, 0))
        else:
            # A trimmed and a zero-padded signal along the middle dim.
            for n in (3, 19):
                same(fn, x, dtype, norm=norm, n=n, dim=1)
    check_tiers()


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2", "ifftn", "hfft"])
def test_strided_broadcast_and_conjugated_inputs(name):
    import flagos_torchfl as ft

    fn = getattr(torch.fft, name)
    complex_in = name not in R2C
    base = signal((6, 10, 9), complex_in, torch.float32, seed=1)
    views = {
        "transposed": lambda t: t.transpose(0, 2),
        "every other": lambda t: t[::2, 1:, ::3],
        "broadcast": lambda t: t[:1].expand(4, 10, 9),
    }
    if complex_in:
        views["conjugated"] = lambda t: t.conj()
    for view in views.values():
        ft.reset_op_stats()
        on_device = fn(view(base.to(DEV)))
        close(on_device, fn(view(base)), torch.float32)
        check_tiers()


def test_out_variants_write_into_the_given_tensor():
    x = signal((4, 16), True, torch.float64, seed=2)
    out = torch.empty(4, 16, dtype=torch.complex128, device=DEV)
    result = torch.fft.fft(x.to(DEV), out=out)
    assert result.data_ptr() == out.data_ptr()
    close(out, torch.fft.fft(x), torch.float64)
    r = torch.fft.rfft(x.real.to(DEV), out=torch.empty(0, dtype=torch.complex128, device=DEV))
    close(r, torch.fft.rfft(x.real), torch.float64)


def test_stft_and_istft_round_trip_as_on_cpu():
    import flagos_torchfl as ft

    g = torch.Generator().manual_seed(3)
    audio = torch.randn(2, 4000, generator=g)
    window = torch.hann_window(256)
    kwargs = {"n_fft": 256, "hop_length": 64, "return_complex": True}
    ft.reset_op_stats()
    spec = torch.stft(audio.to(DEV), window=window.to(DEV), **kwargs)
    close(spec, torch.stft(audio, window=window, **kwargs), torch.float32)
    back = torch.istft(spec, n_fft=256, hop_length=64, window=window.to(DEV), length=4000)
    torch.testing.assert_close(back.cpu(), audio, rtol=1e-4, atol=1e-4)
    check_tiers()


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fftn", "hfft"])
def test_gradients_match_cpu(name):
    import flagos_torchfl as ft

    fn = getattr(torch.fft, name)
    x = signal((3, 10), name not in R2C, torch.float64, seed=4)
    grads = []
    for device in ("cpu", DEV):
        leaf = x.clone().to(device).requires_grad_()
        y = fn(leaf, norm="ortho")
        weight = signal(tuple(y.shape), y.is_complex(), torch.float64, seed=5).to(device)
        loss = (y * weight).real.sum() if y.is_complex() else (y * weight).sum()
        ft.reset_op_stats()
        loss.backward()
        grads.append(leaf.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
    check_tiers()


def test_a_length_the_library_declines_takes_the_counted_host_tier():
    """The host plugin declines a length with a prime factor above 4096
    (Note [Host FFT]): the call still answers, on the host tier, counted."""
    import flagos_torchfl as ft

    if not has_slot():
        pytest.skip("no FFT table on this backend: every call takes the host tier")
    x = signal((8209,), True, torch.float64, seed=6)  # 8209 is prime
    ft.reset_op_stats()
    close(torch.fft.fft(x.to(DEV)), torch.fft.fft(x), torch.float64)
    assert ft.op_stats()["aten::_fft_c2c"] == {"fallback": 1}


def test_half_precision_is_refused_as_on_cpu():
    x = torch.randn(8, dtype=torch.float16)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.fft.rfft(x)
    with pytest.raises(RuntimeError) as device_error:
        torch.fft.rfft(x.to(DEV))
    assert str(device_error.value) == str(cpu_error.value)


def test_backend_info_names_the_library():
    import flagos_torchfl as ft

    info = ft.backend_info(verbose=False)
    if info["backend"] == "host":
        assert info["fft"] is not None and info["fft"].startswith("kissfft"), info["fft"]
