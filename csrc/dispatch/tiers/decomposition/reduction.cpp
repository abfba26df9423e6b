// var and std from mean, pointwise and sum (Note [Composite kernels]):
// the two-pass formula CPU uses, sum((x - mean)^2) / max(0, N - correction),
// so results agree to rounding and N <= correction gives inf/NaN as there.
// linalg_vector_norm from abs, pow, sum, amax/amin: gradient clipping's
// norm (clip_grad_norm_, 1 call per parameter and step).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// var.correction / std.correction(self, dim, correction, keepdim)
template <bool kStd>
bool varianceLike(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[3].isBool() || !(a[1].isNone() || a[1].isIntList()) ||
      !(a[2].isNone() || a[2].isScalar()))
    return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableFirst(self) || self.dim() == 0) return false;
  std::vector<int64_t> dims = a[1].isNone() ? std::vector<int64_t>() : a[1].toIntVector();
  if (dims.empty())  // None or []: every dim
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  std::vector<bool> seen(self.dim(), false);
  int64_t count = 1;
  for (int64_t& d : dims) {
    if (d < -self.dim() || d >= self.dim()) return false;  // CPU raises
    if (d < 0) d += self.dim();
    if (seen[d]) return false;
    seen[d] = true;
    count *= self.size(d);
  }
  const double correction = a[2].isNone() ? 1.0 : a[2].toScalar().toDouble();
  const bool keepdim = a[3].toBool();
  const at::Tensor centered = self - self.mean(dims, /*keepdim=*/true);
  at::Tensor out = (centered * centered).sum(dims, keepdim) /
                   std::max(0.0, static_cast<double>(count) - correction);
  if (kStd) out = out.sqrt();
  replaceArgs(stack, kArgs, {out});
  return true;
}

// linalg_vector_norm(self, ord, dim, keepdim, dtype): CPU's definitions per
// ord (inf: max |x|, -inf: min |x|, 0: count of non-zeros, else
// sum(|x|^ord)^(1/ord), with 1 and 2 spelled out), computed in the result
// type (dtype, else self's; the half types in float and rounded once, as
// CPU accumulates them).
bool vectorNorm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isScalar() || !(a[2].isNone() || a[2].isIntList()) ||
      !a[3].isBool() || !(a[4].isNone() || a[4].isInt()))
    return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.numel() == 0) return false;
  const at::ScalarType out_type = a[4].isNone() ? self.scalar_type() : a[4].toScalarType();
  if (!at::isFloatingType(self.scalar_type()) || !at::isFloatingType(out_type)) return false;
  std::vector<int64_t> dims = a[2].isNone() ? std::vector<int64_t>() : a[2].toIntVector();
  for (int64_t& d : dims) {
    const int64_t rank = std::max<int64_t>(self.dim(), 1);
    if (d < -rank || d >= rank) return false;  // CPU raises
    if (d < 0) d += rank;
  }
  const bool keepdim = a[3].toBool();
  const double ord = a[1].toScalar().toDouble();
  const bool half = out_type == at::kHalf || out_type == at::kBFloat16;
  const at::Tensor x = self.to(half ? at::kFloat : out_type).abs();
  at::Tensor out;
  if (std::isinf(ord))
    out = ord > 0 ? x.amax(dims, keepdim) : x.amin(dims, keepdim);
  else if (ord == 0)
    out = x.ne(0).sum(dims, keepdim, x.scalar_type());
  else if (ord == 1)
    out = x.sum(dims, keepdim);
  else if (ord == 2)
    out = (x * x).sum(dims, keepdim).sqrt();
  else
    out = x.pow(ord).sum(dims, keepdim).pow(1.0 / ord);
  replaceArgs(stack, kArgs, {half ? out.to(out_type) : out});
  return true;
}

}  // namespace

void addReductionComposites(Register add) {
  add("var", varianceLike<false>, false);
  add("std", varianceLike<true>, false);
  add("linalg_vector_norm", vectorNorm, false);
}

}  // namespace flagos::composite
