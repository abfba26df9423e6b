// Cholesky and triangular systems over the library slot's potrf and trsm
// (Note [Linear algebra through the library slot]): linalg_cholesky_ex,
// cholesky, cholesky_solve, cholesky_inverse, triangular_solve and
// linalg_solve_triangular; the symmetric indefinite LDL^T (sytrf, sytrs):
// linalg_ldl_factor_ex and linalg_ldl_solve; as ATen's CPU kernels compose them
// (BatchLinearAlgebra.cpp).
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <optional>
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
using linalg::matrixArg;
using linalg::ok;
using linalg::streamOf;
using linalg::takes;
using linalg::withTail;

// The Cholesky factor of @p A in its @p upper or lower triangle, the other
// zeroed (CPU's result also after a failed factorization), and info; or
// nullopt.
std::optional<std::pair<at::Tensor, at::Tensor>> choleskyFactor(const at::Tensor& A, bool upper) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->potrf) return std::nullopt;
  at::Tensor L = columnMajorCopy(A);
  at::Tensor info = at::zeros(batchOf(A), A.options().dtype(at::kInt));
  if (A.numel() == 0) return std::make_pair(L, info);
  if (!ok(t->potrf(streamOf(A), dtypeOf(A), upper ? 1 : 0, batchCount(A), A.size(-1), matrixArg(L),
                   info.data_ptr<int32_t>()),
          "linalg potrf"))
    return std::nullopt;
  if (upper) {
    L.triu_();
  } else {
    L.tril_();
  }
  return std::make_pair(L, info);
}

// B becomes op(A)^-1 B (left) or B op(A)^-1 (right), in place: @p A
// triangular and column-major, @p B a column-major batch of the same count.
bool trsm(const at::Tensor& A, at::Tensor& B, bool right, bool upper, bool transpose, bool unit) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->trsm) return false;
  if (B.numel() == 0) return true;
  return ok(t->trsm(streamOf(B), dtypeOf(B), right ? 1 : 0, upper ? 1 : 0,
                    transpose ? FLAGOS_LINALG_OP_T : FLAGOS_LINALG_OP_N, unit ? 1 : 0,
                    batchCount(B), B.size(-2), B.size(-1), matrixArg(A), matrixArg(B)),
            "linalg trsm");
}

// linalg_cholesky_ex(A, *, upper, check_errors) -> (L, info).
bool choleskyEx(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[2].isBool()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A, /*square=*/true)) return false;
  auto factor = choleskyFactor(A, a[1].toBool());
  if (!factor) return false;
  if (a[2].toBool()) at::_linalg_check_errors(factor->second, "linalg.cholesky_ex", A.dim() == 2);
  replaceArgs(stack, kArgs, {factor->first, factor->second});
  return true;
}

// cholesky(self, upper): deprecated, and raises for a matrix that is not
// positive definite.
bool cholesky(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A, /*square=*/true)) return false;
  auto factor = choleskyFactor(A, a[1].toBool());
  if (!factor) return false;
  // CPU's warning, word for word (BatchLinearAlgebra.cpp).
  TORCH_WARN_ONCE(
      "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be ",
      "removed in a future PyTorch release.\n", "L = torch.cholesky(A)\n",
      "should be replaced with\n", "L = torch.linalg.cholesky(A)\n",
      "and\n"
      "U = torch.cholesky(A, upper=True)\n",
      "should be replaced with\n",
      "U = torch.linalg.cholesky(A).mH\n"
      "This transform will produce equivalent results for all valid (symmetric positive "
      "definite) inputs.");
  if (A.numel() > 0) at::_linalg_check_errors(factor->second, "cholesky", A.dim() == 2);
  replaceArgs(stack, kArgs, {factor->first});
  return true;
}

// _cholesky_solve_helper(self, A, upper): B and the factor, batch dims
// already broadcast by cholesky_solve. A = L L^T: X = L^-T (L^-1 B); A =
// U^T U: X = U^-1 (U^-T B).
bool choleskySolve(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool()) return false;
  const at::Tensor B = a[0].toTensor(), A = a[1].toTensor();
  const bool upper = a[2].toBool();
  if (!takes(A, /*square=*/true) || !takes(B) || B.scalar_type() != A.scalar_type() ||
      B.device() != A.device() || batchOf(B) != batchOf(A) || B.size(-2) != A.size(-1))
    return false;
  at::Tensor X = columnMajorCopy(B);
  const at::Tensor F = columnMajor(A);
  if (!trsm(F, X, false, upper, /*transpose=*/upper, false) ||
      !trsm(F, X, false, upper, /*transpose=*/!upper, false))
    return false;
  replaceArgs(stack, kArgs, {X});
  return true;
}

// cholesky_inverse(self, upper): (L L^T)^-1 = L^-T L^-1, or U^-1 U^-T, made
// exactly symmetric as LAPACK's potri leaves it. A zero on the factor's
// diagonal is CPU's error (potri's info): the host tier raises it.
bool choleskyInverse(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool()) return false;
  const at::Tensor F = a[0].toTensor();
  const bool upper = a[1].toBool();
  if (!takes(F, /*square=*/true)) return false;
  if (F.numel() > 0 && at::eq(F.diagonal(0, -2, -1), 0).any().item<bool>()) return false;
  at::Tensor inv = linalg::identity(batchOf(F), F.size(-1), F.options());
  const at::Tensor Fc = columnMajor(F);
  if (!trsm(Fc, inv, false, upper, false, false)) return false;  // inv = F^-1
  at::Tensor full = upper ? at::matmul(inv, inv.mT()) : at::matmul(inv.mT(), inv);
  at::Tensor sym = full.tril() + full.tril(-1).mT();
  replaceArgs(stack, kArgs, {columnMajorCopy(sym)});
  return true;
}

// triangular_solve(self, A, upper, transpose, unitriangular) ->
// (solution, cloned_coefficient), batch dims broadcast.
bool triangularSolve(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool() ||
      !a[4].isBool())
    return false;
  const at::Tensor B = a[0].toTensor(), A = a[1].toTensor();
  if (!takes(A, /*square=*/true) || !takes(B) || B.scalar_type() != A.scalar_type() ||
      B.device() != A.device() || B.size(-2) != A.size(-1))
    return false;
  std::vector<int64_t> batch;
  try {
    batch = at::infer_size(batchOf(B), batchOf(A));
  } catch (const c10::Error&) {
    return false;
  }
  at::Tensor X = columnMajorCopy(B.expand(withTail(batch, {B.size(-2), B.size(-1)})));
  at::Tensor M = columnMajorCopy(A.expand(withTail(batch, {A.size(-2), A.size(-1)})));
  if (!trsm(M, X, false, a[2].toBool(), a[3].toBool(), a[4].toBool())) return false;
  // CPU's warning, word for word (BatchLinearAlgebra.cpp).
  TORCH_WARN_ONCE(
      "torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangular",
      "and will be removed in a future PyTorch release.\n",
      "torch.linalg.solve_triangular has its arguments reversed and does not return a copy of one "
      "of the inputs.\n",
      "X = torch.triangular_solve(B, A).solution\n", "should be replaced with\n",
      "X = torch.linalg.solve_triangular(A, B).");
  replaceArgs(stack, kArgs, {X, M});
  return true;
}

// linalg_solve_triangular(self, B, *, upper, left, unitriangular).
bool solveTriangular(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool() ||
      !a[4].isBool())
    return false;
  const at::Tensor A = a[0].toTensor(), B = a[1].toTensor();
  const bool left = a[3].toBool();
  if (!takes(A, /*square=*/true) || !takes(B) || B.scalar_type() != A.scalar_type() ||
      B.device() != A.device() || (left ? B.size(-2) : B.size(-1)) != A.size(-1))
    return false;
  std::vector<int64_t> batch;
  try {
    batch = at::infer_size(batchOf(B), batchOf(A));
  } catch (const c10::Error&) {
    return false;
  }
  at::Tensor X = columnMajorCopy(B.expand(withTail(batch, {B.size(-2), B.size(-1)})));
  const at::Tensor M = columnMajor(A.expand(withTail(batch, {A.size(-2), A.size(-1)})));
  if (!trsm(M, X, !left, a[2].toBool(), false, a[4].toBool())) return false;
  replaceArgs(stack, kArgs, {X});
  return true;
}

// linalg_ldl_factor_ex(self, *, hermitian, check_errors) -> (LD, pivots,
// info): Bunch-Kaufman on the lower triangle, the upper left zero, as CPU.
bool ldlFactor(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[2].isBool()) return false;
  const at::Tensor A = a[0].toTensor();
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->sytrf || !takes(A, /*square=*/true)) return false;
  at::Tensor LD = columnMajorCopy(A.tril());
  at::Tensor pivots = at::empty(withTail(batchOf(A), {A.size(-1)}), A.options().dtype(at::kInt));
  at::Tensor info = at::zeros(batchOf(A), A.options().dtype(at::kInt));
  if (A.numel() > 0) {
    if (!linalg::ok(t->sytrf(streamOf(A), dtypeOf(A), 0, batchCount(A), A.size(-1), matrixArg(LD),
                             linalg::vectorArg(pivots), info.data_ptr<int32_t>()),
                    "linalg sytrf"))
      return false;
    if (a[2].toBool()) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", A.dim() == 2);
  }
  replaceArgs(stack, kArgs, {LD, pivots, info});
  return true;
}

// linalg_ldl_solve(LD, pivots, B, *, hermitian): same batch dims.
bool ldlSolve(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isBool())
    return false;
  const at::Tensor LD = a[0].toTensor(), pivots = a[1].toTensor(), B = a[2].toTensor();
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->sytrs || !takes(LD, /*square=*/true) || !takes(B) ||
      B.scalar_type() != LD.scalar_type() || B.device() != LD.device() ||
      batchOf(B) != batchOf(LD) || B.size(-2) != LD.size(-1) || pivots.device() != LD.device() ||
      pivots.scalar_type() != at::kInt || pivots.sizes() != LD.sizes().slice(0, LD.dim() - 1))
    return false;  // CPU's errors
  at::Tensor X = columnMajorCopy(B);
  if (X.numel() > 0) {
    const at::Tensor F = columnMajor(LD), piv = pivots.contiguous();
    if (!linalg::ok(t->sytrs(streamOf(B), dtypeOf(B), 0, batchCount(X), LD.size(-1), X.size(-1),
                             matrixArg(F), linalg::vectorArg(piv), matrixArg(X)),
                    "linalg sytrs"))
      return false;
  }
  replaceArgs(stack, kArgs, {X});
  return true;
}

}  // namespace

void addLinalgTriangularComposites(Register add) {
  add("linalg_cholesky", choleskyEx, 0);
  add("cholesky", cholesky, 0);
  add("cholesky_solve", choleskySolve, 0);
  add("cholesky_inverse", choleskyInverse, 0);
  add("triangular_solve", triangularSolve, 0);
  add("linalg_solve_triangular", solveTriangular, 0);
  add("linalg_ldl_factor", ldlFactor, 0);
  add("linalg_ldl_solve", ldlSolve, 0);
}

}  // namespace flagos::composite
