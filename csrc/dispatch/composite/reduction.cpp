// var and std from mean, pointwise and sum (Note [Composite kernels]):
// the two-pass formula CPU uses, sum((x - mean)^2) / max(0, N - correction),
// so results agree to rounding and N <= correction gives inf/NaN as there.
// cumsum as a log-step scan (Hillis-Steele): ceil(log2 L) shifted adds, each
// one generated kernel over the whole tensor, for every dtype.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "dispatch/composite/composite.h"
#include "dispatch/composite/stack_args.h"

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

// cumsum(self, dim, dtype) -> Tensor (cumsum_ too: in_place).
bool cumsum(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !(a[2].isNone() || a[2].isInt())) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone()) return false;
  const int64_t rank = std::max<int64_t>(self.dim(), 1);
  int64_t dim = a[1].toInt();
  if (dim < -rank || dim >= rank) return false;  // CPU raises
  if (dim < 0) dim += rank;
  // CPU: integral and bool inputs accumulate in int64 unless dtype says.
  const at::ScalarType dtype = !a[2].isNone()                                 ? a[2].toScalarType()
                               : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                              : self.scalar_type();
  at::Tensor x = self.to(dtype, /*non_blocking=*/false, /*copy=*/true);
  const int64_t n = self.dim() == 0 ? 1 : x.size(dim);
  for (int64_t s = 1; s < n; s *= 2) {
    at::Tensor y = x.clone();
    y.narrow(dim, s, n - s).add_(x.narrow(dim, 0, n - s));
    x = y;
  }
  replaceArgs(stack, kArgs, {x});
  return true;
}

}  // namespace

void addReductionComposites(Register add) {
  add("var", varianceLike<false>, false);
  add("std", varianceLike<true>, false);
  add("cumsum", cumsum, /*in_place=*/true);
}

}  // namespace flagos::composite
