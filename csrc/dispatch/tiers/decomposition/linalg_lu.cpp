// torch.linalg's LU family over the library slot's getrf and getrs (Note
// [Linear algebra through the library slot]): lu_factor_ex, lu, lu_unpack,
// lu_solve, solve_ex, inv_ex, det and slogdet, each as ATen's CPU kernel
// composes it (BatchLinearAlgebra.cpp, LinearAlgebra.cpp), with the same
// auxiliary outputs (Note [The LU autograd reads]).
//
// Note [The LU autograd reads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// _linalg_solve_ex, _linalg_det and _linalg_slogdet return the LU they
// factored, and their backward formulas solve with it, assuming the matrix
// CPU chose: some torch versions factor A^T when A is contiguous (it saves
// LAPACK a copy), some A itself, and not the same way for all three (torch
// 2.13: det and slogdet A^T, solve A). A composite that factored the other
// one would give right values and wrong gradients. So the first call asks
// CPU once, on a 2 x 2 contiguous matrix whose LU and whose transpose's LU
// differ, and each composite then factors what the installed torch does.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <array>
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
using linalg::emptyColumnMajor;
using linalg::matrixArg;
using linalg::ok;
using linalg::streamOf;
using linalg::takes;
using linalg::vectorArg;
using linalg::withTail;

struct Lu {
  at::Tensor LU, pivots, info;
};

// getrf of @p A (validated by the caller), or nullopt when the slot lacks
// or declines it. Empty inputs need no library call.
std::optional<Lu> luFactor(const at::Tensor& A) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->getrf) return std::nullopt;
  const int64_t m = A.size(-2), n = A.size(-1);
  const at::IntArrayRef batch = batchOf(A);
  Lu lu{columnMajorCopy(A),
        at::empty(withTail(batch, {std::min(m, n)}), A.options().dtype(at::kInt)),
        at::zeros(batch, A.options().dtype(at::kInt))};
  if (A.numel() == 0) return lu;
  if (!ok(t->getrf(streamOf(A), dtypeOf(A), batchCount(A), m, n, matrixArg(lu.LU),
                   vectorArg(lu.pivots), lu.info.data_ptr<int32_t>()),
          "linalg getrf"))
    return std::nullopt;
  return lu;
}

// X with op(A) X = B for the n x n LU factorization (@p LU, @p pivots) and
// @p B (..., n, nrhs), batch dims broadcast; or nullopt.
std::optional<at::Tensor> luSolve(const at::Tensor& LU, const at::Tensor& pivots,
                                  const at::Tensor& B, bool transpose) {
  const flagosLinalgTable* t = linalg::table();
  if (!t || !t->getrs) return std::nullopt;
  const int64_t n = LU.size(-1), nrhs = B.size(-1);
  std::vector<int64_t> batch;
  try {
    batch = at::infer_size(LU.sizes().slice(0, LU.dim() - 2), B.sizes().slice(0, B.dim() - 2));
  } catch (const c10::Error&) {
    return std::nullopt;  // CPU's error
  }
  at::Tensor X = columnMajorCopy(B.expand(withTail(batch, {n, nrhs})));
  if (X.numel() == 0) return X;
  const at::Tensor A = columnMajor(LU.expand(withTail(batch, {n, n})));
  const at::Tensor piv = pivots.expand(withTail(batch, {n})).contiguous();
  if (!ok(t->getrs(streamOf(B), dtypeOf(B), transpose ? FLAGOS_LINALG_OP_T : FLAGOS_LINALG_OP_N,
                   batchCount(X), n, nrhs, matrixArg(A), vectorArg(piv), matrixArg(X)),
          "linalg getrs"))
    return std::nullopt;
  return X;
}

// lu_solve(LU, pivots, B, left, adjoint) for validated operands: the left
// solve of op(A), or the right one through its transpose (X A = B is
// A^T X^T = B^T), with CPU's result strides (column-major when left).
std::optional<at::Tensor> luSolveSided(const at::Tensor& LU, const at::Tensor& pivots,
                                       const at::Tensor& B, bool left, bool adjoint) {
  std::optional<at::Tensor> X = luSolve(LU, pivots, left ? B : B.mT(), left == adjoint);
  if (!X) return std::nullopt;
  return left ? *X : X->mT();
}

// Which auxiliary LU (Note [The LU autograd reads]).
enum Aux { kSolveLu = 0, kDetLu = 1, kSlogdetLu = 2 };

// Whether CPU factors A^T for @p which when A is contiguous and real.
bool cpuFactorsTranspose(Aux which) {
  static const std::array<bool, 3> answers = [] {
    const at::Tensor A = at::arange(1, 5, at::TensorOptions().dtype(at::kDouble)).reshape({2, 2});
    const at::Tensor of_transpose = std::get<0>(at::linalg_lu_factor_ex(A.mT()));
    auto transposed = [&](const at::Tensor& LU) { return at::equal(LU, of_transpose); };
    return std::array<bool, 3>{
        transposed(std::get<1>(at::_linalg_solve_ex(A, at::ones({2, 1}, A.options())))),
        transposed(std::get<1>(at::_linalg_det(A))),
        transposed(std::get<2>(at::_linalg_slogdet(A)))};
  }();
  return answers[which];
}

// The sign of the permutation P of @p pivots: (-1)^(interchanges).
at::Tensor pivotSign(const at::Tensor& pivots) {
  return (at::arange(1, pivots.size(-1) + 1, pivots.options()) != pivots)
      .sum(-1, /*keepdim=*/false, at::kLong)
      .fmod_(2)
      .mul_(-2)
      .add_(1);
}

// linalg_lu_factor_ex(A, *, pivot, check_errors) -> (LU, pivots, info).
bool luFactorEx(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[2].isBool() || !a[1].toBool()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A)) return false;
  std::optional<Lu> lu = luFactor(A);
  if (!lu) return false;
  if (a[2].toBool()) at::_linalg_check_errors(lu->info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  replaceArgs(stack, kArgs, {lu->LU, lu->pivots, lu->info});
  return true;
}

// The permutations of @p pivots (..., k) for m rows, as int64 indices
// perm[..., i] = the row of A that lands in row i; nullopt for a pivot out of
// [1, m] (CPU's error). Built on the host: k integers per matrix.
std::optional<at::Tensor> permutations(const at::Tensor& pivots, int64_t m) {
  const at::Tensor piv = pivots.to(at::kCPU).contiguous();
  const int64_t k = piv.size(-1), batch = k == 0 ? 0 : piv.numel() / k;
  std::vector<int64_t> sizes(pivots.sizes().begin(), pivots.sizes().end() - 1);
  sizes.push_back(m);
  at::Tensor perm = at::arange(m, at::TensorOptions().dtype(at::kLong)).expand(sizes).contiguous();
  const int32_t* p = piv.data_ptr<int32_t>();
  int64_t* q = perm.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = p[b * k + i] - 1;
      if (j < 0 || j >= m) return std::nullopt;
      std::swap(q[b * m + i], q[b * m + j]);
    }
  }
  return perm.to(pivots.device());
}

// P, L, U of a factorization (the body of lu_unpack and linalg_lu).
std::optional<std::vector<at::Tensor>> unpack(const at::Tensor& LU, const at::Tensor& pivots,
                                              bool unpack_data, bool unpack_pivots) {
  const int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
  at::Tensor P = at::empty({0}, LU.options()), L = P, U = P;
  if (unpack_pivots) {
    std::optional<at::Tensor> perm = permutations(pivots, m);
    if (!perm) return std::nullopt;
    P = at::zeros(withTail(batchOf(LU), {m, m}), LU.options());
    P.scatter_(-2, perm->unsqueeze(-2), 1.0);
  }
  if (unpack_data) {
    L = LU.narrow(-1, 0, k).tril(-1);
    L.diagonal(0, -2, -1).fill_(1.0);
    U = LU.narrow(-2, 0, k).triu();
  }
  return std::vector<at::Tensor>{P, L, U};
}

// linalg_lu(A, *, pivot) -> (P, L, U).
bool linalgLu(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[1].toBool()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A)) return false;
  std::optional<Lu> lu = luFactor(A);
  if (!lu) return false;
  std::optional<std::vector<at::Tensor>> plu = unpack(lu->LU, lu->pivots, true, true);
  if (!plu) return false;
  replaceArgs(stack, kArgs, {(*plu)[0], (*plu)[1], (*plu)[2]});
  return true;
}

// lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots) -> (P, L, U).
bool luUnpack(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool()) return false;
  const at::Tensor LU = a[0].toTensor(), pivots = a[1].toTensor();
  if (!takes(LU) || pivots.device() != LU.device() || pivots.scalar_type() != at::kInt ||
      pivots.dim() != LU.dim() - 1 ||
      pivots.sizes().slice(0, pivots.dim() - 1) != LU.sizes().slice(0, LU.dim() - 2) ||
      pivots.size(-1) != std::min(LU.size(-2), LU.size(-1)))
    return false;  // CPU's errors
  std::optional<std::vector<at::Tensor>> plu = unpack(LU, pivots, a[2].toBool(), a[3].toBool());
  if (!plu) return false;
  replaceArgs(stack, kArgs, {(*plu)[0], (*plu)[1], (*plu)[2]});
  return true;
}

// Whether @p B fits the n x n system of @p A on the @p left / right side
// (CPU's checkInputsSolver; batch dims are checked by the broadcast).
bool solvable(const at::Tensor& A, const at::Tensor& B, bool left) {
  return B.defined() && B.device() == A.device() && B.scalar_type() == A.scalar_type() &&
         B.dim() >= 2 && (left ? B.size(-2) : B.size(-1)) == A.size(-1);
}

// linalg_lu_solve(LU, pivots, B, *, left, adjoint) -> X.
bool luSolveOp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isBool() ||
      !a[4].isBool())
    return false;
  const at::Tensor LU = a[0].toTensor(), pivots = a[1].toTensor(), B = a[2].toTensor();
  const bool left = a[3].toBool();
  if (!takes(LU, /*square=*/true) || !solvable(LU, B, left) || pivots.device() != LU.device() ||
      pivots.scalar_type() != at::kInt || pivots.dim() != LU.dim() - 1 ||
      pivots.sizes().slice(0, pivots.dim() - 1) != LU.sizes().slice(0, LU.dim() - 2) ||
      pivots.size(-1) != LU.size(-1))
    return false;
  std::optional<at::Tensor> X = luSolveSided(LU, pivots, B, left, a[4].toBool());
  if (!X) return false;
  replaceArgs(stack, kArgs, {*X});
  return true;
}

// _linalg_solve_ex(A, B, *, left, check_errors) -> (result, LU, pivots, info).
bool solveEx(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool()) return false;
  const at::Tensor A = a[0].toTensor(), B = a[1].toTensor();
  const bool left = a[2].toBool();
  if (!takes(A, /*square=*/true) || !B.defined() || B.dim() < 1) return false;
  // at::native::linalg_solve_is_vector_rhs: B is one vector per matrix.
  const bool vector_case =
      B.dim() == 1 || (B.dim() == A.dim() - 1 && B.sizes() == A.sizes().slice(0, A.dim() - 1));
  if (vector_case && !left) return false;  // CPU's error
  const at::Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
  if (!solvable(A, B_, left)) return false;
  const bool use_A_T = A.is_contiguous() && cpuFactorsTranspose(kSolveLu);
  std::optional<Lu> lu = luFactor(use_A_T ? A.mT() : A);
  if (!lu) return false;
  if (a[3].toBool()) at::_linalg_check_errors(lu->info, "torch.linalg.solve_ex", A.dim() == 2);
  std::optional<at::Tensor> X = luSolveSided(lu->LU, lu->pivots, B_, left, use_A_T);
  if (!X) return false;
  replaceArgs(stack, kArgs, {vector_case ? X->squeeze(-1) : *X, lu->LU, lu->pivots, lu->info});
  return true;
}

// linalg_inv_ex(A, *, check_errors) -> (inverse, info): A X = I.
bool invEx(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A, /*square=*/true)) return false;
  std::optional<Lu> lu = luFactor(A);
  if (!lu) return false;
  const at::Tensor eye = linalg::identity(batchOf(A), A.size(-1), A.options());
  std::optional<at::Tensor> X = luSolve(lu->LU, lu->pivots, eye, false);
  if (!X) return false;
  if (a[1].toBool()) at::_linalg_check_errors(lu->info, "linalg.inv_ex", A.dim() == 2);
  replaceArgs(stack, kArgs, {*X, lu->info});
  return true;
}

// _linalg_det(A) -> (det, LU, pivots): sign(P) * prod(diag(U)).
bool det(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A, /*square=*/true)) return false;
  // det(A^T) = det(A): the LU of either, as CPU.
  std::optional<Lu> lu = luFactor(A.is_contiguous() && cpuFactorsTranspose(kDetLu) ? A.mT() : A);
  if (!lu) return false;
  // An empty product is 1 (0 x 0 matrices).
  at::Tensor d = A.size(-1) == 0
                     ? at::ones(batchOf(A), A.options())
                     : at::mul(pivotSign(lu->pivots), at::prod(lu->LU.diagonal(0, -2, -1), -1));
  replaceArgs(stack, kArgs, {d, lu->LU, lu->pivots});
  return true;
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots).
bool slogdet(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor A = a[0].toTensor();
  if (!takes(A, /*square=*/true)) return false;
  std::optional<Lu> lu =
      luFactor(A.is_contiguous() && cpuFactorsTranspose(kSlogdetLu) ? A.mT() : A);
  if (!lu) return false;
  const at::Tensor diag = lu->LU.diagonal(0, -2, -1);
  if (A.size(-1) == 0) {  // det 1: sign 1, log 0
    replaceArgs(stack, kArgs,
                {at::ones(batchOf(A), A.options()), at::zeros(batchOf(A), A.options()), lu->LU,
                 lu->pivots});
    return true;
  }
  at::Tensor sign = at::mul(diag.sgn().prod(-1), pivotSign(lu->pivots));
  at::Tensor logabsdet = diag.abs().log_().sum(-1);
  replaceArgs(stack, kArgs, {sign, logabsdet, lu->LU, lu->pivots});
  return true;
}

}  // namespace

void addLinalgLuComposites(Register add) {
  add("linalg_lu_factor", luFactorEx, 0);
  add("linalg_lu", linalgLu, 0);
  add("lu_unpack", luUnpack, 0);
  add("linalg_lu_solve", luSolveOp, 0);
  add("linalg_solve", solveEx, 0);
  add("linalg_inv", invEx, 0);
  add("linalg_det", det, 0);
  add("linalg_slogdet", slogdet, 0);
}

}  // namespace flagos::composite
