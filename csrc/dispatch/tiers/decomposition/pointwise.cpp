// Pointwise operators whose generated kernel needs every optional argument
// (Note [Composite kernels]): clamp with one tensor bound missing becomes
// clamp_min / clamp_max, nan_to_num with a default bound gets the dtype's
// largest / lowest value, as CPU does.
#include <ATen/ATen.h>

#include <limits>

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
at::Tensor toComplexFloat(const at::Tensor& t) {
  return t.to(at::kComplexFloat);
}

bool complexHalfResult(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone();
}

// pow.Tensor_Tensor(self, exponent).
bool powComplexHalf(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), exponent = a[1].toTensor();
  if (!complexHalfResult(self) || at::result_type(self, exponent) != at::kComplexHalf) return false;
  const at::Tensor out = at::pow(toComplexFloat(self), toComplexFloat(exponent));
  replaceArgs(stack, kArgs, {out.to(at::kComplexHalf)});
  return true;
}

// pow.Tensor_Scalar(self, exponent).
bool powScalarComplexHalf(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isScalar()) return false;
  const at::Tensor self = a[0].toTensor();
  const at::Scalar exponent = a[1].toScalar();
  if (!complexHalfResult(self) || at::result_type(self, exponent) != at::kComplexHalf) return false;
  replaceArgs(stack, kArgs, {at::pow(toComplexFloat(self), exponent).to(at::kComplexHalf)});
  return true;
}

// pow.Scalar(self, exponent).
bool powScalarBaseComplexHalf(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isScalar() || !a[1].isTensor()) return false;
  const at::Scalar self = a[0].toScalar();
  const at::Tensor exponent = a[1].toTensor();
  if (!complexHalfResult(exponent) || at::result_type(exponent, self) != at::kComplexHalf)
    return false;
  replaceArgs(stack, kArgs, {at::pow(self, toComplexFloat(exponent)).to(at::kComplexHalf)});
  return true;
}

}  // namespace

void addPointwiseComposites(Register add) {
  add("clamp_tensor", clampTensor, /*in_place=*/true);
  add("nan_to_num", nanToNum, false);
  add("pow", powComplexHalf, /*in_place=*/true);  // See Note [Complex half pow]
  add("pow_scalar", powScalarComplexHalf, /*in_place=*/true);
  add("pow_scalar_base", powScalarBaseComplexHalf, false);
}

}  // namespace flagos::composite
