// Losses from gathers, scatters, reductions and pointwise operators (Note
// [Composite kernels]): nll_loss / nll_loss2d, mse_loss, binary_cross_entropy,
// smooth_l1_loss and their backwards, huber_loss, multi_margin_loss,
// multilabel_margin_loss. Formulas are ATen's
// (aten/src/ATen/native/Loss.cpp, LossNLL.cpp).
//
// Note [Targets out of range]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CPU raises "Target N is out of bounds" for a class index outside
// [0, C) that is not ignore_index. The composite checks that with one
// device reduction read back on the host (a sync, like CPU's own check) and
// declines such calls, so the host tier raises CPU's exact error. Ignored
// rows gather class 0 and are masked out with where(), never multiplied by
// 0 (an infinite log-probability there must not become NaN).
#include <ATen/ATen.h>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// One nll call flattened to rows: scores (R, C), targets (R).
struct NllRows {
  at::Tensor scores, target, valid, safe_target, row_weight;
};

// self (N, C) | (C) [2d: (N, C, H, W)], target (N) | () [2d: (N, H, W)].
bool nllRows(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight,
             int64_t ignore_index, bool two_d, bool check_bounds, NllRows* r) {
  if (!usableFirst(self) || !target.defined() || target.device() != self.device() ||
      target.scalar_type() != at::kLong)
    return false;
  if (two_d) {
    if (self.dim() != 4 || target.dim() != 3 || target.size(0) != self.size(0) ||
        target.size(1) != self.size(2) || target.size(2) != self.size(3))
      return false;
    r->scores = self.permute({0, 2, 3, 1}).reshape({-1, self.size(1)});
  } else {
    if (self.dim() == 2 ? (target.dim() != 1 || target.size(0) != self.size(0))
                        : (self.dim() != 1 || target.dim() != 0))
      return false;
    r->scores = self.dim() == 1 ? self.unsqueeze(0) : self;
  }
  const int64_t classes = r->scores.size(1);
  if (weight.defined() &&
      (!usableLike(weight, self) || weight.dim() != 1 || weight.size(0) != classes))
    return false;
  r->target = target.reshape({-1});
  r->valid = r->target.ne(ignore_index);
  if (check_bounds) {  // Note [Targets out of range]
    const at::Tensor bad = (r->target.lt(0) | r->target.ge(classes)).logical_and(r->valid);
    if (bad.any().item<bool>()) return false;
  }
  r->safe_target = at::where(r->valid, r->target, at::zeros({}, r->target.options()));
  const at::Tensor w = weight.defined() ? weight.index_select(0, r->safe_target)
                                        : at::ones_like(r->target, self.options());
  r->row_weight = at::where(r->valid, w, at::zeros({}, self.options()));
  return true;
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction,
//   ignore_index) -> (output, total_weight)
template <bool kTwoD>
bool nllLoss(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[3].isInt() || !a[4].isInt()) return false;
  const at::Tensor self = a[0].toTensor(), target = a[1].toTensor();
  const int64_t reduction = a[3].toInt();
  NllRows r;
  if (reduction < kNone || reduction > kSum ||
      !nllRows(self, target, optTensor(a[2]), a[4].toInt(), kTwoD, /*check_bounds=*/true, &r))
    return false;
  const at::Tensor picked = r.scores.gather(1, r.safe_target.unsqueeze(1)).squeeze(1);
  const at::Tensor zero = at::zeros({}, self.options());
  const at::Tensor loss = at::where(r.valid, -(picked * r.row_weight), zero);
  at::Tensor output, total_weight;
  if (reduction == kNone) {
    output = loss.view(target.sizes());
    total_weight = zero;
  } else {
    total_weight = r.row_weight.sum();
    output = reduction == kSum ? loss.sum() : loss.sum() / total_weight;
  }
  replaceArgs(stack, kArgs, {output, total_weight});
  return true;
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight,
//   reduction, ignore_index, total_weight) -> grad_input
template <bool kTwoD>
bool nllLossBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 7;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[4].isInt() ||
      !a[5].isInt() || !a[6].isTensor())
    return false;
  const at::Tensor dy = a[0].toTensor(), self = a[1].toTensor(), total_weight = a[6].toTensor();
  const int64_t reduction = a[4].toInt();
  NllRows r;
  if (reduction < kNone || reduction > kSum || !usableLike(dy, self) ||
      !usableLike(total_weight, self) ||
      !nllRows(self, a[2].toTensor(), optTensor(a[3]), a[5].toInt(), kTwoD,
               /*check_bounds=*/true, &r))
    return false;
  if (reduction == kNone ? dy.numel() != r.target.numel() : dy.numel() != 1) return false;
  at::Tensor scale = reduction == kNone ? dy.reshape({-1}) : dy.reshape({});
  if (reduction == kMean) scale = scale / total_weight;
  const at::Tensor values = -(r.row_weight * scale);
  at::Tensor grad = at::zeros(r.scores.sizes(), self.options());
  grad.scatter_(1, r.safe_target.unsqueeze(1), values.unsqueeze(1));
  if (kTwoD) {
    grad = grad.view({self.size(0), self.size(2), self.size(3), self.size(1)})
               .permute({0, 3, 1, 2})
               .contiguous();
  } else {
    grad = grad.view(self.sizes());
  }
  replaceArgs(stack, kArgs, {grad});
  return true;
}

// The reduction of an elementwise loss.
at::Tensor reduced(const at::Tensor& loss, int64_t reduction) {
  return reduction == kNone ? loss : reduction == kSum ? loss.sum() : loss.mean();
}

// Elementwise loss arguments: self, target like self (same shape), a valid
// reduction.
bool elementwise(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  return usableFirst(self) && usableLike(target, self) && target.sizes().equals(self.sizes()) &&
         reduction >= kNone && reduction <= kSum;
}

// Gradient scale of a reduced loss: 1/numel for mean, 1 otherwise.
double norm(const at::Tensor& self, int64_t reduction) {
  return reduction == kMean ? 1.0 / static_cast<double>(self.numel()) : 1.0;
}

// mse_loss(self, target, reduction) -> Tensor
bool mseLoss(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isInt()) return false;
  const at::Tensor self = a[0].toTensor(), target = a[1].toTensor();
  const int64_t reduction = a[2].toInt();
  if (!elementwise(self, target, reduction)) return false;
  const at::Tensor d = self - target;
  replaceArgs(stack, kArgs, {reduced(d * d, reduction)});
  return true;
}

// mse_loss_backward(grad_output, self, target, reduction) -> grad_input
bool mseLossBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isInt()) return false;
  const at::Tensor dy = a[0].toTensor(), self = a[1].toTensor(), target = a[2].toTensor();
  const int64_t reduction = a[3].toInt();
  if (!elementwise(self, target, reduction) || !usableLike(dy, self) ||
      (reduction != kNone && dy.numel() != 1))
    return false;
  replaceArgs(stack, kArgs, {(self - target) * (2 * norm(self, reduction)) * dy});
  return true;
}

// binary_cross_entropy(self, target, weight, reduction) -> Tensor.
// CPU raises unless every input is in [0, 1] (NaN included): checked with
// one read-back like Note [Targets out of range]. Logs clamp at -100.
bool binaryCrossEntropy(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[3].isInt()) return false;
  const at::Tensor x = a[0].toTensor(), t = a[1].toTensor(), w = optTensor(a[2]);
  const int64_t reduction = a[3].toInt();
  if (!elementwise(x, t, reduction) || (w.defined() && !usableLike(w, x))) return false;
  if ((x.ge(0) & x.le(1)).logical_not().any().item<bool>()) return false;
  at::Tensor loss = (t - 1) * x.neg().log1p().clamp_min(-100) - t * x.log().clamp_min(-100);
  if (w.defined()) loss = loss * w;
  replaceArgs(stack, kArgs, {reduced(loss, reduction)});
  return true;
}

// binary_cross_entropy_backward(grad_output, self, target, weight, reduction)
bool binaryCrossEntropyBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[4].isInt()) return false;
  const at::Tensor dy = a[0].toTensor(), x = a[1].toTensor(), t = a[2].toTensor();
  const at::Tensor w = optTensor(a[3]);
  const int64_t reduction = a[4].toInt();
  if (!elementwise(x, t, reduction) || !usableLike(dy, x) || (w.defined() && !usableLike(w, x)))
    return false;
  constexpr double kEpsilon = 1e-12;  // ATen's, in Loss.cpp
  at::Tensor grad = dy * (x - t) / ((1 - x) * x).clamp_min(kEpsilon) * norm(x, reduction);
  if (w.defined()) grad = grad * w;
  replaceArgs(stack, kArgs, {grad});
  return true;
}

// smooth_l1_loss(self, target, reduction, beta) -> Tensor
bool smoothL1Loss(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isInt() || !a[3].isDouble()) return false;
  const at::Tensor x = a[0].toTensor(), t = a[1].toTensor();
  const int64_t reduction = a[2].toInt();
  const double beta = a[3].toDouble();
  if (!elementwise(x, t, reduction) || beta < 0) return false;
  const at::Tensor z = (x - t).abs();
  const at::Tensor loss = beta == 0 ? z : at::where(z < beta, z * z * (0.5 / beta), z - 0.5 * beta);
  replaceArgs(stack, kArgs, {reduced(loss, reduction)});
  return true;
}

// smooth_l1_loss_backward(grad_output, self, target, reduction, beta)
bool smoothL1LossBackward(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isInt() ||
      !a[4].isDouble())
    return false;
  const at::Tensor dy = a[0].toTensor(), x = a[1].toTensor(), t = a[2].toTensor();
  const int64_t reduction = a[3].toInt();
  const double beta = a[4].toDouble();
  if (!elementwise(x, t, reduction) || !usableLike(dy, x) || beta < 0) return false;
  // ATen's order of tests: x <= -beta first (so beta == 0, x == 0 gives -1).
  const at::Tensor d = x - t, g = dy * norm(x, reduction);
  const at::Tensor inner = beta == 0 ? at::zeros_like(d) : d / beta;
  const at::Tensor grad = at::where(d <= -beta, -g, at::where(d >= beta, g, inner * g));
  replaceArgs(stack, kArgs, {grad});
  return true;
}

// huber_loss(self, target, reduction, delta) -> Tensor
bool huberLoss(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isInt() || !a[3].isDouble()) return false;
  const at::Tensor x = a[0].toTensor(), t = a[1].toTensor();
  const int64_t reduction = a[2].toInt();
  const double delta = a[3].toDouble();
  if (!elementwise(x, t, reduction) || delta <= 0) return false;
  const at::Tensor z = (x - t).abs();
  const at::Tensor loss = at::where(z < delta, z * z * 0.5, (z - 0.5 * delta) * delta);
  replaceArgs(stack, kArgs, {reduced(loss, reduction)});
  return true;
}

// multi_margin_loss(self, target, p, margin, weight, reduction): per row,
// the sum over classes j != y of max(0, margin - x[y] + x[j])^p (times
// weight[y]) over C, as ATen's kernel (LossMultiMargin.cpp); a 1-D or 0-d
// self is one row. Targets out of range take the host tier (Note [Targets
// out of range]).
bool multiMarginLoss(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 6;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isScalar() || !a[3].isScalar() ||
      !a[5].isInt())
    return false;
  const at::Tensor self = a[0].toTensor(), target = a[1].toTensor(), weight = optTensor(a[4]);
  const int64_t p = a[2].toScalar().toLong(), reduction = a[5].toInt();
  if (!usableFirst(self, true) || self.dim() > 2 || target.scalar_type() != at::kLong ||
      target.device() != self.device() || (p != 1 && p != 2) || reduction < kNone ||
      reduction > kSum || (a[2].toScalar().isFloatingPoint() && a[2].toScalar().toDouble() != p))
    return false;
  const at::Tensor x = self.dim() == 2 ? self : self.reshape({1, -1});
  const int64_t rows = x.size(0), classes = x.size(1);
  if (target.numel() != rows || rows == 0 || classes == 0 ||
      (weight.defined() &&
       (!usableLike(weight, self) || weight.dim() != 1 || weight.numel() != classes)))
    return false;  // CPU's errors
  const at::Tensor t = target.reshape({-1, 1});
  if (at::logical_or(at::lt(t, 0), at::ge(t, classes)).any().item<bool>()) return false;
  const at::Tensor xy = x.gather(1, t);
  at::Tensor z = (a[3].toScalar().toDouble() - xy + x).clamp_min(0);
  if (p == 2) z = z * z;
  if (weight.defined()) z = z * weight.index_select(0, t.reshape({-1})).unsqueeze(1);
  z = z.scatter(1, t, 0.0);  // j == y contributes nothing
  const at::Tensor per_row = z.sum(1) / static_cast<double>(classes);
  at::Tensor out;
  if (reduction == kNone) {
    out = target.dim() == 0 ? per_row.reshape({}) : per_row;
  } else {
    out = reduction == kMean ? per_row.mean() : per_row.sum();
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output,
// is_target): each row's targets are target's entries before its first -1;
// the loss sums max(0, 1 - (x[t] - x[i])) over those targets t and the
// classes i that are not targets, over C (ATen's LossMultiLabelMargin.cpp,
// duplicates counted as often as listed). A target out of range is CPU's
// error: the host tier raises it.
bool multilabelMarginLoss(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isInt()) return false;
  const at::Tensor self = a[0].toTensor(), target = a[1].toTensor();
  const int64_t reduction = a[2].toInt();
  if (!usableFirst(self) || self.dim() > 2 || reduction < kNone || reduction > kSum ||
      target.scalar_type() != at::kLong || target.device() != self.device() ||
      target.sizes() != self.sizes())
    return false;
  const at::Tensor x = self.dim() == 2 ? self : self.reshape({1, -1});
  const at::Tensor t = target.reshape(x.sizes());
  const int64_t classes = x.size(1);
  // The targets before each row's first -1.
  const at::Tensor listed = at::ne(t, -1).to(at::kLong).cumprod(1).to(at::kBool);
  if (at::logical_and(listed, at::logical_or(at::lt(t, 0), at::ge(t, classes))).any().item<bool>())
    return false;
  const at::Tensor index = at::where(listed, t, at::full_like(t, classes));
  at::Tensor is_target = at::zeros({x.size(0), classes + 1}, x.options());
  is_target.scatter_(1, index, 1.0);
  is_target = is_target.narrow(1, 0, classes);
  const at::Tensor xt = x.gather(1, at::where(listed, t, at::zeros_like(t)));
  at::Tensor z = (1.0 - xt.unsqueeze(2) + x.unsqueeze(1)).clamp_min(0);
  z = z * listed.unsqueeze(2).to(x.scalar_type()) * (1.0 - is_target).unsqueeze(1);
  const at::Tensor per_row = z.sum({1, 2}) / static_cast<double>(classes);
  at::Tensor out;
  if (reduction == kNone) {
    out = self.dim() <= 1 ? per_row.reshape({}) : per_row;
  } else {
    out = reduction == kMean ? per_row.mean() : per_row.sum();
  }
  replaceArgs(stack, kArgs, {out, is_target.reshape(target.sizes()).contiguous()});
  return true;
}

}  // namespace

void addLossComposites(Register add) {
  add("nll_loss", nllLoss<false>, false);
  add("nll_loss_backward", nllLossBackward<false>, false);
  add("nll_loss2d", nllLoss<true>, false);
  add("nll_loss2d_backward", nllLossBackward<true>, false);
  add("mse_loss", mseLoss, false);
  add("mse_loss_backward", mseLossBackward, false);
  add("binary_cross_entropy", binaryCrossEntropy, false);
  add("binary_cross_entropy_backward", binaryCrossEntropyBackward, false);
  add("smooth_l1_loss", smoothL1Loss, false);
  add("smooth_l1_loss_backward", smoothL1LossBackward, false);
  add("huber_loss", huberLoss, false);
  add("multi_margin_loss", multiMarginLoss, false);
  add("multilabel_margin_loss", multilabelMarginLoss, false);
}

}  // namespace flagos::composite
