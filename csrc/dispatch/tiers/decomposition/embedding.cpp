// embedding_dense_backward as one index_add (Note [Composite kernels]):
// each looked-up row's gradient is added into its weight row; rows looked up
// through padding_idx get none, as on CPU. scale_grad_by_freq goes to the
// host tier.
#include <ATen/ATen.h>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
//   scale_grad_by_freq) -> Tensor
bool embeddingDenseBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isInt() || !a[3].isInt() ||
      !a[4].isBool() || a[4].toBool())
    return false;
  const at::Tensor dy = a[0].toTensor(), indices = a[1].toTensor();
  const int64_t num_weights = a[2].toInt(), padding_idx = a[3].toInt();
  if (!usableFirst(dy) || !indices.defined() || indices.device() != dy.device() ||
      (indices.scalar_type() != at::kLong && indices.scalar_type() != at::kInt) ||
      num_weights < 0 || dy.dim() != indices.dim() + 1)
    return false;
  const int64_t width = dy.size(-1);
  const at::Tensor flat = indices.reshape({-1});
  at::Tensor rows = dy.reshape({-1, width});
  if (padding_idx >= 0) rows = rows * flat.ne(padding_idx).unsqueeze(1).to(dy.scalar_type());
  at::Tensor grad = at::zeros({num_weights, width}, dy.options());
  grad.index_add_(0, flat, rows);
  replaceArgs(stack, kArgs, {grad});
  return true;
}

}  // namespace

void addEmbeddingComposites(Register add) {
  add("embedding_dense_backward", embeddingDenseBackward, false);
}

}  // namespace flagos::composite
