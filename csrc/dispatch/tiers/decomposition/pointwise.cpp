// Pointwise operators whose generated kernel needs every optional argument
// (Note [Composite kernels]): clamp with one tensor bound missing becomes
// clamp_min / clamp_max, nan_to_num with a default bound gets the dtype's
// largest / lowest value, as CPU does. Activations from pointwise
// operators: glu, prelu, log_sigmoid (with CPU's buffer, which its
// backward reads). conj_physical as a copy whose imaginary parts are negated;
// complex and polar as the two parts stacked and viewed as complex.
#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// clamp.Tensor(self, min, max) -> Tensor (clamp_.Tensor too: in_place).
bool clampTensor(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), lo = optTensor(a[1]), hi = optTensor(a[2]);
  // Neither bound: CPU raises.
  if (!self.defined() || !self.device().is_privateuseone() || (!lo.defined() && !hi.defined()))
    return false;
  at::Tensor out = lo.defined() ? at::clamp_min(self, lo) : self;
  if (hi.defined()) out = at::clamp_max(out, hi);
  replaceArgs(stack, kArgs, {out});
  return true;
}

// nan_to_num(self, nan, posinf, neginf) (its out= overload: the catalog's).
bool nanToNum(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableFirst(self, /*allow_empty=*/true)) return false;
  const bool f32 = self.scalar_type() == at::kFloat;
  const double max = f32 ? std::numeric_limits<float>::max() : std::numeric_limits<double>::max();
  auto value = [&](const c10::IValue& v, double otherwise) {
    return v.isNone() ? otherwise : v.toDouble();
  };
  const double nan = value(a[1], 0.0), posinf = value(a[2], max), neginf = value(a[3], -max);
  const at::Tensor out =
      at::where(self.isnan(), nan,
                at::where(self.isposinf(), posinf, at::where(self.isneginf(), neginf, self)));
  replaceArgs(stack, kArgs, {out});
  return true;
}

// Note [Complex half pow]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A float16 tensor raised to a complex number (or a complex number to a
// float16 tensor) computes in complex half. CPU has no pow kernel for it
// and raises, CUDA computes it in complex float and rounds the result
// (PyTorch's test_pow and test_complex_scalar_pow_tensor expect that of
// an accelerator). So do we: the operands go to complex float, pow runs
// there (on whichever tier takes complex), and the result is rounded to
// complex half. Any other dtype declines, to the tiers before and after.
// pow.Tensor_Tensor, pow.Tensor_Scalar and pow.Scalar: (self, exponent),
// either one a Scalar.
bool powComplexHalf(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !(a[0].isTensor() || a[1].isTensor())) return false;
  if (!a[a[0].isTensor() ? 0 : 1].toTensor().device().is_privateuseone()) return false;
  auto wide = [](const c10::IValue& v) { return v.toTensor().to(at::kComplexFloat); };
  at::ScalarType type;
  at::Tensor out;
  if (a[0].isTensor() && a[1].isTensor()) {
    type = at::result_type(a[0].toTensor(), a[1].toTensor());
    if (type == at::kComplexHalf) out = at::pow(wide(a[0]), wide(a[1]));
  } else if (a[0].isTensor()) {
    type = at::result_type(a[0].toTensor(), a[1].toScalar());
    if (type == at::kComplexHalf) out = at::pow(wide(a[0]), a[1].toScalar());
  } else {
    type = at::result_type(a[1].toTensor(), a[0].toScalar());
    if (type == at::kComplexHalf) out = at::pow(a[0].toScalar(), wide(a[1]));
  }
  if (type != at::kComplexHalf) return false;
  replaceArgs(stack, kArgs, {out.to(at::kComplexHalf)});
  return true;
}

// glu(self, dim): the first half times the sigmoid of the second; an odd
// size is CPU's error.
bool glu(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableFirst(self, /*allow_empty=*/true) || self.dim() == 0) return false;
  const int64_t dim = wrapDim(a[1].toInt(), self.dim());
  if (dim < 0) return false;
  const int64_t half = self.size(dim) / 2;
  if (self.size(dim) % 2 != 0) return false;
  replaceArgs(stack, kArgs,
              {self.narrow(dim, 0, half) * at::sigmoid(self.narrow(dim, half, half))});
  return true;
}

// _prelu_kernel(self, weight), weight already broadcastable: x > 0 ? x :
// weight * x.
bool preluKernel(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), weight = a[1].toTensor();
  if (!usableFirst(self, /*allow_empty=*/true) || !usableLike(weight, self)) return false;
  replaceArgs(stack, kArgs, {at::where(self > 0, self, weight * self)});
  return true;
}

// log_sigmoid_forward(self) -> (output, buffer), CPU's formulas: buffer =
// exp(-|x|), output = min(x, 0) - log1p(buffer).
bool logSigmoidForward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const c10::IValue* a = argsOf(*stack, 1);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableFirst(self, /*allow_empty=*/true)) return false;
  const at::Tensor buffer = at::exp(-self.abs());
  replaceArgs(stack, 1,
              {at::minimum(self, at::zeros({}, self.options())) - at::log1p(buffer), buffer});
  return true;
}

// conj_physical(self) (its out= and in-place forms): a copy, then the
// imaginary parts negated in place through a real view (torch.fft's ihfft2
// and ihfftn call it).
bool conjPhysical(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!self.defined() || !self.device().is_privateuseone()) return false;
  at::Tensor out = at::empty_like(self);
  out.copy_(self.resolve_conj());
  if (out.is_complex() && out.numel() > 0) at::view_as_real(out).select(-1, 1).neg_();
  replaceArgs(stack, kArgs, {out});
  return true;
}

// complex(real, imag) and polar(abs, angle): float or double parts of one
// dtype, broadcast together, stacked along a new last dim and viewed as
// complex (polar's parts are abs * cos(angle) and abs * sin(angle), as
// CPU's std::polar computes them).
template <bool kPolar>
bool fromParts(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor x = a[0].toTensor(), y = a[1].toTensor();
  if (!x.defined() || !x.device().is_privateuseone() || !usableLike(y, x) ||
      (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble))
    return false;  // CPU's errors (mixed dtypes, integers) and complex32
  for (int64_t d = 1; d <= std::min(x.dim(), y.dim()); ++d) {
    const int64_t m = x.size(-d), n = y.size(-d);
    if (m != n && m != 1 && n != 1) return false;
  }
  const std::vector<int64_t> shape = at::infer_size(x.sizes(), y.sizes());
  at::Tensor re = x, im = y;
  if (kPolar) {
    re = x * at::cos(y);
    im = x * at::sin(y);
  }
  const at::Tensor parts = at::stack({re.expand(shape), im.expand(shape)}, -1);
  replaceArgs(stack, kArgs, {at::view_as_complex(parts)});
  return true;
}

}  // namespace

void addPointwiseComposites(Register add) {
  add("clamp_tensor", clampTensor, /*in_place=*/true);
  add("nan_to_num", nanToNum, false);
  add("pow", powComplexHalf, /*in_place=*/true);  // See Note [Complex half pow]
  add("pow_scalar", powComplexHalf, /*in_place=*/true);
  add("pow_scalar_base", powComplexHalf, false);
  add("glu", glu, false);
  add("prelu", preluKernel, false);
  add("log_sigmoid_forward", logSigmoidForward, false);
  add("conj_physical", conjPhysical, /*in_place=*/true);
  add("complex", fromParts<false>, false);
  add("polar", fromParts<true>, false);
}

}  // namespace flagos::composite
