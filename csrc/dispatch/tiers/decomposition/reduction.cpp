// var and std from mean, pointwise and sum (Note [Composite kernels]):
// the two-pass formula CPU uses, sum((x - mean)^2) / max(0, N - correction),
// so results agree to rounding and N <= correction gives inf/NaN as there.
// linalg_vector_norm from abs, pow, sum, amax/amin: gradient clipping's
// norm (clip_grad_norm_, 1 call per parameter and step); norm through it.
// var_mean/std_mean as var/std with their mean; nansum, aminmax and trace
// from where, sum, amin/amax and diagonal; equal, count_nonzero and isin
// from comparisons and all/sum/any; renorm from linalg_vector_norm; histc
// from each element's bin and an accumulating index_put_.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// var.correction / std.correction(self, dim, correction, keepdim) and
// var_mean / std_mean, which also return the mean (kWithMean).
template <bool kStd, bool kWithMean>
bool varianceLike(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[3].isBool() || !(a[1].isNone() || a[1].isIntList()) ||
      !(a[2].isNone() || a[2].isScalar()))
    return false;
  const at::Tensor self = a[0].toTensor();
  // Empty: mean 0/0 and sum 0 give CPU's NaN (the bridge warns as CPU does,
  // argument_checks.cpp).
  if (!usableFirst(self, /*allow_empty=*/true) || self.dim() == 0) return false;
  std::vector<int64_t> dims = a[1].isNone() ? std::vector<int64_t>() : a[1].toIntVector();
  if (dims.empty())  // None or []: every dim
    for (int64_t d = 0; d < self.dim(); ++d) dims.push_back(d);
  std::vector<bool> seen(self.dim(), false);
  int64_t count = 1;
  for (int64_t& d : dims) {
    d = wrapDim(d, self.dim());
    if (d < 0 || seen[d]) return false;  // CPU raises
    seen[d] = true;
    count *= self.size(d);
  }
  const double correction = a[2].isNone() ? 1.0 : a[2].toScalar().toDouble();
  const bool keepdim = a[3].toBool();
  const at::Tensor mean = self.mean(dims, /*keepdim=*/true);
  const at::Tensor centered = self - mean;
  at::Tensor out = (centered * centered).sum(dims, keepdim) /
                   std::max(0.0, static_cast<double>(count) - correction);
  if (kStd) out = out.sqrt();
  if (kWithMean) {
    at::Tensor m = mean;
    std::sort(dims.begin(), dims.end());  // squeezed from the last dim down
    if (!keepdim)
      for (auto d = dims.rbegin(); d != dims.rend(); ++d) m = m.squeeze(*d);
    replaceArgs(stack, kArgs, {out, m});
  } else {
    replaceArgs(stack, kArgs, {out});
  }
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
    d = wrapDim(d, std::max<int64_t>(self.dim(), 1));
    if (d < 0) return false;
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

// norm.ScalarOpt_dim(self, p, dim, keepdim): linalg_vector_norm's (p None
// is 2), as CPU's norm computes it.
bool norm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !(a[1].isNone() || a[1].isScalar()) || !a[2].isIntList() ||
      !a[3].isBool())
    return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.numel() == 0 ||
      !at::isFloatingType(self.scalar_type()))
    return false;
  const at::Scalar p = a[1].isNone() ? at::Scalar(2.0) : a[1].toScalar();
  const std::vector<int64_t> dims = a[2].toIntVector();
  replaceArgs(stack, kArgs, {at::linalg_vector_norm(self, p, dims, a[3].toBool())});
  return true;
}

// nansum(self, dim, keepdim, dtype): sum with NaN read as 0.
bool nansum(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !(a[1].isNone() || a[1].isIntList()) || !a[2].isBool() ||
      !(a[3].isNone() || a[3].isInt()))
    return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.is_complex()) return false;
  const at::Tensor x = at::isFloatingType(self.scalar_type())
                           ? at::where(self.isnan(), at::zeros({}, self.options()), self)
                           : self;
  const std::optional<std::vector<int64_t>> dims =
      a[1].isNone() ? std::nullopt : std::optional<std::vector<int64_t>>(a[1].toIntVector());
  const std::optional<at::ScalarType> dtype =
      a[3].isNone() ? std::nullopt : std::optional<at::ScalarType>(a[3].toScalarType());
  replaceArgs(stack, kArgs,
              {dims ? at::sum(x, *dims, a[2].toBool(), dtype)
                    : at::sum(x, at::OptionalIntArrayRef(), a[2].toBool(), dtype)});
  return true;
}

// aminmax(self, dim, keepdim) -> (amin, amax); an empty input is CPU's error.
bool aminmax(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !(a[1].isNone() || a[1].isInt()) || !a[2].isBool()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.numel() == 0 ||
      self.is_complex() || self.scalar_type() == at::kBool)
    return false;
  const bool keepdim = a[2].toBool();
  std::vector<int64_t> dims;
  if (a[1].isInt()) {
    const int64_t d = wrapDim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
    if (d < 0) return false;
    dims.push_back(d);
  }
  const at::Tensor x = self.dim() == 0 && !dims.empty() ? self.reshape({1}) : self;
  at::Tensor lo = at::amin(x, dims, keepdim), hi = at::amax(x, dims, keepdim);
  if (self.dim() == 0) lo = lo.reshape({}), hi = hi.reshape({});
  replaceArgs(stack, kArgs, {lo, hi});
  return true;
}

// trace(self) of a matrix: the sum of its diagonal (integers in int64).
bool trace(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const c10::IValue* a = argsOf(*stack, 1);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.dim() != 2 ||
      self.is_complex() || self.scalar_type() == at::kBool)
    return false;
  replaceArgs(stack, 1, {self.diagonal().sum()});
  return true;
}

// equal(self, other) -> bool: same sizes and every element equal (NaN is
// unequal). Two views of one memory, where CPU answers without looking,
// and different dtypes (CPU's error) take the host tier.
bool equal(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), other = a[1].toTensor();
  if (!self.defined() || !other.defined() || !self.device().is_privateuseone() ||
      other.device() != self.device() || other.scalar_type() != self.scalar_type() ||
      self.is_alias_of(other) || self.is_complex())
    return false;
  const bool same = self.sizes() == other.sizes() && at::eq(self, other).all().item<bool>();
  torch::jit::drop(*stack, kArgs);
  torch::jit::push(*stack, same);
  return true;
}

// count_nonzero.dim_IntList(self, dim) -> int64 counts.
bool countNonzero(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone() || self.is_complex()) return false;
  std::vector<int64_t> dims = a[1].toIntVector();
  std::vector<bool> seen(std::max<int64_t>(self.dim(), 1), false);
  for (int64_t& d : dims) {
    d = wrapDim(d, std::max<int64_t>(self.dim(), 1));
    if (d < 0 || seen[d]) return false;  // CPU raises
    seen[d] = true;
  }
  const at::Tensor nonzero = self.ne(0);
  replaceArgs(stack, kArgs,
              {dims.empty() ? nonzero.sum() : nonzero.sum(dims, /*keepdim=*/false, at::kLong)});
  return true;
}

// isin.Tensor_Tensor(elements, test_elements, assume_unique, invert): each
// element against every test element (one comparison each, as CPU's
// small-input path); a comparison table past 2^24 entries takes the host
// tier, whose sort-based path needs less memory.
bool isin(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool()) return false;
  const at::Tensor elements = a[0].toTensor(), test = a[1].toTensor();
  if (!elements.defined() || !test.defined() || !elements.device().is_privateuseone() ||
      test.device() != elements.device() || elements.is_complex() || test.is_complex() ||
      elements.numel() * test.numel() > (int64_t{1} << 24))
    return false;
  at::Tensor found;
  if (test.numel() == 0) {
    found = at::zeros(elements.sizes(), elements.options().dtype(at::kBool));
  } else {
    found = at::eq(elements.unsqueeze(-1), test.reshape({-1})).any(-1);
  }
  replaceArgs(stack, kArgs, {a[3].toBool() ? found.logical_not() : found});
  return true;
}

// renorm(self, p, dim, maxnorm): each slice along dim whose p-norm exceeds
// maxnorm scaled to maxnorm / (norm + 1e-7), as CPU's kernel does.
bool renorm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isScalar() || !a[2].isInt() || !a[3].isScalar()) return false;
  const at::Tensor self = a[0].toTensor();
  const double p = a[1].toScalar().toDouble(), maxnorm = a[3].toScalar().toDouble();
  if (!usableFirst(self, /*allow_empty=*/true) || self.dim() < 2 || !(p > 0) || !(maxnorm >= 0))
    return false;  // CPU's errors
  const int64_t dim = wrapDim(a[2].toInt(), self.dim());
  if (dim < 0) return false;
  std::vector<int64_t> reduce;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim) reduce.push_back(d);
  const at::Tensor norm = at::linalg_vector_norm(self, p, reduce, /*keepdim=*/true);
  const at::Tensor factor =
      at::where(norm > maxnorm, (norm + 1e-7).reciprocal() * maxnorm, at::ones_like(norm));
  replaceArgs(stack, kArgs, {self * factor});
  return true;
}

// histc(self, bins, min, max) of float or double: CPU's bin of x is
// (x - min) * bins / (max - min) in self's dtype, truncated, with x == max
// in the last bin; NaN and elements outside [min, max] count nowhere. With
// min == max the data's range is used (one sync), widened by 1 each way
// when it is a single value; a range that is not finite is CPU's error.
bool histc(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isScalar() || !a[3].isScalar()) return false;
  const at::Tensor self = a[0].toTensor();
  const int64_t bins = a[1].toInt();
  if (!self.defined() || !self.device().is_privateuseone() || bins <= 0 ||
      (self.scalar_type() != at::kFloat && self.scalar_type() != at::kDouble))
    return false;
  // CPU keeps the edges in self's dtype.
  const bool is_float = self.scalar_type() == at::kFloat;
  auto asType = [&](double v) { return is_float ? static_cast<double>(static_cast<float>(v)) : v; };
  double lo = asType(a[2].toScalar().toDouble()), hi = asType(a[3].toScalar().toDouble());
  if (lo > hi) return false;  // CPU's error
  if (lo == hi && self.numel() > 0) {
    const auto [least, most] = at::aminmax(self);
    lo = least.item<double>();
    hi = most.item<double>();
  }
  if (lo == hi) {
    lo = asType(lo - 1);
    hi = asType(hi + 1);
  }
  if (!std::isfinite(lo) || !std::isfinite(hi)) return false;  // CPU's error
  at::Tensor out = at::zeros({bins}, self.options());
  if (self.numel() > 0) {
    const at::Tensor x = self.reshape({-1});
    const at::Tensor range = at::scalar_tensor(hi, self.options()) - lo;  // in self's dtype
    const at::Tensor bin = ((x - lo) * bins / range).to(at::kLong).clamp(0, bins - 1);
    const at::Tensor inside = at::logical_and(x >= lo, x <= hi).to(self.scalar_type());
    out.index_put_({bin}, inside, /*accumulate=*/true);
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

void addReductionComposites(Register add) {
  add("histc", histc, false);
  add("var", varianceLike<false, false>, false);
  add("std", varianceLike<true, false>, false);
  add("var_mean", varianceLike<false, true>, false);
  add("std_mean", varianceLike<true, true>, false);
  add("linalg_vector_norm", vectorNorm, false);
  add("norm", norm, false);
  add("nansum", nansum, false);
  add("aminmax", aminmax, false);
  add("trace", trace, false);
  add("equal", equal, false);
  add("count_nonzero", countNonzero, false);
  add("isin", isin, false);
  add("renorm", renorm, /*in_place=*/true);
}

}  // namespace flagos::composite
