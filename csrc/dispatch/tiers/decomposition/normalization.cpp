// Batch and layer normalization from reductions and pointwise operators
// (Note [Composite kernels]): native_batch_norm (training and inference,
// running statistics updated in place as CPU does) and its _legit forms,
// native_layer_norm and both backwards. Each step is a catalog operator, so a backend with a
// kernel generator runs them all on the device.
//
// The formulas are ATen's (Normalization.cpp, layer_norm_kernel.cpp):
//   forward   xhat = (x - mean) * rstd, rstd = 1/sqrt(biased var + eps)
//   backward  dx = rstd * (dy' - mean(dy') - xhat * mean(dy' * xhat)),
//             dy' = dy * weight; in inference batch norm dx = dy' * rstd.
#include <ATen/ATen.h>

#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// Every dim but the channel dim 1 (batch norm reduces over these).
std::vector<int64_t> allButChannels(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// (C) -> (1, C, 1, ...) so it broadcasts over x.
at::Tensor perChannel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = v.size(0);
  return v.view(shape);
}

// A per-channel vector of x: undefined, or (C) like x.
bool channelVector(const at::Tensor& v, const at::Tensor& x, bool required) {
  if (!v.defined()) return !required;
  return usableLike(v, x) && v.dim() == 1 && v.size(0) == x.size(1);
}

// native_batch_norm(input, weight, bias, running_mean, running_var,
//                   training, momentum, eps) -> (out, save_mean, save_invstd)
bool batchNorm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 8;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[5].isBool() || !a[6].isDouble() || !a[7].isDouble())
    return false;
  const at::Tensor x = a[0].toTensor(), weight = optTensor(a[1]), bias = optTensor(a[2]);
  at::Tensor running_mean = optTensor(a[3]), running_var = optTensor(a[4]);
  const bool training = a[5].toBool();
  const double momentum = a[6].toDouble(), eps = a[7].toDouble();
  if (!usableFirst(x) || x.dim() < 2 || !channelVector(weight, x, false) ||
      !channelVector(bias, x, false) || !channelVector(running_mean, x, !training) ||
      !channelVector(running_var, x, !training))
    return false;
  const int64_t n = x.numel() / x.size(1);
  // CPU raises for a single value per channel in training: let it.
  if (training && n <= 1) return false;

  at::Tensor mean, invstd, save_mean, save_invstd;
  if (training) {
    const std::vector<int64_t> dims = allButChannels(x);
    mean = x.mean(dims);
    const at::Tensor centered = x - perChannel(mean, x);
    const at::Tensor var = (centered * centered).mean(dims);
    invstd = (var + eps).rsqrt();
    if (running_mean.defined()) running_mean.mul_(1 - momentum).add_(mean, momentum);
    if (running_var.defined())
      running_var.mul_(1 - momentum).add_(var, momentum * n / static_cast<double>(n - 1));
    save_mean = mean;
    save_invstd = invstd;
  } else {
    mean = running_mean;
    invstd = (running_var + eps).rsqrt();
    save_mean = at::empty({0}, x.options());
    save_invstd = at::empty({0}, x.options());
  }
  at::Tensor out = (x - perChannel(mean, x)) * perChannel(invstd, x);
  if (weight.defined()) out.mul_(perChannel(weight, x));
  if (bias.defined()) out.add_(perChannel(bias, x));
  replaceArgs(stack, kArgs, {out, save_mean, save_invstd});
  return true;
}

// _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum,
//   eps): native_batch_norm without running statistics (CPU runs the same
//   function with them undefined). The stack gets two Nones for them, and
//   loses them again if batchNorm declines, so the next tier sees the call
//   as it came.
bool batchNormNoStats(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  constexpr int kArgs = 6;
  if (stack->size() < kArgs) return false;
  stack->insert(stack->end() - 3, 2, c10::IValue());  // before training
  if (batchNorm(op, stack)) return true;
  stack->erase(stack->end() - 5, stack->end() - 3);
  return false;
}

// native_batch_norm_backward(grad_out, input, weight, running_mean,
//   running_var, save_mean, save_invstd, train, eps, output_mask)
bool batchNormBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 10;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[7].isBool() || !a[8].isDouble() ||
      !a[9].isBoolList())
    return false;
  const at::Tensor dy = a[0].toTensor(), x = a[1].toTensor(), weight = optTensor(a[2]);
  const at::Tensor running_mean = optTensor(a[3]), running_var = optTensor(a[4]);
  const at::Tensor save_mean = optTensor(a[5]), save_invstd = optTensor(a[6]);
  const bool train = a[7].toBool();
  const double eps = a[8].toDouble();
  const std::vector<bool> mask = a[9].toBoolList().vec();
  if (mask.size() != 3 || !usableFirst(x) || x.dim() < 2 || !usableLike(dy, x) ||
      !dy.sizes().equals(x.sizes()) || !channelVector(weight, x, false) ||
      // Inference passes empty save_* tensors (the forward returned those).
      (train && (!channelVector(save_mean, x, true) || !channelVector(save_invstd, x, true))) ||
      (!train && (!channelVector(running_mean, x, true) || !channelVector(running_var, x, true))))
    return false;
  const at::Tensor mean = train ? save_mean : running_mean;
  const at::Tensor invstd = train ? save_invstd : (running_var + eps).rsqrt();
  const std::vector<int64_t> dims = allButChannels(x);
  const at::Tensor xhat = (x - perChannel(mean, x)) * perChannel(invstd, x);

  at::Tensor dx, dweight, dbias;
  if (mask[0]) {
    const at::Tensor scale = weight.defined() ? invstd * weight : invstd;
    if (train) {
      const at::Tensor dy_mean = perChannel(dy.mean(dims), x);
      const at::Tensor dot_mean = perChannel((dy * xhat).mean(dims), x);
      dx = (dy - dy_mean - xhat * dot_mean) * perChannel(scale, x);
    } else {
      dx = dy * perChannel(scale, x);
    }
  }
  if (mask[1]) dweight = (dy * xhat).sum(dims);
  if (mask[2]) dbias = dy.sum(dims);
  replaceArgs(stack, kArgs, {dx, dweight, dbias});
  return true;
}

// Layer norm's normalized dims: the last normalized_shape.size() dims of x,
// which must equal normalized_shape; false otherwise.
bool normalizedDims(const at::Tensor& x, const c10::IValue& shape, std::vector<int64_t>* dims,
                    std::vector<int64_t>* lead) {
  if (!shape.isIntList()) return false;
  const std::vector<int64_t> ns = shape.toIntVector();
  const int64_t axis = x.dim() - static_cast<int64_t>(ns.size());
  if (ns.empty() || axis < 0) return false;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (x.size(axis + i) != ns[i]) return false;
    dims->push_back(axis + static_cast<int64_t>(i));
  }
  for (int64_t d = 0; d < axis; ++d) lead->push_back(d);
  return true;
}

// Weight and bias of layer norm: undefined, or normalized_shape like x.
bool affine(const at::Tensor& v, const at::Tensor& x, const std::vector<int64_t>& dims) {
  if (!v.defined()) return true;
  if (!usableLike(v, x) || v.dim() != static_cast<int64_t>(dims.size())) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (v.size(i) != x.size(dims[i])) return false;
  return true;
}

// Sum over the leading (not normalized) dims; none: the tensor itself.
at::Tensor sumLead(const at::Tensor& t, const std::vector<int64_t>& lead) {
  return lead.empty() ? t.clone() : t.sum(lead);
}

// native_layer_norm(input, normalized_shape, weight, bias, eps)
//   -> (out, mean, rstd)
bool layerNorm(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[4].isDouble()) return false;
  const at::Tensor x = a[0].toTensor(), weight = optTensor(a[2]), bias = optTensor(a[3]);
  std::vector<int64_t> dims, lead;
  // An empty batch is fine (every result is empty); empty rows are not
  // (CPU gives NaN statistics there).
  if (!usableFirst(x, /*allow_empty=*/true) || !normalizedDims(x, a[1], &dims, &lead) ||
      !affine(weight, x, dims) || !affine(bias, x, dims))
    return false;
  for (int64_t d : dims)
    if (x.size(d) == 0) return false;
  const at::Tensor mean = x.mean(dims, /*keepdim=*/true);
  const at::Tensor centered = x - mean;
  const at::Tensor rstd = ((centered * centered).mean(dims, true) + a[4].toDouble()).rsqrt();
  at::Tensor out = (centered * rstd).contiguous();
  if (weight.defined()) out.mul_(weight);
  if (bias.defined()) out.add_(bias);
  replaceArgs(stack, kArgs, {out, mean, rstd});
  return true;
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
//   weight, bias, output_mask) -> (grad_input, grad_weight, grad_bias)
bool layerNormBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 8;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[3].isTensor() || !a[4].isTensor() ||
      !a[7].isBoolList())
    return false;
  const at::Tensor dy = a[0].toTensor(), x = a[1].toTensor();
  const at::Tensor mean = a[3].toTensor(), rstd = a[4].toTensor(), weight = optTensor(a[5]);
  const std::vector<bool> mask = a[7].toBoolList().vec();
  std::vector<int64_t> dims, lead;
  if (mask.size() != 3 || !usableFirst(x, /*allow_empty=*/true) || !usableLike(dy, x) ||
      !dy.sizes().equals(x.sizes()) || !usableLike(mean, x) || !usableLike(rstd, x) ||
      !normalizedDims(x, a[2], &dims, &lead) || !affine(weight, x, dims) ||
      (mask[1] && !weight.defined()))
    return false;
  for (int64_t d : dims)
    if (x.size(d) == 0) return false;
  const at::Tensor xhat = (x - mean) * rstd;
  at::Tensor dx, dweight, dbias;
  if (mask[0]) {
    const at::Tensor dyw = weight.defined() ? dy * weight : dy;
    dx = (dyw - dyw.mean(dims, true) - xhat * (dyw * xhat).mean(dims, true)) * rstd;
  }
  if (mask[1]) dweight = sumLead(dy * xhat, lead);
  if (mask[2]) dbias = sumLead(dy, lead);
  replaceArgs(stack, kArgs, {dx, dweight, dbias});
  return true;
}

// _batch_norm_with_update(input, weight, bias, running_mean, running_var,
// momentum, eps): CPU's is training batch norm (the running stats updated
// in place) and an empty byte reserve.
bool batchNormWithUpdate(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 7;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[3].isTensor() || !a[4].isTensor() || !a[5].isDouble() ||
      !a[6].isDouble())
    return false;
  const at::Tensor x = a[0].toTensor(), weight = optTensor(a[1]), bias = optTensor(a[2]);
  const at::Tensor running_mean = a[3].toTensor(), running_var = a[4].toTensor();
  if (!usableFirst(x) || x.dim() < 2 || !channelVector(weight, x, false) ||
      !channelVector(bias, x, false) || !channelVector(running_mean, x, true) ||
      !channelVector(running_var, x, true) || x.numel() / x.size(1) <= 1)
    return false;  // CPU raises for one value per channel: let it
  auto [out, mean, invstd] =
      at::native_batch_norm(x, weight, bias, running_mean, running_var,
                            /*training=*/true, a[5].toDouble(), a[6].toDouble());
  replaceArgs(stack, kArgs, {out, mean, invstd, at::empty({0}, x.options().dtype(at::kByte))});
  return true;
}

}  // namespace

void addNormalizationComposites(Register add) {
  add("batch_norm", batchNorm, false);
  // _native_batch_norm_legit: native_batch_norm's arguments and results.
  add("batch_norm_legit", batchNorm, false);
  add("batch_norm_with_update", batchNormWithUpdate, false);
  add("batch_norm_legit_no_stats", batchNormNoStats, false);
  add("batch_norm_backward", batchNormBackward, false);
  add("layer_norm", layerNorm, false);
  add("layer_norm_backward", layerNormBackward, false);
}

}  // namespace flagos::composite
