// Random operators from other random operators (Note [Composite kernels]):
//  - native_dropout as bernoulli_ + mul (ATen's native_dropout_cpu
//    arithmetic), for backends whose generated tier does not take it: it
//    has no Generator argument, so its CPU kernel (the host tier) would draw
//    from the CPU's default generator; bernoulli_ draws from the flagos one;
//  - normal with a tensor mean or std (torch.normal(mean, std)) as
//    normal_(0, 1) * std + mean, ATen's normal_out_impl;
//  - randperm as the stable sort of random 63-bit keys (random_ on int64):
//    a uniformly random permutation (ties: one in 2^63/n^2), on the device;
//  - rrelu_with_noise (nn.RReLU): uniform_ noise for the non-positive
//    inputs, as the CPU kernel draws it, or leaky_relu when not training;
//  - multinomial as ATen's: without replacement (or one sample) the
//    exponential race, argmax/topk of p / Exp(1); with replacement one
//    uniform per sample against the row's cumulative distribution.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

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

bool randpermComposes(at::ScalarType dtype, int64_t n) {
  int64_t most = 0;  // the largest n the dtype numbers exactly
  switch (dtype) {
    case at::kLong:
      most = INT64_MAX;
      break;
    case at::kInt:
      most = int64_t{1} << 31;
      break;
    case at::kShort:
      most = int64_t{1} << 15;
      break;
    case at::kFloat:
      most = int64_t{1} << 24;
      break;
    case at::kDouble:
      most = int64_t{1} << 53;
      break;
    default:
      return false;  // small and 16-bit float types: the host tier
  }
  return n >= 0 && n <= most;
}

namespace {

// randperm(n, dtype, layout, device, pin_memory) and randperm.generator(n,
// generator, dtype, ...). Declines what CPU checks (n < 0, n beyond the
// integers the dtype holds exactly), so the host tier raises its error.
bool randperm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t num_args = op.schema().arguments().size();
  const c10::IValue* a = argsOf(*stack, num_args);
  const size_t k = num_args == 6 ? 1 : 0;  // the generator's slot
  if (!a || !a[0].isInt()) return false;
  const c10::IValue &dtype_arg = a[1 + k], &device_arg = a[3 + k];
  if (!device_arg.isDevice() || !device_arg.toDevice().is_privateuseone()) return false;
  const at::ScalarType dtype =
      dtype_arg.isNone() ? at::kLong : static_cast<at::ScalarType>(dtype_arg.toInt());
  const int64_t n = a[0].toInt();
  if (!randpermComposes(dtype, n)) return false;
  std::optional<at::Generator> gen;
  if (k == 1 && a[1].isGenerator()) gen = a[1].toGenerator();
  const at::TensorOptions options = at::TensorOptions().device(device_arg.toDevice());
  at::Tensor keys = at::empty({n}, options.dtype(at::kLong));
  keys.random_(gen);
  at::Tensor order = std::get<1>(keys.sort(std::optional<bool>(true), 0, false));
  replaceArgs(stack, num_args, {dtype == at::kLong ? order : order.to(dtype)});
  return true;
}

// multinomial(self, num_samples, replacement, generator). CPU's checks on
// the arguments and the probabilities (a sync, as CUDA's) decline to the
// host tier, which raises CPU's errors.
bool multinomial(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isBool()) return false;
  const at::Tensor self = a[0].toTensor();
  const int64_t n_sample = a[1].toInt();
  const bool replacement = a[2].toBool();
  if (!self.device().is_privateuseone() || !at::isFloatingType(self.scalar_type()) ||
      self.dim() < 1 || self.dim() > 2 || n_sample <= 0 || self.size(-1) == 0 ||
      (!replacement && n_sample > self.size(-1)))
    return false;
  const at::Tensor w = self.to(at::kFloat).contiguous();
  const at::Tensor total = w.sum(-1);
  const bool valid =
      ((w.max() < INFINITY) & (w.min() >= 0)).item<bool>() && (total > 0).all().item<bool>();
  if (!valid) return false;
  std::optional<at::Generator> gen;
  if (a[3].isGenerator()) gen = a[3].toGenerator();
  at::Tensor result;
  if (!replacement || n_sample == 1) {
    at::Tensor q = at::empty_like(w).exponential_(1, gen);
    q = w / q;
    result = n_sample == 1 ? q.argmax(-1, /*keepdim=*/true)
                           : std::get<1>(q.topk(n_sample, -1, /*largest=*/true, /*sorted=*/true));
  } else {
    // Comparisons of n_sample x categories per row: bounded, else the host.
    const int64_t rows = self.dim() == 2 ? self.size(0) : 1, cats = self.size(-1);
    if (rows * n_sample * cats > (int64_t{1} << 24)) return false;
    const at::Tensor w2 = w.view({rows, cats});
    const at::Tensor cdf = w2.cumsum(-1) / total.view({rows, 1});
    const at::Tensor u = at::empty({rows, n_sample}, w.options()).uniform_(0, 1, gen);
    // The first category whose cumulative probability exceeds u; never one
    // past the last category of nonzero weight (rounding of the cdf).
    at::Tensor idx = (u.unsqueeze(-1) >= cdf.unsqueeze(1)).sum(-1);
    const at::Tensor last = (cats - 1) - (w2.flip(-1) > 0).to(at::kInt).argmax(-1, true);
    result = at::minimum(idx, last);
    if (self.dim() == 1) result = result.view({n_sample});
  }
  replaceArgs(stack, kArgs, {result});
  return true;
}

// rrelu_with_noise(self, noise, lower, upper, training, generator) (its
// in-place form too); writes noise as CPU does: r where self <= 0, else 1.
bool rreluWithNoise(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 6;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isScalar() || !a[3].isScalar() ||
      !a[4].isBool())
    return false;
  const at::Tensor self = a[0].toTensor(), noise = a[1].toTensor();
  if (!self.device().is_privateuseone() || !at::isFloatingType(self.scalar_type())) return false;
  const double lower = a[2].toScalar().toDouble(), upper = a[3].toScalar().toDouble();
  if (!(lower <= upper)) return false;  // CPU's error, from the host tier
  at::Tensor out;
  if (!a[4].toBool()) {
    out = at::leaky_relu(self, (lower + upper) / 2);
  } else {
    if (!usableLike(noise, self) || noise.sizes() != self.sizes()) return false;
    std::optional<at::Generator> gen;
    if (a[5].isGenerator()) gen = a[5].toGenerator();
    const at::Tensor r = at::empty_like(self).uniform_(lower, upper, gen);
    const at::Tensor neg = self <= 0;
    noise.copy_(at::where(neg, r, at::ones_like(r)));
    out = at::where(neg, self * r, self);
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

void addRandomComposites(Register add) {
  add("rrelu_with_noise", rreluWithNoise, /*in_place=*/true);
  add("multinomial", multinomial, false);
  add("randperm", randperm, false);
  add("native_dropout", nativeDropout, false);
  add("normal_tensor_float", normalTensor, false);
  add("normal_float_tensor", normalTensor, false);
  add("normal_tensor_tensor", normalTensor, false);
}

}  // namespace flagos::composite
