// _fused_adam_ / _fused_adamw_ from pointwise ops (Note [Composite kernels]):
// transformers' Trainer defaults to the fused AdamW (adamw_torch_fused), so
// without this every optimizer step went to the host.
//
// The update is ATen's fused kernel's, step for step (FusedAdamKernel.cpp):
// grads unscaled in place by grad_scale, skipped entirely when found_inf is
// set, negated for maximize; decoupled (AdamW) or L2 (Adam) weight decay;
// the moments by lerp and addcmul; amsgrad's running max; bias corrections
// from the step count. The step counts stay on the device: the corrections
// are computed there as 0-dim tensors, so no step reads back a value, except
// found_inf (one read per call, and only under a GradScaler).
#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

std::vector<at::Tensor> tensorsOf(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  if (!v.isTensorList()) return out;
  for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
  return out;
}

// (self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
//  beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf) -> ()
template <bool kDecoupled>
bool fusedAdam(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 15;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a) return false;
  for (int i = 0; i < 6; ++i)
    if (!a[i].isTensorList()) return false;
  for (int i = 6; i < 11; ++i)
    if (!a[i].isDouble()) return false;  // lr as a tensor (.tensor_lr) is not taken
  if (!a[11].isBool() || !a[12].isBool()) return false;
  const std::vector<at::Tensor> params = tensorsOf(a[0]), grads = tensorsOf(a[1]),
                                exp_avgs = tensorsOf(a[2]), exp_avg_sqs = tensorsOf(a[3]),
                                max_sqs = tensorsOf(a[4]), steps = tensorsOf(a[5]);
  const at::Tensor grad_scale = optTensor(a[13]), found_inf = optTensor(a[14]);
  const double lr = a[6].toDouble(), beta1 = a[7].toDouble(), beta2 = a[8].toDouble(),
               weight_decay = a[9].toDouble(), eps = a[10].toDouble();
  const bool amsgrad = a[11].toBool(), maximize = a[12].toBool();
  const size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n ||
      (amsgrad && max_sqs.size() != n))
    return false;  // the host tier raises CPU's error
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined() || !p.device().is_privateuseone() || !at::isFloatingType(p.scalar_type()) ||
        !usableLike(grads[i], p) || !usableLike(exp_avgs[i], p) || !usableLike(exp_avg_sqs[i], p) ||
        (amsgrad && !usableLike(max_sqs[i], p)) || !steps[i].defined() || steps[i].numel() != 1)
      return false;
  }
  if (found_inf.defined() && found_inf.item<double>() == 1.0) {  // GradScaler skipped the step
    torch::jit::drop(*stack, kArgs);
    return true;
  }
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params[i];
    at::Tensor g = grads[i];
    if (grad_scale.defined()) g.div_(grad_scale.to(p.device(), g.scalar_type()));  // kept: as ATen
    at::Tensor grad = maximize ? g.neg() : g;
    if (weight_decay != 0) {
      if (kDecoupled)
        p.mul_(1 - lr * weight_decay);
      else
        grad = grad.add(p, weight_decay);
    }
    exp_avgs[i].lerp_(grad, 1 - beta1);
    exp_avg_sqs[i].mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    // 1 - beta^step from the device-resident step count: exp(step * log(beta)).
    const at::Tensor step = steps[i].to(p.device(), at::kFloat).reshape({});
    const at::Tensor correction1 = 1 - (step * std::log(beta1)).exp();
    const at::Tensor correction2_sqrt = (1 - (step * std::log(beta2)).exp()).sqrt();
    at::Tensor second = exp_avg_sqs[i];
    if (amsgrad) {
      at::Tensor running_max = max_sqs[i];
      at::maximum_out(running_max, running_max, exp_avg_sqs[i]);
      second = max_sqs[i];
    }
    const at::Tensor denom = (second.sqrt() / correction2_sqrt.to(p.scalar_type())).add_(eps);
    const at::Tensor step_size = (lr / correction1).to(p.scalar_type());
    p.sub_(exp_avgs[i] * step_size / denom);
  }
  torch::jit::drop(*stack, kArgs);
  return true;
}

}  // namespace

void addOptimizerComposites(Register add) {
  add("fused_adam", fusedAdam<false>, false);
  add("fused_adamw", fusedAdam<true>, false);
}

}  // namespace flagos::composite
