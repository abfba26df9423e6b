"""Corners where flagos differed from the CPU, found by PyTorch's own
device-generic suites (issue 36: test_unary_ufuncs, test_binary_ufuncs,
test_reductions, test_type_promotion); each case failed before its fix.

Run in-process on the backend under test (host, or opencl in CI's second
pass), compared with the CPU result bit for bit where the CPU's is exact.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import BACKEND, CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"
FLOATS = [torch.float32, torch.float64]


def same(on_device: torch.Tensor, on_cpu: torch.Tensor) -> None:
    assert on_device.device.type == DEV
    torch.testing.assert_close(on_device.cpu(), on_cpu, rtol=0, atol=0, equal_nan=True)
    if on_cpu.is_floating_point():  # the sign of zeros too
        assert torch.equal(torch.signbit(on_device.cpu()), torch.signbit(on_cpu))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float16, torch.bfloat16], ids=str)
def test_abs_of_negative_zero_is_positive_zero(dtype):
    x = torch.tensor([-0.0, 0.0, -1.5, 2.0], dtype=dtype)
    same(x.to(DEV).abs(), x.abs())


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_i0_of_the_largest_floats_is_inf(dtype):
    big = torch.finfo(dtype).max
    x = torch.tensor([big, -big, 700.0, 30.0, 1.0], dtype=dtype)
    expected = torch.special.i0(x)
    actual = torch.special.i0(x.to(DEV)).cpu()
    assert torch.isinf(actual[:2]).all(), actual
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.clamp(min=float("nan")),
        lambda x: x.clamp(max=float("nan")),
        lambda x: x.clamp(min=float("nan"), max=1.0),
        lambda x: torch.clamp_min(x, float("nan")),
        lambda x: torch.clamp_max(x, float("nan")),
    ],
    ids=["min", "max", "min_and_max", "clamp_min", "clamp_max"],
)
def test_clamp_with_a_nan_bound_is_nan(call):
    x = torch.tensor([-1.0, 0.5, 2.0])
    same(call(x.to(DEV)), call(x))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x + 1000,  # the scalar wraps to the tensor's type, as on CPU
        lambda x: x * 300,
        lambda x: x - 257,
    ],
    ids=["add", "mul", "sub"],
)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8], ids=str)
def test_python_scalars_wrap_to_the_integer_type(call, dtype):
    x = torch.tensor([1, 2, 100], dtype=dtype)
    same(call(x.to(DEV)), call(x))


def test_integer_pow_to_a_negative_integer_raises_as_on_cpu():
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        torch.pow(torch.tensor([2]), -1)
    for exponent in (-1, -2):
        with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
            torch.pow(torch.tensor([2], device=DEV), exponent)
        with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
            torch.tensor([2], device=DEV).pow_(exponent)
    same(torch.pow(torch.tensor([2, 3], device=DEV), 2), torch.tensor([4, 9]))
    same(torch.pow(torch.tensor([2.0], device=DEV), -1), torch.tensor([0.5]))


@pytest.mark.parametrize("fn", [torch.all, torch.any], ids=["all", "any"])
def test_all_any_out_must_be_bool_or_uint8(fn):
    x = torch.ones(2, 3, device=DEV)
    with pytest.raises(RuntimeError, match="only supports bool tensor for result, got: Float"):
        fn(x, out=torch.empty((), device=DEV))
    with pytest.raises(RuntimeError, match="only supports bool tensor for result, got: Float"):
        fn(x, dim=1, out=torch.empty(2, device=DEV))
    out = torch.empty((), dtype=torch.uint8, device=DEV)
    fn(x, out=out)
    assert out.item() == 1


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize(
    "shape, kwargs",
    [((1,), {}), ((3,), {"correction": 3}), ((2, 3), {"dim": 1, "correction": 5})],
)
def test_var_std_warn_when_degrees_of_freedom_are_not_positive(name, shape, kwargs):
    x = torch.ones(shape)
    with warnings.catch_warnings(record=True) as cpu:
        warnings.simplefilter("always")
        expected = getattr(torch, name)(x, **kwargs)
    with warnings.catch_warnings(record=True) as dev:
        warnings.simplefilter("always")
        actual = getattr(torch, name)(x.to(DEV), **kwargs)
    message = f"{name}(): degrees of freedom is <= 0"
    assert any(message in str(w.message) for w in cpu)
    assert sum(message in str(w.message) for w in dev) == 1, [str(w.message) for w in dev]
    same(actual, expected)


def test_var_with_enough_samples_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.ones(4, device=DEV).var()
        torch.ones(2, 3, device=DEV).std(dim=0, correction=1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    "call",
    [
        lambda x: x * 0.001,
        lambda x: x / 3.3,
        lambda x: x + 0.1,
        lambda x: 1.7 - x,
        lambda x: torch.div(x, 3.3, rounding_mode=None),
        lambda x: torch.div(x, 3.3, rounding_mode="trunc"),
        lambda x: torch.div(x, 3.3, rounding_mode="floor"),
        lambda x: x * torch.tensor(0.001, dtype=torch.float64),  # a 0-dim CPU tensor
    ],
    ids=["mul", "div", "add", "rsub", "div_none", "div_trunc", "div_floor", "mul_cpu_tensor"],
)
def test_scalars_of_half_arithmetic_stay_in_float(call, dtype):
    """Note [Scalars of half arithmetic stay in float]: 0.001 rounded to half
    first gave other results than CPU's."""
    x = (torch.randn(256, generator=torch.Generator().manual_seed(0)) * 100).to(dtype)
    same(call(x.to(DEV)), call(x))


def test_a_cpu_scalar_first_keeps_the_result_on_the_device():
    """Note [Results of a CPU scalar first]: complex ops take the host
    fallback, whose results went to the first argument's device -- the CPU
    for a complex Python scalar first (which broke complex lerp)."""
    scalar = torch.tensor(1 + 2j)
    x = torch.tensor([1 + 1j, -2 + 0.5j])
    same(scalar * x.to(DEV), scalar * x)
    same(torch.add(scalar, x.to(DEV), alpha=2), torch.add(scalar, x, alpha=2))
    end = torch.zeros(2, dtype=torch.cfloat)
    same(torch.lerp(x.to(DEV), end.to(DEV), scalar), torch.lerp(x, end, scalar))


@pytest.mark.parametrize(
    "make",
    [
        # half + half overflows in half; computed in the out's float32 it did not
        lambda d: torch.add(
            torch.full((3,), 60000.0, dtype=torch.half, device=d),
            torch.full((3,), 60000.0, dtype=torch.half, device=d),
            out=torch.empty(3, device=d),
        ),
        # 2 ** 17 in uint8 wraps to 0; computed in the out's int64 it did not
        lambda d: torch.pow(
            2,
            torch.tensor([17, 3], dtype=torch.uint8, device=d),
            out=torch.empty(2, dtype=torch.int64, device=d),
        ),
        # float32 arithmetic, then widened: the low bits as CPU's (inputs made
        # on CPU: a device's linspace may round its last bits otherwise, as
        # CUDA's does, and this case is about the mul)
        lambda d: torch.mul(
            torch.linspace(0.1, 7.3, 50).to(d),
            torch.linspace(3.3, -1.7, 50).to(d),
            out=torch.empty(50, dtype=torch.float64, device=d),
        ),
        # in place into a narrower type: computed in float32, rounded once
        lambda d: (
            torch.linspace(0.1, 7.3, 50).to(d).half().add_(torch.linspace(1e-3, 1.0, 50).to(d))
        ),
    ],
    ids=["half_overflow_into_float", "uint8_pow_into_int64", "float_into_double", "in_place_half"],
)
def test_pointwise_out_computes_in_the_common_dtype(make):
    """Note [Pointwise out= in the common dtype]."""
    same(make(DEV), make("cpu"))


@pytest.mark.parametrize(
    "make, words",
    [
        (
            lambda x: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8),
            "quantized tensors are not supported on the flagos device",
        ),
        (
            lambda x: torch.quantize_per_tensor(x.cpu(), 0.1, 0, torch.qint8).to(DEV),
            "quantized tensors are not supported on the flagos device",
        ),
        (lambda x: x.to_sparse(), "sparse tensors are not supported on the flagos device"),
    ],
    ids=["quantize_on_device", "quantized_to_device", "sparse"],
)
def test_unsupported_layouts_are_a_clear_error(make, words):
    """Quantized and sparse tensors have no flagos kernels: a clear error
    naming the operator, not "Could not run ... 'Quantizedflagos' backend"."""
    x = torch.randn(4, 4, device=DEV)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized creation is deprecated
        with pytest.raises(NotImplementedError, match=words):
            make(x)


def test_digamma_of_negative_floats_keeps_its_digits():
    """The reflection term is -pi / tan(pi (x - rint(x))): with tan(pi x), 6% of
    float32 inputs in (-20, 50) fell outside test_unary_ufuncs' tolerance
    (digits lost far from 0 and next to the poles)."""
    x = torch.linspace(-20, 50, 20001)
    expected = torch.digamma(x)
    actual = torch.digamma(x.to(DEV)).cpu()
    torch.testing.assert_close(actual, expected, rtol=1.3e-6, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (
            lambda x, d: x[torch.tensor([0, 1], device=d), torch.tensor([0, 1, 2], device=d)],
            IndexError,
            "indexing tensors could not be broadcast together with shapes",
        ),
        (
            lambda x, d: x[
                torch.zeros(0, dtype=torch.long, device=d), torch.tensor([0, 1], device=d)
            ],
            IndexError,
            "indexing tensors could not be broadcast together with shapes",
        ),
        (
            lambda x, d: x.index_put_(
                (torch.tensor([0, 1], device=d),), torch.ones(3, 4, device=d)
            ),
            RuntimeError,
            "cannot be broadcast to indexing result",
        ),
    ],
    ids=["index_shapes", "empty_index", "index_put_values"],
)
def test_advanced_indexing_shape_errors_are_cpus(call, error, words):
    """The advanced-indexing composite declines shapes that do not broadcast,
    so the host tier raises CPU's IndexError (it raised broadcast_tensors'
    RuntimeError: test_indexing)."""
    for device in ("cpu", DEV):
        with pytest.raises(error, match=words):
            call(torch.randn(3, 4, device=device), device)


@pytest.mark.parametrize(
    "dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64], ids=str
)
@pytest.mark.parametrize(
    "op, scalar",
    [(op, s) for op in ("lt", "le", "gt", "ge", "eq", "ne") for s in (0.5, -0.5, 1.0)]
    + [("eq", 1 + 0j), ("ne", 1 + 0j)],
    ids=str,
)
def test_comparisons_with_a_wider_scalar_compare_in_the_result_type(dtype, op, scalar):
    """Note [Comparisons with a wider scalar]: int8 < 0.5 compared 0 < 0 in
    int8 (False; CPU: True) -- test_type_promotion's test_lt_with_type_promotion."""
    x = torch.tensor([0, 1, 1, 0], dtype=dtype)
    same(getattr(torch, op)(x.to(DEV), scalar), getattr(torch, op)(x, scalar))


def test_integer_out_into_a_float_computes_in_the_integer_type():
    """Note [Pointwise out= in the common dtype]: uint8 5 - 8 wraps to 253
    before the float64 out= sees it (test_computation_ignores_out)."""

    def make(d):
        a = torch.tensor([5, 200], dtype=torch.uint8, device=d)
        b = torch.tensor([8, 100], dtype=torch.uint8, device=d)
        out = torch.empty(0, dtype=torch.float64, device=d)
        return torch.cat([torch.sub(a, b, out=out.clone()), torch.add(a, b, out=out.clone())])

    same(make(DEV), make("cpu"))


@pytest.mark.parametrize("fn", [torch.fmod, torch.remainder], ids=["fmod", "remainder"])
@pytest.mark.parametrize(
    "dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64], ids=str
)
def test_integer_modulo_by_zero_is_cudas_pattern(fn, dtype):
    """CPU raises ZeroDivisionError (a device read per call); flagos gives
    CUDA's result, which PyTorch's suites expect of an accelerator
    (test_fmod_remainder_by_zero_integral): all ones in types narrower than
    64 bits, and in int64 0xffffffff for a dividend >= 0, -1 below."""
    low = 0 if dtype == torch.uint8 else -9
    x = torch.arange(low, 10, dtype=dtype)
    got = fn(x.to(DEV), torch.zeros_like(x).to(DEV)).cpu()
    if dtype == torch.int64:
        expected = torch.where(x >= 0, 0xFFFFFFFF, -1)
    else:
        expected = torch.full_like(x, 255 if dtype == torch.uint8 else -1)
    assert torch.equal(got, expected)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(x, torch.zeros_like(x))  # the CPU's rule, for the record


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda d: torch.tensor([True], device=d) - True, "with two bool tensors"),
        (lambda d: torch.sub(torch.tensor([True], device=d), 1), "with a bool tensor"),
        (
            lambda d: torch.rsub(torch.tensor([True], device=d), torch.tensor([1], device=d)),
            "with a bool tensor",
        ),
        (
            lambda d: torch.add(
                torch.ones(2, dtype=torch.bool, device=d),
                torch.ones(2, dtype=torch.bool, device=d),
                alpha=1.1,
            ),
            "alpha must not be a floating point number",
        ),
        (
            lambda d: torch.add(torch.ones(2, dtype=torch.int32, device=d), 3, alpha=0.5),
            "alpha must not be a floating point number",
        ),
        (
            lambda d: torch.sub(torch.ones(2, device=d), torch.ones(2, device=d), alpha=1j),
            "alpha must not be a complex number",
        ),
        (
            lambda d: torch.add(torch.ones(2, device=d), torch.ones(2, device=d), alpha=True),
            "Boolean alpha only supported for Boolean results",
        ),
        (
            lambda d: torch.neg(
                torch.ones(2, device=d), out=torch.empty(2, dtype=torch.float64, device=d)
            ),
            "Found dtype Double but expected Float",
        ),
        (
            lambda d: torch.round(
                torch.ones(2, device=d), out=torch.empty(2, dtype=torch.float64, device=d)
            ),
            "Found dtype Double but expected Float",
        ),
        (
            lambda d: torch.bitwise_not(
                torch.ones(2, dtype=torch.int32, device=d),
                out=torch.empty(2, dtype=torch.int64, device=d),
            ),
            "Found dtype Long but expected Int",
        ),
        (
            lambda d: (lambda x: torch.cat([x[:3], x[3:]], out=x))(torch.rand(6, device=d)),
            "unsupported operation",
        ),
        (
            lambda d: (lambda y: torch.cat([torch.rand(3, device=d), y[:3]], out=y))(
                torch.empty(6, device=d)
            ),
            "unsupported operation",
        ),
    ],
    ids=[
        "sub_bool_scalar",
        "sub_bool_int",
        "rsub_bool",
        "bool_alpha_float",
        "int_alpha_float",
        "float_alpha_complex",
        "float_alpha_bool",
        "neg_out_dtype",
        "round_out_dtype",
        "bitwise_not_out_dtype",
        "cat_into_its_input",
        "cat_overlapping_output",
    ],
)
def test_cpu_refuses_and_so_do_we(call, words):
    """Note [Argument checks the meta kernels skip] and Note [Overlapping
    writes]: each call raised on CPU and returned a value on flagos
    (test_binary_ufuncs, test_type_promotion, test_shape_ops)."""
    for device in ("cpu", DEV):
        with pytest.raises(RuntimeError, match=words):
            call(device)


def test_index_put_values_on_another_device_raise():
    """index_put_ skips the common-device check (its indices may be CPU
    tensors); CPU values were copied in silently (test_indexing's
    test_invalid_device). A 0-dim CPU value stays allowed, as on CUDA."""
    b = torch.zeros(5, device=DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.index_put_(b, (torch.tensor([0, 1]),), torch.tensor([1.0, 2.0]))
    b[torch.tensor([0, 1])] = torch.tensor(3.0)
    same(b, torch.tensor([3.0, 3.0, 0.0, 0.0, 0.0]))


def test_indexing_an_empty_dim_is_cpus_index_error():
    """CPU's words for an index into a size-0 dim (test_empty_ndim_index)."""
    for device in ("cpu", DEV):
        with pytest.raises(IndexError, match="for dimension with size 0"):
            torch.empty(2, 0, device=device)[:, [0]]


# --- test_tensor_creation_ops and test_reductions (this round) --------------


@pytest.mark.parametrize(
    "call",
    [
        lambda dev: torch.kaiser_window(6, device=dev),
        lambda dev: torch.kaiser_window(7, False, device=dev, dtype=torch.float64),
        lambda dev: torch.kaiser_window(5, True, 3.5, device=dev, dtype=torch.float16),
        lambda dev: torch.mode(
            torch.tensor([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]], device=dev),
            1,
            out=(torch.empty(0, device=dev), torch.empty(0, dtype=torch.long, device=dev)),
        ),
    ],
    ids=["kaiser_window", "kaiser_window_periodic", "kaiser_window_beta", "mode_out"],
)
def test_composites_that_refuse_the_device_run(call):
    """Note [Composite kernels that refuse the device]: kaiser_window raised
    "DispatchStub: missing kernel for flagos", mode(out=) "mode only
    supports CPU, CUDA and XPU device type"."""
    got, want = call(DEV), call("cpu")
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            same(g, w)
    else:
        same(got, want)


def test_arange_warns_before_resizing_an_out_of_another_size():
    """CPU warns when a non-empty out= has another element count (a step's
    rounding error: 2/49 gives 50 elements)."""
    for dev in ("cpu", DEV):
        line = torch.zeros(1, 49, device=dev)
        with pytest.warns(UserWarning, match="The out tensor will be resized"):
            torch.arange(-1, 1, 2.0 / 49, dtype=torch.float32, out=line)
        assert line.shape == (50,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.arange(0, 4, out=torch.empty(0, device=DEV))  # empty: no warning


def test_arange_into_a_narrowed_out_keeps_its_shape():
    """CPU fills an out= of the right element count in row-major order; ours
    resized it to 1-D (a narrowed 2-D view got the wrong values)."""
    x, y = torch.zeros(2, 3, device=DEV), torch.zeros(2, 3)
    torch.arange(0, 4, out=x.narrow(1, 1, 2))
    torch.arange(0, 4, out=y.narrow(1, 1, 2))
    same(x, y)


@pytest.mark.parametrize(
    "dtype, bounds, words",
    [
        (torch.float32, (1.0, 0.0), "uniform_ expects to return a \\[from, to\\) range"),
        (torch.float16, (-60000.0, 60000.0), "uniform_ expects to-from <="),
        (torch.float16, (0.0, 1e6), "to is out of bounds for"),
        (torch.float32, (-1e39, 0.0), "from is out of bounds for"),
    ],
    ids=["reversed", "wider_than_the_dtype", "to_beyond_half", "from_beyond_float"],
)
def test_uniform_bounds_raise_as_on_cpu(dtype, bounds, words):
    """CPU's uniform_impl_ checks; the generated kernel drew from the range."""
    with pytest.raises(RuntimeError, match=words):
        torch.empty(4, dtype=dtype).uniform_(*bounds)
    with pytest.raises(RuntimeError, match=words):
        torch.empty(4, dtype=dtype, device=DEV).uniform_(*bounds)


@pytest.mark.parametrize("dtype", [torch.long, torch.float32, torch.float16], ids=str)
def test_randperm_out_draws_the_factorys_numbers(dtype):
    """randperm(n, out=) took the host fallback (CPU's algorithm over the
    CPU-compatible state), so it gave other numbers than randperm(n)."""
    for n in (5, 100):
        state = torch.flagos.get_rng_state()
        want = torch.randperm(n, dtype=dtype, device=DEV)
        torch.flagos.set_rng_state(state)
        got = torch.empty(0, dtype=dtype, device=DEV)
        torch.randperm(n, out=got)
        same(got, want.cpu())
        assert sorted(got.cpu().long().tolist()) == list(range(n))


def test_randint_over_a_wide_range_is_uniform():
    """A range of 0.75 * 2^32 reduced from 32 random bits gave its low third
    twice the weight; ATen takes 64 bits from a range of 2^28 on
    (test_reductions' test_randint_distribution, with its bound)."""
    torch.manual_seed(0)
    size, n_max, bins = 1_000_000, int(0.75 * 2**32), 8
    drawn = torch.randint(n_max, (size,), device=DEV).cpu()
    hist = torch.bincount(drawn // (n_max // bins), minlength=bins).double()
    expected = size / bins
    assert (hist - expected).abs().max() / expected < 3 / expected**0.5


@pytest.mark.parametrize(
    "make",
    [
        # int64 ** 1.5 computes in float32 (the exponent a wrapped number),
        # not in int64 with the exponent truncated to 1 (test_long_tensor_pow_floats)
        lambda d: torch.pow(
            torch.tensor([-2, 3, 0, 5], device=d), 1.5, out=torch.empty(4, device=d)
        ),
        # 2.5 ** int64 into a float64 out: computed in float32, then widened
        lambda d: torch.pow(
            2.5,
            torch.tensor([1, 3, 9], device=d),
            out=torch.empty(3, dtype=torch.float64, device=d),
        ),
        # clamp's bounds take part in the result type: int64 clamped at 0.5 is 0.5
        lambda d: torch.clamp(torch.tensor([0, 3], device=d), 0.5, out=torch.empty(2, device=d)),
        # float-only operators compute integers in float32 (not float64, not
        # int) whatever the out's type (test_type_promotion_true_divide & co.)
        lambda d: torch.true_divide(
            torch.tensor([1, 2, 3], dtype=torch.int16, device=d),
            torch.tensor([2, 3, 7], dtype=torch.int32, device=d),
            out=torch.empty(3, dtype=torch.complex64, device=d),
        ),
        lambda d: torch.xlogy(
            torch.tensor([1, 2, 3], dtype=torch.int16, device=d),
            torch.tensor([2, 3, 7], dtype=torch.int32, device=d),
            out=torch.empty(3, dtype=torch.float64, device=d),
        ),
        lambda d: torch.sin(
            torch.tensor([1, 3], device=d), out=torch.empty(2, dtype=torch.float64, device=d)
        ),
    ],
    ids=[
        "long_pow_float",
        "float_pow_long",
        "clamp_int_float_bound",
        "true_divide_into_complex",
        "xlogy_into_double",
        "sin_int_into_double",
    ],
)
def test_out_computes_in_tensoriterators_dtype(make):
    """Note [Pointwise out= in the common dtype]: wrapped-number scalars and
    integer-to-float promotion decide the computation dtype."""
    out = make(DEV)
    expected = make("cpu")
    if out.is_complex():
        out, expected = torch.view_as_real(out), torch.view_as_real(expected)
    if BACKEND == "host" or not out.is_floating_point():
        same(out, expected)
        return
    # Other math libraries (PoCL's) round pow and sin to float32 within an
    # ulp of CPU's; computed in float32 all the same, so a float64 out holds
    # float32 values (computed in float64 it held others).
    torch.testing.assert_close(out.cpu(), expected, rtol=3e-7, atol=0, equal_nan=True)
    assert torch.equal(out.cpu().float().to(out.dtype).nan_to_num(), out.cpu().nan_to_num())


@pytest.mark.parametrize(
    "call",
    [
        lambda d: torch.tensor(3, dtype=torch.int32, device=d).mul_(torch.tensor(1.5, device=d)),
        lambda d: torch.tensor([3], dtype=torch.int32, device=d).mul_(
            torch.tensor([1.5], device=d)
        ),
    ],
    ids=["zero_dim", "one_dim"],
)
def test_in_place_into_a_narrower_type_raises_as_on_cpu(call):
    """int32 *= float32: CPU's "result type Float can't be cast to the
    desired output type Int" (test_mul_intertype_scalar)."""
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        call("cpu")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Int"):
        call(DEV)


def test_ldexp_of_half_computes_in_float():
    """ldexp(half, int): 2**-10 * 2**20 is 1024, as CPU's kernel computes
    (ATen's composite computed 2**20 in half: inf; test_ldexp)."""
    m = torch.tensor([-2.0, 2**-10, 3.0, 0.5], dtype=torch.half)
    e = torch.tensor([-25, 20, 3, -1])
    same(torch.ldexp(m.to(DEV), e.to(DEV)), torch.ldexp(m, e))
    x = torch.linspace(-5, 5, 33)
    k = torch.arange(-16, 17)
    same(torch.ldexp(x.to(DEV), k.to(DEV)), torch.ldexp(x, k))


def test_complex_half_pow_computes_in_complex_float():
    """Note [Complex half pow]: CPU raises for complex half, CUDA computes it
    in complex float; PyTorch's test_pow expects an accelerator to compute."""
    m = torch.tensor([1.5, -2.0, 0.5, 0.0], dtype=torch.half)
    with pytest.raises(RuntimeError, match="ComplexHalf"):
        torch.pow(m, 1 + 1j)
    for actual, reference in [
        (torch.pow(m.to(DEV), 1 + 1j), torch.pow(m.to(torch.complex64), 1 + 1j)),
        (torch.pow(2 - 1j, m.to(DEV)), torch.pow(2 - 1j, m.to(torch.complex64))),
        (
            torch.pow(m.to(DEV).to(torch.complex32), m.to(DEV).to(torch.complex32)),
            torch.pow(m.to(torch.complex64), m.to(torch.complex64)),
        ),
    ]:
        assert actual.dtype == torch.complex32
        same(torch.view_as_real(actual), torch.view_as_real(reference.to(torch.complex32)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_trunc_division_truncates_the_rounded_quotient(dtype):
    """Note [Intermediates rounded to the inputs' type]: 26192 / -1139 is -22.9956,
    -23 in half; CPU truncates that (-23), the float quotient gave -22
    (test_div_rounding_numpy)."""
    a = torch.tensor([-26192.0, 58368.0, 56416.0, 7.0, -1.0], dtype=dtype)
    b = torch.tensor([-1139.0, 176.875, -1525.0, 2.0, 3.0], dtype=dtype)
    g = torch.Generator().manual_seed(0)
    a = torch.cat([a, (torch.rand(4096, generator=g) * 2e4 - 1e4).to(dtype)])
    b = torch.cat([b, (torch.rand(4096, generator=g) * 600 - 300).to(dtype)])
    same(
        torch.div(a.to(DEV), b.to(DEV), rounding_mode="trunc"),
        torch.div(a, b, rounding_mode="trunc"),
    )


@pytest.mark.parametrize("op", ["lt", "eq", "logical_and", "logical_xor"])
def test_predicates_write_any_type_without_a_cast_check(op):
    """Comparisons and logical ops write 0/1 into any out= or in-place type
    (TensorIterator's comparison ops check no cast): int64 < float64 into
    int64 does not raise; compared in the inputs' result type, not the out's."""

    def make(d):
        a = torch.tensor([1, 2, 3, 2**40 + 1], device=d)
        b = torch.tensor([1.5, 2.0, 0.5, 2.0**40], dtype=torch.float64, device=d)
        out = getattr(torch, op)(a, b, out=torch.empty(4, dtype=torch.int64, device=d))
        in_place = getattr(a.clone(), op + "_")(b)
        x = torch.tensor([2**40 + 1, 5], device=d)
        wide = getattr(torch, op)(x, x - 1, out=torch.empty(2, device=d))
        return torch.cat([out, in_place, wide.long()])

    same(make(DEV), make("cpu"))


def test_index_add_under_deterministic_algorithms_repeats_its_bits():
    """Note [Atomic scatters decline]: atomic adds (opencl) sum duplicate
    indices in any order; deterministic mode must give the same bits every
    call (test_index_add_deterministic)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 8, generator=g)
    index = torch.randint(0, 200, (5000,), generator=g)
    src = torch.randn(5000, 8, generator=g)
    x_d, index_d, src_d = x.to(DEV), index.to(DEV), src.to(DEV)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        first = torch.index_add(x_d, 0, index_d, src_d, alpha=1.3).cpu()
        for _ in range(3):
            assert torch.equal(torch.index_add(x_d, 0, index_d, src_d, alpha=1.3).cpu(), first)
    finally:
        torch.use_deterministic_algorithms(was)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_accumulating_index_put_of_16_bit_floats_is_cpus(dtype):
    """Each add rounds the partial sum to 16 bits, so only CPU's order gives
    CPU's result (test_index_put_large_indices: up to 190 apart with atomics)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 64, generator=g).to(dtype)
    index = torch.randint(0, 16, (20000,), generator=g)
    values = torch.randn(20000, 64, generator=g).to(dtype)
    on_device = a.to(DEV)
    on_device.index_put_((index.to(DEV),), values.to(DEV), accumulate=True)
    same(on_device, a.index_put_((index,), values, accumulate=True))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int64], ids=str)
def test_nan_to_num_of_integers_into_an_integer_out_is_a_copy(dtype):
    """Integers into a float-only operator compute in float, but an integer
    out= of nan_to_num is CPU's copy, not a cast error (test_unary_ufuncs)."""
    x = torch.tensor([1, 2, 3, 100], dtype=dtype)
    same(
        torch.nan_to_num(x.to(DEV), out=torch.empty(4, dtype=dtype, device=DEV)),
        torch.nan_to_num(x),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("offset", [0, 1, 3, 5])
def test_vector_loads_of_16_bit_floats_at_any_alignment(dtype, offset):
    """Reductions and rows read eight 16-bit values at a time from addresses
    that are only 2-byte aligned (rows of 12, a view at an odd element).
    PoCL's vload_half8 faulted there in torch.any(x, dim=0) (test_reductions;
    Note [Eight halves, one at a time])."""
    g = torch.Generator().manual_seed(1)
    base = torch.randn(offset + 5 * 12, generator=g).to(dtype)
    base[offset + 12 : offset + 36] = 0
    x = base[offset:].view(5, 12)
    x_d = base.to(DEV)[offset:].view(5, 12)
    for reduce in (torch.any, torch.all, torch.sum, torch.amax):
        torch.testing.assert_close(reduce(x_d, dim=0).cpu(), reduce(x, dim=0), rtol=1e-2, atol=1e-2)
    for row in (torch.softmax, torch.log_softmax):
        torch.testing.assert_close(row(x_d, -1).cpu(), row(x, -1), rtol=1e-2, atol=1e-2)


def _same_error(fn_cpu, fn_device):
    with pytest.raises(RuntimeError) as cpu_error:
        fn_cpu()
    with pytest.raises(RuntimeError) as device_error:
        fn_device()
    assert str(device_error.value) == str(cpu_error.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=str)
def test_nonzero_into_an_out_that_is_not_int64_is_cpus_error(dtype):
    """test_shape_ops::test_nonzero: the composite's int64 result was cast
    into any out= dtype."""
    t = torch.tensor([[0, 1], [2, 0]])
    _same_error(
        lambda: torch.nonzero(t, out=torch.empty([], dtype=dtype)),
        lambda: torch.nonzero(t.to(DEV), out=torch.empty([], dtype=dtype, device=DEV)),
    )
    _same_error(
        lambda: torch.nonzero_static(t, size=2, out=torch.empty([], dtype=dtype)),
        lambda: torch.nonzero_static(
            t.to(DEV), size=2, out=torch.empty([], dtype=dtype, device=DEV)
        ),
    )
    out = torch.empty([], dtype=torch.long, device=DEV)
    same(torch.nonzero(t.to(DEV), out=out), torch.nonzero(t))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.int64], ids=str)
def test_index_fill_of_a_real_tensor_with_a_complex_value_is_cpus_error(dtype):
    """test_indexing::test_index_fill: the composite converted the complex
    scalar (an overflow error, or True for bool) instead of refusing it."""
    x = torch.tensor([[1, 2], [4, 5]], dtype=dtype)
    index = torch.tensor([0])
    _same_error(
        lambda: x.clone().index_fill_(1, index, 1 + 1j),
        lambda: x.to(DEV).index_fill_(1, index.to(DEV), 1 + 1j),
    )
    _same_error(
        lambda: x.clone().index_fill_(1, index, torch.tensor(1 + 1j)),
        lambda: x.to(DEV).index_fill_(1, index.to(DEV), torch.tensor(1 + 1j).to(DEV)),
    )


@pytest.mark.parametrize("fn", [torch.linspace, torch.logspace], ids=["linspace", "logspace"])
def test_spaced_factories_into_a_strided_out_of_the_right_size(fn):
    """test_tensor_creation_ops::test_linspace: an out= view that already
    holds `steps` elements keeps its shape and strides (the composite
    resized it to 1-D and wrote past the view); one that overlaps itself is
    CPU's error (test_linlogspace_mem_overlap)."""
    x_cpu, x_dev = torch.zeros(2, 3), torch.zeros(2, 3, device=DEV)
    y_cpu = fn(0, 3, 4, out=x_cpu.narrow(1, 1, 2))
    y_dev = fn(0, 3, 4, out=x_dev.narrow(1, 1, 2))
    same(x_dev, x_cpu)
    same(y_dev, y_cpu)
    assert y_dev.stride() == y_cpu.stride()
    _same_error(
        lambda: fn(1, 10, 10, out=torch.rand(1).expand(10)),
        lambda: fn(1, 10, 10, out=torch.rand(1, device=DEV).expand(10)),
    )


@pytest.mark.parametrize("fn", [torch.complex, torch.polar], ids=["complex", "polar"])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_complex_parts_into_a_real_out_is_cpus_error(fn, dtype):
    """test_tensor_creation_ops::test_torch_complex_out_dtype_error."""
    a = torch.tensor([1, 2], dtype=dtype)
    _same_error(
        lambda: fn(a, a, out=torch.zeros(2, dtype=dtype)),
        lambda: fn(a.to(DEV), a.to(DEV), out=torch.zeros(2, dtype=dtype, device=DEV)),
    )


@pytest.mark.parametrize("out_int32", [False, True])
def test_search_into_an_out_of_the_other_index_type_is_cpus_error(out_int32):
    """test_reductions::test_bucketization: the composites' indices were cast
    into an out= of any dtype."""
    v = torch.tensor([1.0, 2.0, 3.0])
    for dtype in (torch.int64 if out_int32 else torch.int32, torch.float32):
        _same_error(
            lambda d=dtype: torch.searchsorted(
                v, v, out=torch.empty(3, dtype=d), out_int32=out_int32
            ),
            lambda d=dtype: torch.searchsorted(
                v.to(DEV), v.to(DEV), out=torch.empty(3, dtype=d, device=DEV), out_int32=out_int32
            ),
        )
        _same_error(
            lambda d=dtype: torch.bucketize(v, v, out=torch.empty(3, dtype=d), out_int32=out_int32),
            lambda d=dtype: torch.bucketize(
                v.to(DEV), v.to(DEV), out=torch.empty(3, dtype=d, device=DEV), out_int32=out_int32
            ),
        )


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_integer_extremes_are_exact_in_max_min_and_scatter(dtype):
    """Found by the scatter_reduce composites: opencl's maximum/minimum ran
    integers through double behind the NaN guard (INT64_MAX became INT64_MIN),
    and a scattered scalar value was a double on both backends."""
    info = torch.iinfo(dtype)
    a = torch.tensor([info.max, info.min, 2**31 - 1, -7], dtype=dtype)
    b = torch.tensor([info.min, info.max, 0, 3], dtype=dtype)
    if dtype == torch.int64:
        a[2] = 2**53 + 1
    same(torch.maximum(a.to(DEV), b.to(DEV)), torch.maximum(a, b))
    same(torch.minimum(a.to(DEV), b.to(DEV)), torch.minimum(a, b))
    index = torch.tensor([1, 3])
    same(
        torch.zeros(4, dtype=dtype, device=DEV).scatter_(0, index.to(DEV), info.max),
        torch.zeros(4, dtype=dtype).scatter_(0, index, info.max),
    )


def test_heaviside_into_a_complex_out_is_cpus_error():
    """PyTorch's test_binary_ufuncs::test_heaviside_complex: real inputs, complex out=."""
    real = torch.tensor([0.0, -1.0, 1.0])
    for device in ("cpu", DEV):
        out = torch.empty(3, dtype=torch.complex64, device=device)
        with pytest.raises(RuntimeError, match="heaviside is not yet implemented for complex"):
            torch.heaviside(real.to(device), real.to(device), out=out)
    same(torch.heaviside(real.to(DEV), real.to(DEV)), torch.heaviside(real, real))
