// Functional scatters and roll from in-place and shape operators (Note
// [Composite kernels]). A backend may only generate the in-place scatter
// (opencl: one kernel cannot copy self and then scatter in parallel), so
// the functional forms clone self and scatter into the clone; roll is a
// cat of two slices per rolled dim. flip of no dim is a copy, and of
// every dim the reversal of the flattened tensor (the generated flip takes
// the other sets: the catalog's dims encoding cannot tell these two apart).
// index_fill, index_copy and take are index_put_ / index_select with the
// index in the indexed dim's place, after one range check on the host, and
// so is put_ on the flattened self; masked_scatter_ a scan of the mask, a
// gather and a where; channel_shuffle a reshape, transpose and copy.
#include <ATen/ATen.h>

#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

bool onDevice(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone();
}

bool indexLike(const at::Tensor& index, const at::Tensor& self, bool int32_ok) {
  return index.defined() && index.device() == self.device() &&
         (index.scalar_type() == at::kLong || (int32_ok && index.scalar_type() == at::kInt));
}

// scatter.src / scatter.value / scatter_add (self, dim, index, src|value)
// and index_add (self, dim, index, source, alpha) -> a scattered copy.
enum class Scatter { Src, Value, Add, IndexAdd };

template <Scatter kKind>
bool scatterCopy(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = kKind == Scatter::IndexAdd ? 5 : 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), index = a[2].toTensor();
  const int64_t dim = a[1].toInt();
  if (!onDevice(self) || !indexLike(index, self, kKind == Scatter::IndexAdd)) return false;
  if (kKind != Scatter::Value && !(a[3].isTensor() && a[3].toTensor().device() == self.device()))
    return false;
  at::Tensor out = self.clone();
  switch (kKind) {
    case Scatter::Src:
      out.scatter_(dim, index, a[3].toTensor());
      break;
    case Scatter::Value:
      out.scatter_(dim, index, a[3].toScalar());
      break;
    case Scatter::Add:
      out.scatter_add_(dim, index, a[3].toTensor());
      break;
    case Scatter::IndexAdd:
      out.index_add_(dim, index, a[3].toTensor(), a[4].toScalar());
      break;
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

// @p t rolled by @p shift along @p dim: the last `shift` slices first.
at::Tensor rollDim(const at::Tensor& t, int64_t shift, int64_t dim) {
  const int64_t n = t.size(dim);
  const int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;
  if (s == 0) return t;
  return at::cat({t.narrow(dim, n - s, s), t.narrow(dim, 0, n - s)}, dim);
}

// roll(self, shifts, dims) -> Tensor
bool roll(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList() || !a[2].isIntList()) return false;
  const at::Tensor self = a[0].toTensor();
  const std::vector<int64_t> shifts = a[1].toIntVector(), dims = a[2].toIntVector();
  if (!onDevice(self) || self.dim() == 0) return false;
  at::Tensor out;
  if (dims.empty()) {  // roll the flattened tensor
    if (shifts.size() != 1) return false;
    out = rollDim(self.reshape({-1}), shifts[0], 0).reshape(self.sizes());
  } else {
    if (shifts.size() != dims.size()) return false;
    for (int64_t d : dims)
      if (d < -self.dim() || d >= self.dim()) return false;  // CPU raises
    out = self;
    for (size_t i = 0; i < dims.size(); ++i)
      out = rollDim(out, shifts[i], dims[i] < 0 ? dims[i] + self.dim() : dims[i]);
  }
  // A new tensor even when nothing moved (rollDim then returns a view).
  if (out.is_alias_of(self)) out = out.clone(at::MemoryFormat::Contiguous);
  replaceArgs(stack, kArgs, {out});
  return true;
}

// Whether every element of @p index lies in [lo, hi) (one aminmax, read
// back): outside, CPU raises, so the composite declines.
bool indexInRange(const at::Tensor& index, int64_t lo, int64_t hi) {
  if (index.numel() == 0) return true;
  const auto [least, most] = at::aminmax(index);
  return least.item<int64_t>() >= lo && most.item<int64_t>() < hi;
}

// The indices of x[:, ..., index] with @p index at @p dim.
c10::List<std::optional<at::Tensor>> indexAt(int64_t dim, const at::Tensor& index) {
  c10::List<std::optional<at::Tensor>> indices;
  for (int64_t d = 0; d < dim; ++d) indices.push_back(std::nullopt);
  indices.push_back(index);
  return indices;
}

// index_fill_.int_Scalar(self, dim, index, value) and .int_Tensor (a 0-d
// value): negative indices count from the end, as on CPU.
template <bool kTensorValue>
bool indexFill(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isTensor()) return false;
  const at::Tensor given = a[0].toTensor(), index = a[2].toTensor();
  if (!onDevice(given) || !indexLike(index, given, false) || index.dim() > 1) return false;
  const at::Tensor self = given.dim() == 0 ? given.reshape({1}) : given;  // a 0-d self has one dim
  const int64_t dim = wrapDim(a[1].toInt(), self.dim());
  if (dim < 0) return false;
  at::Tensor value;
  if (kTensorValue) {
    if (!a[3].isTensor() || a[3].toTensor().dim() != 0) return false;
    if (a[3].toTensor().is_complex() && !self.is_complex()) return false;  // CPU's error
    value = a[3].toTensor().to(self.device(), self.scalar_type());
  } else {
    if (!a[3].isScalar()) return false;
    if (a[3].toScalar().isComplex() && !self.is_complex()) return false;  // CPU's error
    value = at::scalar_tensor(a[3].toScalar(), self.options());
  }
  const int64_t n = self.size(dim);
  if (!indexInRange(index, -n, n)) return false;
  const at::Tensor wrapped = at::where(index < 0, index + n, index).reshape({-1});
  at::Tensor out = self.clone();
  out.index_put_(indexAt(dim, wrapped), value);
  replaceArgs(stack, kArgs, {out.view(given.sizes())});
  return true;
}

// index_copy(self, dim, index, source): source's slices into self's at the
// (non-negative) indices along dim.
bool indexCopy(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isTensor() || !a[3].isTensor()) return false;
  const at::Tensor given = a[0].toTensor(), index = a[2].toTensor();
  if (!onDevice(given) || !indexLike(index, given, false) || index.dim() != 1 ||
      !usableLike(a[3].toTensor(), given) || a[3].toTensor().dim() != given.dim())
    return false;
  // A 0-d self (and source) has one dim.
  const at::Tensor self = given.dim() == 0 ? given.reshape({1}) : given;
  const at::Tensor source = given.dim() == 0 ? a[3].toTensor().reshape({1}) : a[3].toTensor();
  const int64_t dim = wrapDim(a[1].toInt(), self.dim());
  if (dim < 0 || source.size(dim) != index.numel()) return false;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim && source.size(d) != self.size(d)) return false;  // CPU's error
  if (!indexInRange(index, 0, self.size(dim))) return false;
  at::Tensor out = self.clone();
  out.index_put_(indexAt(dim, index), source);
  replaceArgs(stack, kArgs, {out.view(given.sizes())});
  return true;
}

// take(self, index): the flattened self at each index (negative ones count
// from the end), shaped as index.
bool take(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), index = a[1].toTensor();
  if (!onDevice(self) || !indexLike(index, self, false)) return false;
  const int64_t n = self.numel();
  if (!indexInRange(index, -n, n)) return false;
  const at::Tensor flat = index.reshape({-1});
  const at::Tensor picked = self.reshape({-1}).index_select(0, at::where(flat < 0, flat + n, flat));
  replaceArgs(stack, kArgs, {picked.reshape(index.sizes())});
  return true;
}

// put_(self, index, source, accumulate): source's elements into the
// flattened self at each index (negative ones count from the end), added
// when accumulating; computed into a contiguous copy (in_place: the bridge
// copies it into self).
bool put(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor() || !a[3].isBool())
    return false;
  const at::Tensor self = a[0].toTensor(), index = a[1].toTensor(), source = a[2].toTensor();
  if (!onDevice(self) || !indexLike(index, self, false) || !usableLike(source, self) ||
      source.numel() != index.numel())
    return false;  // CPU's errors
  const int64_t n = self.numel();
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  if (index.numel() > 0) {
    if (!indexInRange(index, -n, n)) return false;
    const at::Tensor flat = index.reshape({-1});
    out.view({-1}).index_put_(indexAt(0, at::where(flat < 0, flat + n, flat)), source.reshape({-1}),
                              a[3].toBool());
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

// masked_scatter_(self, mask, source): the k-th true element of mask
// (broadcast to self, row-major) takes source's k-th element. Each element
// finds its k as the running count of trues (a scan), which also gives the
// number of trues to check against source's size, as CPU does.
bool maskedScatter(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor() || !a[2].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), mask = a[1].toTensor(), source = a[2].toTensor();
  if (!onDevice(self) || !onDevice(mask) || mask.scalar_type() != at::kBool ||
      !usableLike(source, self) || mask.dim() > self.dim())
    return false;
  for (int64_t d = 1; d <= mask.dim(); ++d) {  // mask must broadcast to self's shape
    const int64_t m = mask.size(-d), s = self.size(-d);
    if (m != s && m != 1) return false;
  }
  if (self.numel() == 0) {
    replaceArgs(stack, kArgs, {self.clone()});
    return true;
  }
  const at::Tensor flat_mask = mask.expand(self.sizes()).reshape({-1});
  const at::Tensor position = flat_mask.to(at::kLong).cumsum(0);
  const int64_t trues = position[-1].item<int64_t>();
  if (trues > source.numel()) return false;  // CPU's error
  at::Tensor out;
  if (trues == 0) {
    out = self.clone();
  } else {
    const at::Tensor picked = source.reshape({-1}).index_select(0, (position - 1).clamp_min(0));
    out = at::where(flat_mask, picked, self.reshape({-1})).view(self.sizes());
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

// channel_shuffle(self, groups): channels regrouped as [groups, c / groups]
// -> [c / groups, groups], in self's suggested memory format as on CPU.
bool channelShuffle(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt()) return false;
  const at::Tensor self = a[0].toTensor();
  const int64_t groups = a[1].toInt();
  if (!onDevice(self) || self.dim() < 3 || groups <= 0 || self.size(1) % groups != 0)
    return false;  // CPU's errors
  const int64_t batch = self.size(0), per_group = self.size(1) / groups;
  const at::Tensor shuffled =
      self.reshape({batch, groups, per_group, -1}).transpose(1, 2).reshape(self.sizes());
  at::Tensor out = at::empty_like(self, self.suggest_memory_format());
  out.copy_(shuffled);
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

// flip(self, dims) with dims empty or every dim.
bool flip(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isIntList()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!onDevice(self)) return false;
  const std::vector<int64_t> dims = a[1].toIntVector();
  std::vector<bool> seen(self.dim(), false);
  for (int64_t d : dims) {
    d = wrapDim(d, self.dim());
    if (d < 0 || seen[d]) return false;  // CPU raises
    seen[d] = true;
  }
  at::Tensor out;
  if (dims.empty() || self.numel() <= 1) {
    out = self.clone(at::MemoryFormat::Contiguous);
  } else if (static_cast<int64_t>(dims.size()) == self.dim()) {
    const int64_t n = self.numel();
    const at::Tensor reversed = at::arange(n - 1, -1, -1, self.options().dtype(at::kLong));
    out = self.reshape({-1}).index_select(0, reversed).view(self.sizes());
  } else {
    return false;
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

void addIndexComposites(Register add) {
  add("flip", flip, false);
  add("scatter_src", scatterCopy<Scatter::Src>, false);
  add("scatter_value", scatterCopy<Scatter::Value>, false);
  add("scatter_add", scatterCopy<Scatter::Add>, false);
  add("index_add", scatterCopy<Scatter::IndexAdd>, false);
  add("roll", roll, false);
  add("index_fill_scalar", indexFill<false>, /*in_place=*/true);
  add("index_fill_tensor", indexFill<true>, /*in_place=*/true);
  add("index_copy", indexCopy, /*in_place=*/true);
  add("take", take, false);
  add("put", put, /*in_place=*/true);
  add("masked_scatter", maskedScatter, /*in_place=*/true);
  add("channel_shuffle", channelShuffle, false);
}

}  // namespace flagos::composite
