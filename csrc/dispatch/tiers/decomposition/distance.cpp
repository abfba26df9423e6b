// Pairwise distances from device operators (Note [Composite kernels]):
// _cdist_forward and _pdist_forward, as CPU computes them. cdist with p = 2
// takes CPU's matrix-product form (||a||^2 + ||b||^2 - 2 a.b, clamped at 0,
// then sqrt: the same cat-and-matmul as ATen's _euclidean_dist) where CPU
// does (compute_mode 1, or the default with more than 25 rows on a side),
// and the direct |a - b| reduction otherwise: p = 0 counts the differing
// coordinates, p = inf takes their largest, other p the p-norm. pdist is
// the direct form over the row pairs i < j, in CPU's order. Past
// kMaxDifferences elements of the broadcast difference the host tier,
// which loops without materializing it, is the better deal.
#include <ATen/ATen.h>

#include <cmath>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

constexpr int64_t kMaxDifferences = int64_t{1} << 25;

// The p-norm over the last dim of |a - b| (a, b broadcast to ..., P, R, M).
at::Tensor directDistance(const at::Tensor& x1, const at::Tensor& x2, double p) {
  const at::Tensor diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs();
  if (p == 0) return at::ne(diff, 0).sum(-1).to(x1.scalar_type());
  if (std::isinf(p)) return diff.amax(-1);
  if (p == 1) return diff.sum(-1);
  if (p == 2) return diff.pow(2).sum(-1).sqrt();
  return diff.pow(p).sum(-1).pow(1.0 / p);
}

// ATen's _euclidean_dist.
at::Tensor euclidean(const at::Tensor& x1, const at::Tensor& x2) {
  const at::Tensor n1 = x1.pow(2).sum(-1, true), n2 = x2.pow(2).sum(-1, true);
  const at::Tensor a = at::cat({x1.mul(-2), n1, at::ones_like(n1)}, -1);
  const at::Tensor b = at::cat({x2, at::ones_like(n2), n2}, -1);
  return a.matmul(b.mT()).clamp_min_(0).sqrt_();
}

// _cdist_forward(x1, x2, p, compute_mode).
bool cdist(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isDouble() ||
      !(a[3].isNone() || a[3].isInt()))
    return false;
  const at::Tensor x1 = a[0].toTensor(), x2 = a[1].toTensor();
  const double p = a[2].toDouble();
  const int64_t mode = a[3].isNone() ? 0 : a[3].toInt();
  if (!usableFirst(x1, true) || !usableLike(x2, x1) || x1.dim() < 2 || x2.dim() < 2 ||
      x1.size(-1) != x2.size(-1) || !(p >= 0) || mode < 0 || mode > 2)
    return false;  // CPU's errors
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2);
  if (x1.numel() / std::max<int64_t>(r1, 1) * r1 * r2 > kMaxDifferences) return false;
  const bool mm = p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)));
  at::Tensor out = mm ? euclidean(x1, x2) : directDistance(x1, x2, p);
  replaceArgs(stack, kArgs, {out});
  return true;
}

// _pdist_forward(self, p): the distances of rows i < j, row-major.
bool pdist(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isDouble()) return false;
  const at::Tensor x = a[0].toTensor();
  const double p = a[1].toDouble();
  if (!usableFirst(x, true) || x.dim() != 2 || !(p >= 0)) return false;
  const int64_t n = x.size(0);
  if (n * n * x.size(1) > kMaxDifferences) return false;
  if (n < 2) {
    replaceArgs(stack, kArgs, {at::empty({0}, x.options())});
    return true;
  }
  const at::Tensor all = directDistance(x, x, p);
  const at::Tensor upper = at::triu(at::ones({n, n}, x.options().dtype(at::kBool)), 1);
  replaceArgs(stack, kArgs, {all.masked_select(upper)});
  return true;
}

}  // namespace

void addDistanceComposites(Register add) {
  add("cdist", cdist, 0);
  add("pdist", pdist, 0);
}

}  // namespace flagos::composite
