// Random operators from other random operators (Note [Composite kernels]):
//  - native_dropout as bernoulli_ + mul (ATen's native_dropout_cpu
//    arithmetic), for backends whose generated tier does not take it: it
//    has no Generator argument, so its CPU kernel (the host tier) would draw
//    from the CPU's default generator; bernoulli_ draws from the flagos one;
//  - normal with a tensor mean or std (torch.normal(mean, std)) as
//    normal_(0, 1) * std + mean, ATen's normal_out_impl.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <optional>

#include "dispatch/composite/composite.h"
#include "dispatch/composite/stack_args.h"

namespace flagos::composite {
namespace {

// native_dropout(input, p, train?) -> (out, mask).
bool nativeDropout(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isDouble()) return false;
  const at::Tensor input = a[0].toTensor();
  if (!input.defined() || !input.device().is_privateuseone()) return false;
  const double p = a[1].toDouble();
  const bool train = a[2].isNone() || a[2].toBool();
  at::Tensor out, mask;
  if (input.numel() == 0) {
    out = input;
    mask = at::empty_like(input, input.options());
  } else if (!train) {
    out = input.clone();
    mask = at::ones_like(input, input.options().dtype(at::kBool));
  } else {
    const double keep = 1. - p;
    const double scale = keep == 0 ? 0. : 1. / keep;
    mask = at::empty_like(input, input.options().dtype(at::kBool));
    mask.bernoulli_(keep);
    out = input.mul(mask).mul_(scale);
  }
  replaceArgs(stack, kArgs, {out, mask});
  return true;
}

// normal.Tensor_float(mean, std=1, generator), normal.float_Tensor(mean,
// std, generator), normal.Tensor_Tensor(mean, std, generator).
bool normalTensor(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || (!a[0].isTensor() && !a[1].isTensor())) return false;
  const at::Tensor mean = a[0].isTensor() ? a[0].toTensor() : at::Tensor();
  const at::Tensor std = a[1].isTensor() ? a[1].toTensor() : at::Tensor();
  const at::Tensor& ref = mean.defined() ? mean : std;
  if (!ref.device().is_privateuseone() || !at::isFloatingType(ref.scalar_type())) return false;
  if (mean.defined() && std.defined() && !usableLike(std, mean)) return false;
  // CPU's check (a sync, as CUDA's): a negative std goes to the host tier,
  // which raises CPU's error.
  if (std.defined() ? (std.numel() > 0 && std.lt(0).any().item<bool>()) : !(a[1].toDouble() >= 0))
    return false;
  std::optional<at::Generator> gen;
  if (a[2].isGenerator()) gen = a[2].toGenerator();
  const auto shape = mean.defined() && std.defined() ? at::infer_size(mean.sizes(), std.sizes())
                                                     : ref.sizes().vec();
  at::Tensor out = at::empty(shape, ref.options());
  out.normal_(0, 1, gen);
  if (std.defined())
    out.mul_(std);
  else
    out.mul_(a[1].toDouble());
  if (mean.defined())
    out.add_(mean);
  else
    out.add_(a[0].toDouble());
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

void addRandomComposites(Register add) {
  add("native_dropout", nativeDropout, false);
  add("normal_tensor_float", normalTensor, false);
  add("normal_float_tensor", normalTensor, false);
  add("normal_tensor_tensor", normalTensor, false);
}

}  // namespace flagos::composite
