// Scans along a dim: cumsum, cumprod, logcumsumexp, cummax and cummin.
//
// Note [Log-step scans]
// ~~~~~~~~~~~~~~~~~~~~~
// Each scan is a Hillis-Steele scan: at step s = 1, 2, 4, ... every element
// i >= s combines with element i - s, so after ceil(log2 L) steps element i
// holds the combination of elements 0..i. Every step is one or a few of the
// device's own pointwise kernels over the whole tensor (Note [Composite
// kernels]), for any rank, dim and layout. The combinations are associative
// but regrouped, so sums and products round differently from CPU's
// sequential loop (within OpInfo's tolerances); 16-bit floats scan in
// float, as CPU accumulates them, and round once at the end. cummax and
// cummin regroup exactly: their combination below is CPU's loop's.
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// The scan of @p x along @p dim (Note [Log-step scans]). @p combine(later,
// earlier) folds the earlier partial result into the later one in place.
template <typename Combine>
at::Tensor logStepScan(at::Tensor x, int64_t dim, Combine combine) {
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  for (int64_t s = 1; s < n; s *= 2) {
    at::Tensor y = x.clone();
    at::Tensor later = y.narrow(dim, s, n - s);
    combine(later, x.narrow(dim, 0, n - s));
    x = y;
  }
  return x;
}

// The normalized @p dim of @p self, or -1 (CPU raises: the host tier).
int64_t scanDim(const at::Tensor& self, const c10::IValue& dim) {
  return dim.isInt() ? wrapDim(dim.toInt(), std::max<int64_t>(self.dim(), 1)) : -1;
}

// cumsum / cumprod(self, dim, dtype): CPU accumulates integral and bool
// inputs in int64 unless dtype says.
template <bool kProduct>
bool cumulative(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !(a[2].isNone() || a[2].isInt())) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.is_complex()) return false;
  const int64_t dim = scanDim(self, a[1]);
  if (dim < 0) return false;
  const at::ScalarType dtype = !a[2].isNone()                                 ? a[2].toScalarType()
                               : at::isIntegralType(self.scalar_type(), true) ? at::kLong
                                                                              : self.scalar_type();
  if (at::isComplexType(dtype)) return false;
  const bool narrow_float = dtype == at::kHalf || dtype == at::kBFloat16;
  const at::Tensor x = self.to(narrow_float ? at::kFloat : dtype, /*non_blocking=*/false,
                               /*copy=*/true);
  at::Tensor out = logStepScan(x, dim, [](at::Tensor& later, const at::Tensor& earlier) {
    if (kProduct) {
      later.mul_(earlier);
    } else {
      later.add_(earlier);
    }
  });
  replaceArgs(stack, kArgs, {narrow_float ? out.to(dtype) : out});
  return true;
}

// _logcumsumexp(self, dim): CPU's _log_add_exp_helper, min/max with NaN
// first, and equal infinities kept as they are (inf - inf would be NaN).
bool logcumsumexp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() ||
      !at::isFloatingType(self.scalar_type()))
    return false;
  const int64_t dim = scanDim(self, a[1]);
  if (dim < 0) return false;
  const bool narrow_float = self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble;
  const at::Tensor x = narrow_float ? self.to(at::kFloat) : self.clone();
  at::Tensor out = logStepScan(x, dim, [](at::Tensor& later, const at::Tensor& earlier) {
    const at::Tensor high = at::maximum(later, earlier), low = at::minimum(later, earlier);
    const at::Tensor sum = at::log1p(at::exp(low - high)) + high;
    later.copy_(at::where(low.ne(high).logical_or(low.isfinite()), sum, later));
  });
  replaceArgs(stack, kArgs, {narrow_float ? out.to(self.scalar_type()) : out});
  return true;
}

// _cummax_helper / _cummin_helper(self, values, indices, dim): fills the
// values and indices cummax/cummin allocated. CPU's loop takes element i
// when it is NaN, or when the running value is not NaN and element i is
// >= (cummax) or <= (cummin) it: so the last NaN, else the last of equal
// extremes. Folding an earlier partial result (a) into a later one (b)
// keeps b when b is NaN or, a not being NaN, b >= a: the same choice.
template <bool kMax>
bool cumulativeExtreme(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  at::Tensor values = a[1].toTensor(), indices = a[2].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.is_complex() ||
      self.scalar_type() == at::kBool || !usableLike(values, self) ||
      indices.device() != self.device() || indices.scalar_type() != at::kLong)
    return false;
  const int64_t dim = scanDim(self, a[3]);
  if (dim < 0) return false;
  const bool floating = at::isFloatingType(self.scalar_type());
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  std::vector<int64_t> along(std::max<int64_t>(self.dim(), 1), 1);
  along[dim] = n;
  at::Tensor v = self.dim() == 0 ? self.reshape({1}).clone() : self.clone();
  at::Tensor i = at::arange(n, indices.options()).view(along).expand(v.sizes()).contiguous();
  for (int64_t s = 1; s < n; s *= 2) {
    const at::Tensor va = v.narrow(dim, 0, n - s), ia = i.narrow(dim, 0, n - s);
    const at::Tensor vb = v.narrow(dim, s, n - s), ib = i.narrow(dim, s, n - s);
    at::Tensor keep = kMax ? vb.ge(va) : vb.le(va);
    if (floating) keep = vb.isnan().logical_or(va.isnan().logical_not().logical_and(keep));
    at::Tensor nv = v.clone(), ni = i.clone();
    nv.narrow(dim, s, n - s).copy_(at::where(keep, vb, va));
    ni.narrow(dim, s, n - s).copy_(at::where(keep, ib, ia));
    v = nv;
    i = ni;
  }
  if (values.sizes() != self.sizes()) values.resize_(self.sizes());
  if (indices.sizes() != self.sizes()) indices.resize_(self.sizes());
  values.copy_(v.view(self.sizes()));
  indices.copy_(i.view(self.sizes()));
  torch::jit::drop(*stack, kArgs);
  return true;
}

}  // namespace

void addScanComposites(Register add) {
  add("cumsum", cumulative<false>, /*in_place=*/true);
  add("cumprod", cumulative<true>, /*in_place=*/true);
  add("logcumsumexp", logcumsumexp, false);
  add("cummax", cumulativeExtreme<true>, false);
  add("cummin", cumulativeExtreme<false>, false);
}

}  // namespace flagos::composite
