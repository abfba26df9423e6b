// Linear-algebra operators built from other operators on the device:
// linalg_matrix_exp from GEMMs (Note [Matrix exponential by scaling and
// squaring]) and linalg_lstsq from the SVD (Note [Least squares from the
// SVD]), which takes the library slot's gesvd (Note [Linear algebra through
// the library slot]).
//
// Note [Matrix exponential by scaling and squaring]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// As CPU's kernel (LinearAlgebra.cpp, mexp): each matrix is scaled by 2^-s
// until its 1-norm is at most theta, its exponential is a degree-18 Taylor
// polynomial, and s squarings undo the scaling. theta is CPU's for degree
// 18 (3.01 for float32, 1.09 for float64: the truncation error then lies
// below the dtype's rounding). The polynomial runs in Horner's form (17
// batched GEMMs); each matrix keeps its own s (a matrix squares only while
// its s lasts), so the batch needs one host read: the largest s. A matrix
// with a non-finite norm takes the host tier.
//
// Note [Least squares from the SVD]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// linalg_lstsq(A, B, rcond, driver) returns the solution, the residuals,
// the rank and the singular values, which of them depending on the driver
// (CPU's drivers: gels, gelsy (the default), gelsd, gelss). All four give the
// minimum-norm least-squares solution of the numerical rank; from A = U S V^T
// it is X = V S+ U^T B, S+ inverting the singular values above rcond * s_max
// (rcond's default: eps * max(m, n)), and that count is the rank gelsy,
// gelsd and gelss report. So one SVD serves them all, with CPU's outputs per
// driver: rank for gelsy/gelsd/gelss, singular values for gelsd/gelss,
// residuals (||AX - B||^2 per column) when m > n, except for gelsy and, for
// gelsd/gelss, unless every matrix has rank n. gelsy decides the rank by a
// pivoted QR and gels assumes full rank, so a matrix of lower rank under
// those two takes the host tier (CPU's answer there is its algorithm's).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/linalg_slot.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

using linalg::batchOf;
using linalg::takes;
using linalg::withTail;

// linalg_matrix_exp(self) (Note [Matrix exponential by scaling and squaring]).
bool matrixExp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  constexpr int kDegree = 18;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A, /*square=*/true)) return false;
  const int64_t n = A.size(-1);
  if (A.numel() == 0 || n == 1) {
    replaceArgs(stack, kArgs, {A.numel() == 0 ? A.clone() : A.exp()});
    return true;
  }
  const double theta = A.scalar_type() == at::kFloat ? 3.010066362817634 : 1.090863719290036;
  const at::Tensor norm = A.abs().sum(-2).amax(-1);  // 1-norm of each matrix
  const at::Tensor s = at::clamp_min(at::ceil(at::log2(norm / theta)), 0);
  const double max_s = s.max().item<double>();
  if (!std::isfinite(max_s)) return false;
  const at::Tensor X = A * at::pow(2.0, -s).unsqueeze(-1).unsqueeze(-1);
  const at::Tensor I = at::eye(n, A.options());
  at::Tensor P = I + X / static_cast<double>(kDegree);
  for (int k = kDegree - 1; k >= 1; --k) P = I + at::matmul(X, P) / static_cast<double>(k);
  for (int64_t j = 1; j <= static_cast<int64_t>(max_s); ++j) {
    const at::Tensor squared = at::matmul(P, P);
    P = at::where(at::ge(s, static_cast<double>(j)).unsqueeze(-1).unsqueeze(-1), squared, P);
  }
  replaceArgs(stack, kArgs, {P});
  return true;
}

// linalg_lstsq(self, b, rcond, *, driver) (Note [Least squares from the SVD]).
bool lstsq(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !(a[2].isNone() || a[2].isDouble()) ||
      !(a[3].isNone() || a[3].isString()))
    return false;
  const at::Tensor A = a[0].toTensor(), B = a[1].toTensor();
  const std::string driver = a[3].isNone() ? "gelsy" : a[3].toStringRef();
  if (driver != "gels" && driver != "gelsy" && driver != "gelsd" && driver != "gelss")
    return false;  // CPU's error
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->gesvd || !takes(A) || !B.defined() || B.device() != A.device() ||
      B.scalar_type() != A.scalar_type() || B.dim() < 1)
    return false;
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  // CPU: b has A's rank (matrices) or one less (vectors).
  const int64_t dim_diff = A.dim() - B.dim();
  if (dim_diff < 0 || dim_diff > 1) return false;
  const bool vector_case = dim_diff == 1;
  const at::Tensor B2 = vector_case ? B.unsqueeze(-1) : B;
  if (B2.dim() < 2 || B2.size(-2) != m || m == 0 || n == 0) return false;
  std::vector<int64_t> batch;
  try {
    batch = at::infer_size(batchOf(A), batchOf(B2));
  } catch (const c10::Error&) {
    return false;
  }
  const at::Tensor Ab = A.expand(withTail(batch, {m, n}));
  const at::Tensor Bb = B2.expand(withTail(batch, {m, B2.size(-1)}));
  if (Bb.numel() == 0) return false;
  const double eps = A.scalar_type() == at::kFloat
                         ? static_cast<double>(std::numeric_limits<float>::epsilon())
                         : std::numeric_limits<double>::epsilon();
  // CPU's default rcond; a negative one means eps, as LAPACK takes it.
  double rcond = a[2].isNone() ? eps * static_cast<double>(std::max(m, n)) : a[2].toDouble();
  if (rcond < 0) rcond = eps;
  auto [U, S, Vh] = at::_linalg_svd(Ab, /*full_matrices=*/false, /*compute_uv=*/true);
  // Singular values above rcond * s_max: the numerical rank.
  const at::Tensor kept = at::gt(S, S.narrow(-1, 0, 1) * rcond);
  const at::Tensor rank = kept.sum(-1);
  const bool full_rank = at::equal(rank, at::full_like(rank, k));
  if (!full_rank && (driver == "gels" || driver == "gelsy")) return false;
  const at::Tensor inv = at::where(kept, S.reciprocal(), at::zeros_like(S));
  // X = V diag(inv) U^T B
  at::Tensor X = at::matmul(Vh.mT(), inv.unsqueeze(-1) * at::matmul(U.mT(), Bb));
  at::Tensor residuals = at::empty({0}, A.options());
  if (m > n && driver != "gelsy" && (driver == "gels" || full_rank))
    residuals = (at::matmul(Ab, X) - Bb).pow(2).sum(-2);
  const bool svd_driver = driver == "gelsd" || driver == "gelss";
  const at::Tensor rank_out =
      driver == "gels" ? at::empty({0}, A.options().dtype(at::kLong)) : rank.to(at::kLong);
  const at::Tensor values = svd_driver ? S : at::empty({0}, A.options());
  replaceArgs(stack, kArgs, {vector_case ? X.squeeze(-1) : X, residuals, rank_out, values});
  return true;
}

}  // namespace

void addLinalgFunctionComposites(Register add) {
  add("linalg_matrix_exp", matrixExp, 0);
  add("linalg_lstsq", lstsq, 0);
}

}  // namespace flagos::composite
