// Orthogonal factorizations over the library slot (Note [Linear algebra
// through the library slot]): geqrf, linalg_householder_product (orgqr),
// ormqr, linalg_qr (geqrf + orgqr), _linalg_svd (gesvd), _linalg_eigh
// (syevd) and linalg_eig / _linalg_eigvals (geev), with the shapes, strides and error checks of
// ATen's CPU kernels (BatchLinearAlgebra.cpp).
#include <ATen/ATen.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/linalg_slot.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

using linalg::batchCount;
using linalg::batchOf;
using linalg::columnMajor;
using linalg::columnMajorCopy;
using linalg::dtypeOf;
using linalg::emptyColumnMajor;
using linalg::matrixArg;
using linalg::ok;
using linalg::streamOf;
using linalg::takes;
using linalg::vectorArg;
using linalg::withTail;

// geqrf of a column-major copy of @p A: (QR, tau); or nullopt.
std::optional<std::pair<at::Tensor, at::Tensor>> geqrfOf(const at::Tensor& A) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->geqrf) return std::nullopt;
  const int64_t m = A.size(-2), n = A.size(-1);
  at::Tensor QR = columnMajorCopy(A);
  at::Tensor tau = at::empty(withTail(batchOf(A), {std::min(m, n)}), A.options());
  if (A.numel() > 0 &&
      !ok(t->geqrf(streamOf(A), dtypeOf(A), batchCount(A), m, n, matrixArg(QR), vectorArg(tau)),
          "linalg geqrf"))
    return std::nullopt;
  return std::make_pair(QR, tau);
}

// Q (in place of @p Q: m x n, its first k columns the reflectors) from tau.
bool orgqrInPlace(at::Tensor& Q, const at::Tensor& tau) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->orgqr) return false;
  const int64_t k = tau.size(-1);
  if (Q.numel() == 0) return true;
  if (k == 0) {
    Q.copy_(at::eye(Q.size(-2), Q.size(-1), Q.options()));
    return true;
  }
  return ok(t->orgqr(streamOf(Q), dtypeOf(Q), batchCount(Q), Q.size(-2), Q.size(-1), k,
                     matrixArg(Q), vectorArg(tau)),
            "linalg orgqr");
}

// geqrf(self) -> (a, tau).
bool geqrf(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !takes(a[0].toTensor())) return false;
  auto qr = geqrfOf(a[0].toTensor());
  if (!qr) return false;
  replaceArgs(stack, kArgs, {qr->first, qr->second});
  return true;
}

// linalg_householder_product(input, tau): m >= n >= k, same batch dims.
bool householderProduct(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor V = a[0].toTensor(), tau = a[1].toTensor();
  if (!takes(V) || tau.device() != V.device() || tau.scalar_type() != V.scalar_type() ||
      V.size(-2) < V.size(-1) || tau.dim() != V.dim() - 1 ||
      tau.sizes().slice(0, tau.dim() - 1) != batchOf(V) || tau.size(-1) > V.size(-1))
    return false;  // CPU's errors
  at::Tensor Q = columnMajorCopy(V);
  const at::Tensor tauc = tau.contiguous();
  if (!orgqrInPlace(Q, tauc)) return false;
  replaceArgs(stack, kArgs, {Q});
  return true;
}

// ormqr(self, input2 = tau, input3 = other, left, transpose): op(Q) C or C op(Q).
bool ormqr(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isBool() ||
      !a[4].isBool())
    return false;
  const at::Tensor V = a[0].toTensor(), tau = a[1].toTensor(), C = a[2].toTensor();
  const bool left = a[3].toBool();
  if (!takes(V) || !takes(C) || C.scalar_type() != V.scalar_type() || C.device() != V.device() ||
      tau.device() != V.device() || tau.scalar_type() != V.scalar_type() ||
      tau.dim() != V.dim() - 1 || C.dim() != V.dim() ||
      tau.sizes().slice(0, tau.dim() - 1) != batchOf(V) || batchOf(C) != batchOf(V))
    return false;
  const int64_t rows = left ? C.size(-2) : C.size(-1), k = tau.size(-1);
  if (rows != V.size(-2) || k > rows || k > V.size(-1)) return false;  // CPU's errors
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->ormqr) return false;
  at::Tensor X = columnMajorCopy(C);
  if (X.numel() > 0 && k > 0) {
    const at::Tensor Vc = columnMajor(V), tauc = tau.contiguous();
    if (!ok(t->ormqr(streamOf(X), dtypeOf(X), left ? 0 : 1,
                     a[4].toBool() ? FLAGOS_LINALG_OP_T : FLAGOS_LINALG_OP_N, batchCount(X),
                     X.size(-2), X.size(-1), k, matrixArg(Vc), vectorArg(tauc), matrixArg(X)),
            "linalg ormqr"))
      return false;
  }
  replaceArgs(stack, kArgs, {X});
  return true;
}

// linalg_qr(A, mode) -> (Q, R): reduced (m x k, k x n), complete (m x m,
// m x n), r (no Q, k x n).
bool qr(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isString()) return false;
  const at::Tensor A = a[0].toTensor();
  const std::string mode = a[1].toStringRef();
  if (!takes(A) || (mode != "reduced" && mode != "complete" && mode != "r")) return false;
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const bool compute_q = mode != "r", reduced = mode != "complete";
  auto factor = geqrfOf(A);
  if (!factor) return false;
  const at::Tensor& QR = factor->first;
  at::Tensor R = emptyColumnMajor(withTail(batchOf(A), {reduced ? k : m, n}), A.options());
  R.copy_(QR.narrow(-2, 0, R.size(-2)));
  R.triu_();
  at::Tensor Q = at::empty({0}, A.options());
  if (compute_q) {
    const int64_t cols = reduced ? k : m;
    Q = emptyColumnMajor(withTail(batchOf(A), {m, cols}), A.options());
    if (cols <= n) {
      Q.copy_(QR.narrow(-1, 0, cols));
    } else {  // complete with m > n: the reflectors fill the first n columns
      Q.narrow(-1, 0, n).copy_(QR);
      Q.narrow(-1, n, cols - n).zero_();
    }
    if (!orgqrInPlace(Q, factor->second)) return false;
  }
  replaceArgs(stack, kArgs, {Q, R});
  return true;
}

// _linalg_svd(A, full_matrices, compute_uv, *, driver) -> (U, S, Vh).
bool svd(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[2].isBool() || !a[3].isNone())
    return false;  // driver= is CPU's error
  const at::Tensor A = a[0].toTensor();
  if (!takes(A)) return false;
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->gesvd) return false;
  const bool full = a[1].toBool(), uv = a[2].toBool();
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  at::Tensor S = at::empty(withTail(batchOf(A), {k}), A.options());
  at::Tensor U = at::empty({0}, A.options()), Vh = U;
  if (uv) {
    U = emptyColumnMajor(withTail(batchOf(A), {m, full ? m : k}), A.options());
    Vh = emptyColumnMajor(withTail(batchOf(A), {full ? n : k, n}), A.options());
  }
  if (A.numel() == 0) {
    // CPU: the identity is a valid SVD of an empty matrix.
    if (uv && full) {
      if (U.numel() > 0) U.copy_(at::eye(m, A.options()));
      if (Vh.numel() > 0) Vh.copy_(at::eye(n, A.options()));
    }
    replaceArgs(stack, kArgs, {U, S, Vh});
    return true;
  }
  at::Tensor work = columnMajorCopy(A);
  at::Tensor info = at::zeros(batchOf(A), A.options().dtype(at::kInt));
  const flagosLinalgSvdJob_t job = !uv    ? FLAGOS_LINALG_SVD_VALUES
                                   : full ? FLAGOS_LINALG_SVD_FULL
                                          : FLAGOS_LINALG_SVD_REDUCED;
  flagosLinalgArray none{};
  if (!ok(t->gesvd(streamOf(A), dtypeOf(A), job, batchCount(A), m, n, matrixArg(work), vectorArg(S),
                   uv ? matrixArg(U) : none, uv ? matrixArg(Vh) : none, info.data_ptr<int32_t>()),
          "linalg gesvd"))
    return false;
  at::_linalg_check_errors(info, "linalg.svd", A.dim() == 2);
  replaceArgs(stack, kArgs, {U, S, Vh});
  return true;
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors).
bool eigh(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isString() || !a[2].isBool()) return false;
  const at::Tensor A = a[0].toTensor();
  const std::string uplo = a[1].toStringRef();
  if (!takes(A, /*square=*/true) || uplo.size() != 1) return false;
  const char u = static_cast<char>(std::toupper(static_cast<unsigned char>(uplo[0])));
  if (u != 'U' && u != 'L') return false;  // CPU's error
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->syevd) return false;
  const bool vectors = a[2].toBool();
  const int64_t n = A.size(-1);
  at::Tensor W = at::empty(withTail(batchOf(A), {n}), A.options());
  at::Tensor V = columnMajorCopy(A);
  if (A.numel() > 0) {
    at::Tensor info = at::zeros(batchOf(A), A.options().dtype(at::kInt));
    if (!ok(t->syevd(streamOf(A), dtypeOf(A), vectors ? 1 : 0, u == 'U' ? 1 : 0, batchCount(A), n,
                     matrixArg(V), vectorArg(W), info.data_ptr<int32_t>()),
            "linalg syevd"))
      return false;
    at::_linalg_check_errors(info, "linalg.eigh", A.dim() == 2);
  }
  replaceArgs(stack, kArgs, {W, vectors ? V : at::empty({0}, A.options())});
  return true;
}

// The eigenvalues (and eigenvectors) of a general real matrix, complex;
// nullopt to decline (CPU refuses non-finite input: the host tier raises).
std::optional<std::pair<at::Tensor, at::Tensor>> eigOf(const at::Tensor& A, bool vectors) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->geev || !takes(A, /*square=*/true)) return std::nullopt;
  if (A.numel() > 0 && !at::isfinite(A).all().item<bool>()) return std::nullopt;
  const int64_t n = A.size(-1);
  const at::TensorOptions complex =
      A.options().dtype(A.scalar_type() == at::kFloat ? at::kComplexFloat : at::kComplexDouble);
  at::Tensor W = at::empty(withTail(batchOf(A), {n}), complex);
  at::Tensor V =
      vectors ? emptyColumnMajor(withTail(batchOf(A), {n, n}), complex) : at::empty({0}, complex);
  if (A.numel() == 0) return std::make_pair(W, V);
  at::Tensor work = columnMajorCopy(A);
  at::Tensor info = at::zeros(batchOf(A), A.options().dtype(at::kInt));
  flagosLinalgArray none{};
  if (!ok(t->geev(streamOf(A), dtypeOf(A), vectors ? 1 : 0, batchCount(A), n, matrixArg(work),
                  vectorArg(W), vectors ? matrixArg(V) : none, info.data_ptr<int32_t>()),
          "linalg geev"))
    return std::nullopt;
  at::_linalg_check_errors(info, "torch.linalg.eig", A.dim() == 2);
  return std::make_pair(W, V);
}

// linalg_eig(self) -> (eigenvalues, eigenvectors).
bool eig(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  auto wv = eigOf(a[0].toTensor(), true);
  if (!wv) return false;
  replaceArgs(stack, kArgs, {wv->first, wv->second});
  return true;
}

// _linalg_eigvals(self) -> eigenvalues.
bool eigvals(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  auto wv = eigOf(a[0].toTensor(), false);
  if (!wv) return false;
  replaceArgs(stack, kArgs, {wv->first});
  return true;
}

}  // namespace

void addLinalgOrthogonalComposites(Register add) {
  add("geqrf", geqrf, 0);
  add("householder_product", householderProduct, 0);
  add("ormqr", ormqr, 0);
  add("linalg_qr", qr, 0);
  add("linalg_svd", svd, 0);
  add("linalg_eigh", eigh, 0);
  add("linalg_eig", eig, 0);
  add("linalg_eigvals", eigvals, 0);
}

}  // namespace flagos::composite
