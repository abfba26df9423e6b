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

}  // namespace

void addPointwiseComposites(Register add) {
  add("clamp_tensor", clampTensor, /*in_place=*/true);
  add("nan_to_num", nanToNum, false);
}

}  // namespace flagos::composite
