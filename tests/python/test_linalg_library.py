"""torch.linalg on the device through the plugin's linear-algebra library slot
(include/flagos/linalg.h, Note [Linear algebra through the library slot]):
LU, solve, inv, det, slogdet, Cholesky, triangular solves, QR, Householder
products, SVD and eigh, float32 and float64, single, batched and broadcast
operands, tall, wide and empty matrices, singular and indefinite inputs
(CPU's info and error messages) and autograd, each compared with CPU. On a
backend whose plugin fills the slot (host: OpenBLAS's LAPACK) op_stats()
must show no host fallback at all; on one without (opencl today) the linalg
operators must show up as counted fallbacks, with the same values.

Singular vectors and eigenvectors are unique only up to sign (torch.linalg's
documentation says so; LAPACK leaves it to the implementation, and CPU's is
MKL): those are compared column by column after matching signs, and through
the factorization they reconstruct."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import CORE_ERROR

pytestmark = pytest.mark.skipif(CORE_ERROR is not None, reason=CORE_ERROR or "")
DEV = "flagos"
DTYPES = [torch.float32, torch.float64]
# linalg.h's members: the host plugin fills every one.
MEMBERS = {"getrf", "getrs", "potrf", "trsm", "geqrf", "orgqr", "ormqr", "gesvd", "syevd", "geev"}
MEMBERS |= {"sytrf", "sytrs"}
# The overloads built on the slot (ops/catalog.yaml, family linalg).
LINALG = re.compile(r"linalg|cholesky|lu_|qr|svd|eig|triangular|geqrf|ormqr|householder|det")


def slot_members() -> set[str]:
    import flagos_torchfl as ft

    info = ft.backend_info(verbose=False)["linalg"]
    return set(info["members"]) if info else set()


@pytest.fixture(autouse=True)
def tiers():
    """Each test's device calls are checked by check_tiers() below."""
    import flagos_torchfl as ft

    torch.flagos.synchronize()
    ft.reset_op_stats()
    yield
    check_tiers()


def tol(dtype):
    # LAPACK's blocked algorithms sum in another order than MKL's: a few ulps
    # of the condition number; the inputs below are well conditioned.
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-9}


def general(*shape, dtype=torch.float64, seed=0):
    """Well-conditioned square (or rectangular) matrices."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(*shape, generator=g, dtype=torch.float64)
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 0:
        a = a + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)
    return a.to(dtype)


def spd(*shape, dtype=torch.float64, seed=0):
    a = general(*shape, dtype=torch.float64, seed=seed)
    n = shape[-1]
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def same(on_device, on_cpu, dtype):
    """Every tensor of the result on the device, with CPU's values, shape and dtype."""
    if isinstance(on_cpu, torch.Tensor):
        assert on_device.device.type == DEV
        assert on_device.dtype == on_cpu.dtype and on_device.shape == on_cpu.shape
        torch.testing.assert_close(on_device.cpu(), on_cpu, **tol(dtype))
        return
    assert len(on_device) == len(on_cpu)
    for d, c in zip(on_device, on_cpu, strict=True):
        same(d, c, dtype)


def both(fn, *args, **kwargs):
    """fn on the device and on CPU (tensor arguments moved)."""
    dev = [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]
    return fn(*dev, **kwargs), fn(*args, **kwargs)


def check_tiers():
    """The calls so far: none on the host tier where the slot is full; where it
    is empty, the linalg operators took the host tier, counted."""
    import flagos_torchfl as ft

    stats = ft.op_stats()
    if not stats:
        return  # the test ran its device work in another process
    fallbacks = {op: t["fallback"] for op, t in stats.items() if t.get("fallback")}
    if slot_members() == MEMBERS:
        assert not fallbacks, fallbacks
    else:  # only the operators the slot would serve (matrix_exp needs none)
        assert all(LINALG.search(op) for op in fallbacks), fallbacks


def same_error(fn, *args, via_host=False, **kwargs):
    """CPU's error on the device too. @p via_host: the composite declines the
    call (a shape CPU refuses) and the host tier raises it: the calls before
    are checked, and the count starts again after it."""
    import flagos_torchfl as ft

    with pytest.raises(RuntimeError) as cpu:
        fn(*args, **kwargs)
    if via_host:
        check_tiers()
    with pytest.raises(RuntimeError) as dev:
        fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    assert str(dev.value) == str(cpu.value)
    if via_host:
        ft.reset_op_stats()


# ------------------------------------------------------------------ LU family


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape", [(5, 5), (3, 4, 4), (2, 2, 3, 3), (6, 4), (4, 6), (0, 0), (2, 0, 3)]
)
def test_lu_factor_gives_cpus_lu_pivots_and_info(dtype, shape):
    A = general(*shape, dtype=dtype)
    dev, cpu = both(torch.linalg.lu_factor_ex, A)
    same(dev, cpu, dtype)
    assert dev.LU.stride() == cpu.LU.stride()  # column-major, as LAPACK leaves it


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 6, 4), (2, 4, 6), (0, 3)])
def test_lu_and_lu_unpack_give_p_l_u(dtype, shape):
    A = general(*shape, dtype=dtype, seed=1)
    same(*both(torch.linalg.lu, A), dtype)
    LU, piv = torch.linalg.lu_factor(A)
    for data in (True, False):
        for pivots in (True, False):
            same(*both(torch.lu_unpack, LU, piv, data, pivots), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_left_right_vector_and_broadcast(dtype):
    A = general(3, 4, 4, dtype=dtype)
    same(*both(torch.linalg.solve, A, general(3, 4, 2, dtype=dtype, seed=2)), dtype)
    same(*both(torch.linalg.solve, A, general(4, 2, dtype=dtype, seed=2)), dtype)  # broadcast B
    same(*both(torch.linalg.solve, A, general(3, 4, dtype=dtype, seed=2)), dtype)  # vectors
    same(*both(torch.linalg.solve, A, general(4, dtype=dtype, seed=2)), dtype)
    same(*both(torch.linalg.solve, A, general(3, 2, 4, dtype=dtype, seed=2), left=False), dtype)
    same(*both(torch.linalg.solve, A[0].mT, general(4, 3, dtype=dtype, seed=3)), dtype)  # strided
    same(*both(torch.linalg.solve_ex, A, general(3, 4, 1, dtype=dtype, seed=4)), dtype)
    same(
        *both(
            torch.linalg.tensorsolve,
            general(2, 3, 6, dtype=dtype).reshape(6, 6).reshape(2, 3, 6),
            general(2, 3, dtype=dtype, seed=5),
        ),
        dtype,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_lu_solve_every_side_and_adjoint(dtype, left, adjoint):
    A = general(2, 5, 5, dtype=dtype)
    B = general(2, 5, 3, dtype=dtype, seed=6) if left else general(2, 3, 5, dtype=dtype, seed=6)
    LU, piv = torch.linalg.lu_factor(A)
    same(*both(torch.linalg.lu_solve, LU, piv, B, left=left, adjoint=adjoint), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5), (0, 0), (2, 0, 0), (1, 1)])
def test_inv_det_slogdet_logdet(dtype, shape):
    A = general(*shape, dtype=dtype, seed=7)
    for fn in (
        torch.linalg.inv,
        torch.linalg.inv_ex,
        torch.linalg.det,
        torch.linalg.slogdet,
        torch.logdet,
    ) + ((lambda a: torch.linalg.tensorinv(a, ind=1)),) * (len(shape) == 2):
        same(*both(fn, A), dtype)
    # a non-contiguous A takes the other branch of det's and slogdet's LU (A, not A^T)
    same(*both(torch.linalg.det, A.mT), dtype)
    same(*both(torch.linalg.slogdet, A.mT), dtype)


@pytest.mark.parametrize("contiguous", [True, False])
def test_the_auxiliary_lu_is_the_one_cpu_factors(contiguous):
    """solve_ex, det and slogdet return the LU their backward reads: of A or of
    A^T, as the installed torch chooses (Note [The LU autograd reads])."""
    A = general(2, 4, 4, seed=19)
    A = A if contiguous else A.mT
    B = general(2, 4, 3, seed=20)
    same(*both(torch.ops.aten._linalg_solve_ex, A, B), torch.float64)
    same(*both(torch.ops.aten._linalg_det, A), torch.float64)
    same(*both(torch.ops.aten._linalg_slogdet, A), torch.float64)


def test_det_sign_follows_the_row_interchanges():
    # A permutation of the identity: det = the permutation's sign, from pivots alone.
    P = torch.eye(5, dtype=torch.float64)[[3, 0, 4, 1, 2]]
    same(*both(torch.linalg.det, P), torch.float64)
    same(*both(torch.linalg.slogdet, -P), torch.float64)


def test_singular_matrices_give_cpus_info_and_errors():
    A = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)
    same(*both(torch.linalg.lu_factor_ex, A), torch.float64)
    same(*both(torch.linalg.det, A), torch.float64)
    assert torch.linalg.inv_ex(A.to(DEV)).info.item() == torch.linalg.inv_ex(A).info.item() == 2
    same_error(torch.linalg.inv, A)
    same_error(torch.linalg.solve, A, torch.ones(2, 1, dtype=torch.float64))
    same_error(torch.linalg.lu_factor_ex, torch.stack([A, A]), check_errors=True)


# ------------------------------------------------------------ Cholesky family


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (0, 0)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_its_solve_and_inverse(dtype, shape, upper):
    A = spd(*shape, dtype=dtype)
    same(*both(torch.linalg.cholesky, A, upper=upper), dtype)
    same(*both(torch.linalg.cholesky_ex, A, upper=upper), dtype)
    F = torch.linalg.cholesky(A, upper=upper)
    B = general(*shape[:-1], 2, dtype=dtype, seed=8)
    same(*both(torch.cholesky_solve, B, F, upper=upper), dtype)
    same(*both(torch.cholesky_inverse, F, upper=upper), dtype)


def test_cholesky_of_an_indefinite_matrix_gives_cpus_info_and_error():
    A = torch.tensor([[[4.0, 2.0], [2.0, -1.0]], [[2.0, 0.0], [0.0, 3.0]]])
    same(*both(torch.linalg.cholesky_ex, A), torch.float32)
    same_error(torch.linalg.cholesky, A)
    same_error(torch.linalg.cholesky, A[0])


def test_the_deprecated_triangular_solve_warns_as_cpu(run_python):
    # A fresh process: CPU's and our warnings are each given once per process.
    proc = run_python(
        "import warnings, torch, flagos_torchfl as ft; ft.initialize(); "
        "warnings.simplefilter('error'); "
        "torch.triangular_solve(torch.ones(3, 1, device='flagos'), torch.eye(3, device='flagos'))"
    )
    assert "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular" in (
        proc.stderr
    ), proc.stderr


def test_the_deprecated_cholesky_warns_and_raises_as_cpu(run_python):
    A = spd(4, 4)
    same(*both(torch.cholesky, A, upper=True), torch.float64)
    same_error(torch.cholesky, -A)
    # A fresh process: the warning is given once per process.
    proc = run_python(
        "import warnings, torch, flagos_torchfl as ft; ft.initialize(); "
        "warnings.simplefilter('error'); torch.cholesky(torch.eye(3, device='flagos'))"
    )
    assert "torch.cholesky is deprecated in favor of torch.linalg.cholesky" in proc.stderr, (
        proc.stderr
    )


# -------------------------------------------------------- triangular systems


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solve(dtype, upper, transpose, unit):
    A = general(2, 4, 4, dtype=dtype).triu() if upper else general(2, 4, 4, dtype=dtype).tril()
    B = general(3, 1, 4, 2, dtype=dtype, seed=9)  # batch dims broadcast against A's
    same(*both(torch.triangular_solve, B, A, upper, transpose, unit), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [False, True])
def test_solve_triangular(dtype, left, upper):
    A = general(3, 4, 4, dtype=dtype)
    A = A.triu() if upper else A.tril()
    B = general(4, 5, dtype=dtype, seed=10) if left else general(5, 4, dtype=dtype, seed=10)
    same(*both(torch.linalg.solve_triangular, A, B, upper=upper, left=left), dtype)
    same(
        *both(torch.linalg.solve_triangular, A, B, upper=upper, left=left, unitriangular=True),
        dtype,
    )


# ------------------------------------------------------------------------ QR


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 5, 4), (0, 3), (3, 0)])
def test_qr_every_mode_geqrf_and_householder(dtype, shape):
    A = general(*shape, dtype=dtype, seed=11)
    for mode in ("reduced", "complete", "r"):
        same(*both(torch.linalg.qr, A, mode=mode), dtype)
    same(*both(torch.geqrf, A), dtype)
    if A.shape[-2] >= A.shape[-1]:
        a, tau = torch.geqrf(A)
        same(*both(torch.linalg.householder_product, a, tau), dtype)
        same(*both(torch.linalg.householder_product, a, tau[..., :1]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr(dtype, left, transpose):
    a, tau = torch.geqrf(general(2, 5, 3, dtype=dtype, seed=12))
    C = general(2, 5, 4, dtype=dtype, seed=13) if left else general(2, 4, 5, dtype=dtype, seed=13)
    same(*both(torch.ormqr, a, tau, C, left, transpose), dtype)


# ----------------------------------------------------------- SVD and eigh


def same_up_to_sign(on_device, on_cpu, dtype, dim):
    """Columns (dim -1) or rows (dim -2) equal after flipping each to CPU's sign."""
    d = on_device.cpu()
    dots = (d * on_cpu).sum(dim=dim, keepdim=True)
    torch.testing.assert_close(d * torch.sign(dots), on_cpu, **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 5), (0, 3), (2, 3, 0)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(dtype, shape, full):
    A = general(*shape, dtype=dtype, seed=14)
    (U, S, Vh), (Uc, Sc, Vhc) = both(torch.linalg.svd, A, full_matrices=full)
    same(S, Sc, dtype)
    assert U.shape == Uc.shape and Vh.shape == Vhc.shape and U.stride() == Uc.stride()
    k = S.shape[-1]
    # the thin factors, column by column (distinct singular values here)
    same_up_to_sign(U[..., :k], Uc[..., :k], dtype, -2)
    same_up_to_sign(Vh[..., :k, :], Vhc[..., :k, :], dtype, -1)
    rebuilt = (U[..., :k] * S.unsqueeze(-2)) @ Vh[..., :k, :]
    torch.testing.assert_close(rebuilt.cpu(), A, **tol(dtype))
    same(*both(torch.linalg.svdvals, A), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (0, 0)])
def test_eigh(dtype, uplo, shape):
    A = spd(*shape, dtype=dtype, seed=15)
    (W, V), (Wc, Vc) = both(torch.linalg.eigh, A, UPLO=uplo)
    same(W, Wc, dtype)
    assert V.stride() == Vc.stride()
    same_up_to_sign(V, Vc, dtype, -2)
    same(*both(torch.linalg.eigvalsh, A, UPLO=uplo), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (3, 4, 4), (0, 0)])
def test_eig_of_real_matrices_with_complex_pairs(dtype, shape):
    """Real and complex-conjugate eigenvalues; each eigenvector LAPACK-normalized
    (unit norm, largest component real), compared up to sign."""
    A = general(*shape, dtype=dtype, seed=28) - shape[-1] * torch.eye(shape[-1], dtype=dtype)
    (W, V), (Wc, Vc) = both(torch.linalg.eig, A)
    same(W, Wc, dtype)
    assert V.dtype == Vc.dtype and V.shape == Vc.shape and V.stride() == Vc.stride()
    d = V.cpu()
    phase = torch.sgn((d.conj() * Vc).sum(-2, keepdim=True))
    torch.testing.assert_close(d * phase, Vc, **tol(dtype))
    same(*both(torch.linalg.eigvals, A), dtype)
    if A.numel():
        assert (W.imag != 0).any()  # the test meets conjugate pairs


def test_eig_of_a_non_finite_matrix_is_cpus_error():
    A = general(3, 3)
    A[1, 1] = float("nan")
    same_error(torch.linalg.eig, A, via_host=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 5), (2, 4, 4), (0, 0)])
def test_ldl_factor_and_solve_of_indefinite_matrices(dtype, shape):
    A = general(*shape, dtype=dtype, seed=29)
    A = A + A.mT - 2 * shape[-1] * torch.eye(shape[-1], dtype=dtype)  # symmetric, indefinite
    same(*both(torch.linalg.ldl_factor_ex, A), dtype)
    LD, piv = torch.linalg.ldl_factor(A)
    B = general(*shape[:-1], 2, dtype=dtype, seed=30)
    same(*both(torch.linalg.ldl_solve, LD, piv, B), dtype)


def test_derived_operators_run_on_the_slot_too():
    """Operators PyTorch builds from these: pinv, matrix_rank, cond, norms, lstsq-free ones."""
    A = general(4, 6, seed=16)
    H = spd(5, 5, seed=17)
    for fn, arg in [
        (torch.linalg.pinv, A),
        (torch.linalg.matrix_rank, A),
        (torch.linalg.cond, H),
        (lambda x: torch.linalg.matrix_norm(x, "nuc"), A),
        (lambda x: torch.linalg.matrix_norm(x, 2), A),
        (lambda x: torch.linalg.pinv(x, hermitian=True), H),
        (lambda x: torch.linalg.matrix_rank(x, hermitian=True), H),
    ]:
        same(*both(fn, arg), torch.float64)


# ---------------------------------------------------------------- autograd


@pytest.mark.parametrize(
    "fn,make",
    [
        (torch.linalg.det, general),
        (torch.linalg.inv, general),
        (
            lambda a: torch.linalg.solve(a, torch.ones(4, 2, dtype=a.dtype, device=a.device)),
            general,
        ),
        (lambda a: torch.linalg.slogdet(a).logabsdet, general),
        (torch.linalg.cholesky, spd),
        (lambda a: torch.linalg.qr(a).R, general),
        (torch.linalg.svdvals, general),
        (torch.linalg.eigvalsh, spd),
        (lambda a: torch.linalg.lu_factor(a).LU, general),
    ],
)
def test_gradients_match_cpu(fn, make):
    A = make(4, 4, seed=18)
    grads = []
    for device in ("cpu", DEV):
        a = A.to(device).detach().requires_grad_()
        fn(a).sum().backward()
        grads.append(a.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], **tol(torch.float64))


# ------------------------------------------------------------------- tools


def test_ops_reports_the_slot_and_the_tier_that_ran():
    """`ops` names the library and its members, and predicts for each linalg
    overload the tier the calls above took: decomposition over the slot, or
    the host tier without it (checked against op_stats here)."""
    import flagos_torchfl as ft
    from flagos_torchfl.tools import ops

    data = ops.support_list()
    members = slot_members()
    slot = data["library_slots"]["linalg"]
    if members:
        assert all(m in slot for m in members), slot
    else:
        assert slot is None
    A = general(4, 4, seed=21)
    ft.reset_op_stats()
    torch.linalg.det(A.to(DEV))
    torch.linalg.qr(A.to(DEV))
    torch.linalg.eigh(spd(4, 4).to(DEV))
    stats = ft.op_stats()
    for name in ("aten::_linalg_det", "aten::linalg_qr", "aten::_linalg_eigh"):
        ran = set(stats[name])
        predicted = data["overloads"][name]
        assert ran == {"decomposition" if predicted == "decomposition" else "fallback"}, (
            name,
            ran,
            predicted,
        )
        assert predicted == ("decomposition" if members == MEMBERS else "fallback")


# ------------------------------------------------- built from the primitives


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.01, 1.0, 9.0, 60.0])
def test_matrix_exp_at_every_scale(dtype, scale):
    """Small norms need no squaring, large ones several; each matrix of a
    batch keeps its own (Note [Matrix exponential by scaling and squaring])."""
    g = torch.Generator().manual_seed(22)
    A = (torch.rand(3, 5, 5, generator=g, dtype=torch.float64) - 0.5) * 2 * scale / 5
    A[1] *= 0.01  # a batch of very different norms
    A = A.to(dtype)
    dev, cpu = both(torch.linalg.matrix_exp, A)
    # exp grows like e^norm: compare relative to each matrix's magnitude
    scale_of = cpu.abs().amax(dim=(-2, -1), keepdim=True)
    torch.testing.assert_close((dev.cpu() / scale_of), cpu / scale_of, **tol(dtype))
    same(*both(torch.linalg.matrix_exp, A[0, :1, :1]), dtype)
    same(*both(torch.linalg.matrix_exp, A[:0]), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("rows", [6, 4, 3])
def test_lstsq_every_driver(dtype, driver, rows):
    """Over-, exactly and under-determined, batched, with a vector right-hand
    side: the solution, residuals, rank and singular values CPU gives."""
    A = general(2, rows, 4, dtype=dtype, seed=23)
    B = general(2, rows, 3, dtype=dtype, seed=24)
    same(*both(torch.linalg.lstsq, A, B, driver=driver), dtype)
    same(*both(torch.linalg.lstsq, A[0], B[0, :, 0], driver=driver), dtype)
    same(*both(torch.linalg.lstsq, A, B[:1], rcond=1e-3, driver=driver), dtype)  # broadcast
    same_error(torch.linalg.lstsq, A, B[0], driver=driver, via_host=True)  # read as vectors


@pytest.mark.parametrize("driver", ["gelsd", "gelss"])
def test_lstsq_of_a_rank_deficient_matrix_reports_its_rank(driver):
    A = general(6, 2, seed=25) @ general(2, 4, seed=26)  # rank 2
    same(*both(torch.linalg.lstsq, A, general(6, 2, seed=27), driver=driver), torch.float64)
