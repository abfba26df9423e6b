// Order statistics from a stable sort: median, nanmedian, kthvalue and
// mode, values and indices as CPU picks them; searchsorted and bucketize by
// counting comparisons.
//
// Note [Medians from a stable sort]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CPU's median partitions each row around element k with the order
// (value, then index), NaN above every number: the k-th element of a
// stable ascending sort (which puts NaNs last, in their order). So each
// row's answer is a gather of the sorted values and indices at one k:
//   median     k = (n - 1) / 2, or the first NaN (n - nans) when the row has one;
//   nanmedian  k = max(n - nans - 1, 0) / 2 (a row of NaNs gives its first);
//   kthvalue   k - 1.
// Where CPU's order leaves ties to its quickselect (kthvalue's equal values,
// a nanmedian row of NaNs), the index may differ; the value never does.
// Empty inputs and out-of-range arguments take the host tier and its error.
//
// Note [The mode from runs of a sorted row]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CPU's mode sorts each row's (value, index) pairs by value and walks the
// runs of equal values: the first longest run wins (so the smallest of
// equally frequent values), and its index is that of the run's last pair.
// On the device: a stable sort, the start of each element's run (a cummax
// of the positions where the value changes), each run's length at its last
// element, and the first maximum of those lengths. A stable sort ends each
// run with the largest index, which is what CPU's sort gives rows short
// enough for its insertion sort; over longer rows with repeated values
// CPU's unstable sort may leave another index of the same value last. Rows
// holding NaN (which no order ranks, and CPU's walk sees as runs of one)
// take the host tier.
//
// Note [Search by counting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// searchsorted and bucketize answer, for each value v, the position CPU's
// binary search ends at in its sorted row s: the number of elements with
// !(s >= v) (left) or !(s > v) (right). Over a sorted row without NaN that
// predicate holds on a prefix, so counting it (one broadcast comparison of
// every value with its whole row, then a sum) gives the same position, and
// a NaN value counts the whole row, as the search does. A row holding NaN
// breaks the prefix, so those calls (and mixed dtypes, shapes CPU refuses)
// take the host tier. A sorter first gathers the row into sorted order. The comparison costs rows x
// values elements: past kMaxCompared the host tier's binary search is the better deal.
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

enum class Pick { kMedian, kNanMedian, kMode };

// The values and indices at per-row position @p k (a long tensor with the
// size-1 dim @p dim) of @p self sorted along @p dim.
std::pair<at::Tensor, at::Tensor> pickSorted(const at::Tensor& self, int64_t dim,
                                             const at::Tensor& k, bool keepdim) {
  const auto [values, indices] = self.sort(/*stable=*/true, dim, /*descending=*/false);
  at::Tensor v = values.gather(dim, k), i = indices.gather(dim, k);
  if (!keepdim) {
    v = v.squeeze(dim);
    i = i.squeeze(dim);
  }
  return {v, i};
}

// k of Note [Medians from a stable sort] for each row along @p dim.
at::Tensor medianPosition(const at::Tensor& self, int64_t dim, Pick pick) {
  const int64_t n = self.size(dim);
  const at::Tensor nans = at::isnan(self).sum(dim, /*keepdim=*/true);
  if (pick == Pick::kNanMedian) return (nans.neg() + (n - 1)).clamp_min(0).div(2, "floor");
  return at::where(nans > 0, nans.neg() + n, at::full_like(nans, (n - 1) / 2));
}

bool usableOrdered(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() && t.numel() > 0 &&
         (at::isFloatingType(t.scalar_type()) || at::isIntegralType(t.scalar_type(), false));
}

// median(self) / nanmedian(self): the value over every element.
template <Pick kPick>
bool medianAll(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 1;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableOrdered(self)) return false;
  const at::Tensor flat = self.reshape({-1});
  const at::Tensor value = pickSorted(flat, 0, medianPosition(flat, 0, kPick), false).first;
  replaceArgs(stack, kArgs, {value});
  return true;
}

// An order statistic along a dim, (values, indices) in place of the @p kArgs
// arguments: @p self sorted stably along @p dim (a 0-d self as one element),
// and @p position(x, sorted_values) giving each row's k (a long tensor with
// the size-1 dim).
template <typename Position>
bool pickAlongDim(torch::jit::Stack* stack, int kArgs, const at::Tensor& self, int64_t dim,
                  bool keepdim, Position position) {
  const at::Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  const auto [values, indices] = x.sort(/*stable=*/true, dim, /*descending=*/false);
  const at::Tensor k = position(x, values);
  at::Tensor v = values.gather(dim, k), i = indices.gather(dim, k);
  if (self.dim() == 0) {
    v = v.reshape({});
    i = i.reshape({});
  } else if (!keepdim) {
    v = v.squeeze(dim);
    i = i.squeeze(dim);
  }
  replaceArgs(stack, kArgs, {v, i});
  return true;
}

// kthvalue(self, k, dim, keepdim) -> (values, indices).
bool kthvalue(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isInt() || !a[3].isBool()) return false;
  const at::Tensor self = a[0].toTensor();
  const int64_t dim = wrapDim(a[2].toInt(), std::max<int64_t>(self.dim(), 1));
  if (!usableOrdered(self) || dim < 0) return false;
  const int64_t k = a[1].toInt();
  if (k < 1 || k > (self.dim() == 0 ? 1 : self.size(dim))) return false;  // CPU's error
  return pickAlongDim(stack, kArgs, self, dim, a[3].toBool(),
                      [&](const at::Tensor& x, const at::Tensor&) {
                        std::vector<int64_t> shape = x.sizes().vec();
                        shape[dim] = 1;
                        return at::full(shape, k - 1, x.options().dtype(at::kLong));
                      });
}

// Each row's k for mode: Note [The mode from runs of a sorted row].
at::Tensor modePosition(const at::Tensor& values, int64_t dim) {
  const int64_t n = values.size(dim);
  std::vector<int64_t> along(values.dim(), 1);
  along[dim] = n;
  const at::Tensor pos = at::arange(n, values.options().dtype(at::kLong)).reshape(along);
  // changed[j]: element j + 1 starts a run, element j ends one.
  const at::Tensor changed = values.narrow(dim, 1, n - 1) != values.narrow(dim, 0, n - 1);
  std::vector<int64_t> one = values.sizes().vec();
  one[dim] = 1;
  const at::Tensor edge = at::ones(one, changed.options());
  const at::Tensor starts = at::cat({edge, changed}, dim), ends = at::cat({changed, edge}, dim);
  const at::Tensor run_start = std::get<0>(at::where(starts, pos, 0).cummax(dim));
  const at::Tensor length = at::where(ends, pos - run_start + 1, 0);
  return length.argmax(dim, /*keepdim=*/true);
}

// median.dim / nanmedian.dim / mode(self, dim, keepdim) -> (values, indices).
// A mode over NaN takes the host tier (Note [The mode from runs of a sorted row]).
template <Pick kPick>
bool alongDim(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isBool()) return false;
  const at::Tensor self = a[0].toTensor();
  const int64_t dim = wrapDim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  if (!usableOrdered(self) || dim < 0) return false;
  if (kPick == Pick::kMode && self.is_floating_point() && at::isnan(self).any().item<bool>())
    return false;
  return pickAlongDim(
      stack, kArgs, self, dim, a[2].toBool(), [&](const at::Tensor& x, const at::Tensor& values) {
        return kPick == Pick::kMode ? modePosition(values, dim) : medianPosition(x, dim, kPick);
      });
}

// Comparisons one search may make (Note [Search by counting]).
constexpr int64_t kMaxCompared = int64_t{1} << 24;

// The positions of @p values in the sorted rows of @p seq (1-D, or the same
// leading dims as values), or nullopt when the counting does not apply.
std::optional<at::Tensor> searchByCounting(const at::Tensor& seq, const at::Tensor& values,
                                           bool right, bool out_int32) {
  if (!seq.defined() || !values.defined() || !seq.device().is_privateuseone() ||
      values.device() != seq.device() || values.scalar_type() != seq.scalar_type() ||
      seq.dim() == 0 || seq.is_complex() || seq.scalar_type() == at::kBool)
    return std::nullopt;
  const bool batched = seq.dim() > 1;
  if (batched && (values.dim() != seq.dim() ||
                  seq.sizes().slice(0, seq.dim() - 1) != values.sizes().slice(0, values.dim() - 1)))
    return std::nullopt;  // CPU's error
  if (seq.size(-1) * std::max<int64_t>(values.numel(), 1) > kMaxCompared) return std::nullopt;
  if (seq.is_floating_point() && at::isnan(seq).any().item<bool>()) return std::nullopt;
  const at::Tensor s = batched ? seq.unsqueeze(-2) : seq;
  const at::Tensor v = values.unsqueeze(-1);
  const at::Tensor before = right ? at::logical_not(at::gt(s, v)) : at::logical_not(at::ge(s, v));
  at::Tensor count = before.sum(-1);
  return out_int32 ? count.to(at::kInt) : count;
}

// searchsorted.Tensor(sorted_sequence, self, *, out_int32, right, side, sorter).
bool searchsorted(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 6;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool() ||
      !(a[5].isNone() || a[5].isTensor()))
    return false;
  at::Tensor seq = a[0].toTensor();
  if (a[5].isTensor()) {  // the sequence in the sorter's order
    const at::Tensor sorter = a[5].toTensor();
    if (sorter.scalar_type() != at::kLong || sorter.device() != seq.device() ||
        sorter.sizes() != seq.sizes() || seq.dim() == 0)
      return false;  // CPU's errors
    if (sorter.numel() > 0 &&
        at::logical_or(at::lt(sorter, 0), at::ge(sorter, seq.size(-1))).any().item<bool>())
      return false;
    seq = seq.gather(-1, sorter);
  }
  bool right = a[3].toBool();
  if (a[4].isString()) {
    const std::string side = a[4].toStringRef();
    if (side != "left" && side != "right") return false;  // CPU's error
    if (right && side == "left") return false;            // CPU's error
    right = side == "right";
  } else if (!a[4].isNone()) {
    return false;
  }
  std::optional<at::Tensor> found = searchByCounting(seq, a[1].toTensor(), right, a[2].toBool());
  if (!found) return false;
  replaceArgs(stack, kArgs, {*found});
  return true;
}

// bucketize.Tensor(self, boundaries, *, out_int32, right): boundaries is 1-D.
bool bucketize(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isBool() || !a[3].isBool() ||
      a[1].toTensor().dim() != 1)
    return false;
  std::optional<at::Tensor> found =
      searchByCounting(a[1].toTensor(), a[0].toTensor(), a[3].toBool(), a[2].toBool());
  if (!found) return false;
  replaceArgs(stack, kArgs, {*found});
  return true;
}

}  // namespace

void addSelectionComposites(Register add) {
  add("searchsorted", searchsorted, false);
  add("bucketize", bucketize, false);
  add("median", medianAll<Pick::kMedian>, false);
  add("nanmedian", medianAll<Pick::kNanMedian>, false);
  add("median_dim", alongDim<Pick::kMedian>, false);
  add("nanmedian_dim", alongDim<Pick::kNanMedian>, false);
  add("kthvalue", kthvalue, false);
  add("mode", alongDim<Pick::kMode>, false);
}

}  // namespace flagos::composite
