// Advanced indexing, x[idx] and x[idx] = v / += v (aten::index.Tensor and
// aten::_index_put_impl_), from index_select and index_add / index_copy
// (Note [Composite kernels]).
//
// Note [Advanced indexing as one flat gather]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// When the index tensors sit on adjacent dims p..p+m-1 (x[i, j], x[:, i],
// Swin's relative-position table[index]), the indexed dims are one flat dim
// of size prod(sizes[p..p+m-1]) and the indices one flat index:
//   flat = sum_k wrap(idx_k) * prod(sizes[p+k+1 .. p+m-1])
// so x[idx] is index_select(x viewed with those dims merged, p, flat), and a
// put is index_add_ (accumulate) or index_copy_ on the same view. Negative
// indices wrap as in Python. Out-of-range ones raise IndexError with CPU's
// message; finding them costs one small device-to-host read (CUDA checks
// with a device-side assert instead). A boolean mask is its nonzero()
// coordinates (one index tensor per dim it covers). Non-adjacent index
// tensors and other index types are left to the host tier.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorUtils.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

struct Plan {
  int64_t first = 0;            // p: the first indexed dim
  std::vector<at::Tensor> idx;  // the index tensors, broadcast to one shape
};

// Whether two shapes broadcast together (each dim, from the right, equal or 1).
bool broadcastable(c10::IntArrayRef a, c10::IntArrayRef b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// The indexed dims and their (broadcast) index tensors, or nullopt.
std::optional<Plan> planFor(const at::Tensor& self, const c10::IValue& list) {
  if (!list.isList()) return std::nullopt;
  // A boolean mask over k dims stands for k index tensors, the columns of
  // its nonzero() (as ATen's expandTensors does; Note [Data-dependent output
  // sizes]). A mask whose shape is not the indexed dims' is CPU's
  // IndexError: declined.
  std::vector<at::Tensor> items;
  for (const c10::IValue& item : list.toListRef()) {
    const at::Tensor t = optTensor(item);
    if (!t.defined() || t.scalar_type() != at::kBool) {
      items.push_back(t);
      continue;
    }
    const int64_t at_dim = static_cast<int64_t>(items.size());
    if (t.dim() == 0 || at_dim + t.dim() > self.dim() ||
        t.sizes() != self.sizes().slice(at_dim, t.dim()))
      return std::nullopt;
    const at::Tensor coordinates = at::nonzero(t);
    for (int64_t j = 0; j < t.dim(); ++j) items.push_back(coordinates.select(1, j));
  }
  std::vector<at::Tensor> given;
  int64_t first = -1, last = -1;
  if (static_cast<int64_t>(items.size()) > self.dim()) return std::nullopt;
  for (size_t i = 0; i < items.size(); ++i) {
    const at::Tensor& t = items[i];
    if (!t.defined()) continue;
    if (t.scalar_type() != at::kLong && t.scalar_type() != at::kInt) return std::nullopt;
    // CPU index tensors are allowed with a device tensor, as on CUDA.
    if (t.device() != self.device() && !t.device().is_cpu()) return std::nullopt;
    if (last >= 0 && static_cast<int64_t>(i) != last + 1) return std::nullopt;  // not adjacent
    if (first < 0) first = static_cast<int64_t>(i);
    last = static_cast<int64_t>(i);
    given.push_back(t.device() == self.device() ? t : t.to(self.device()));
  }
  if (given.empty()) return std::nullopt;
  // Shapes that do not broadcast: declined, so that the host tier raises
  // CPU's IndexError ("shape mismatch: indexing tensors could not be
  // broadcast together"), not broadcast_tensors' RuntimeError.
  std::vector<int64_t> shape;
  for (const at::Tensor& t : given) {
    if (!broadcastable(shape, t.sizes())) return std::nullopt;
    shape = at::infer_size(shape, t.sizes());
  }
  Plan plan;
  plan.first = first;
  plan.idx = at::broadcast_tensors(given);
  return plan;
}

// CPU's IndexError for the first out-of-range index, if any (one read).
void checkBounds(const at::Tensor& idx, int64_t size, int64_t dim) {
  if (idx.numel() == 0) return;
  // CPU checks an empty dim before reading any index, in its own words.
  TORCH_CHECK_INDEX(size != 0, "index is out of bounds for dimension with size 0");
  const at::Tensor bad = at::logical_or(idx >= size, idx < -size);
  if (!bad.any().item<bool>()) return;
  const int64_t value = idx.masked_select(bad).flatten()[0].item<int64_t>();
  TORCH_CHECK_INDEX(false, "index ", value, " is out of bounds for dimension ", dim, " with size ",
                    size);
}

// The flat index over the indexed dims (Note [Advanced indexing as one flat gather]).
at::Tensor flatIndex(const at::Tensor& self, const Plan& plan) {
  const int64_t m = static_cast<int64_t>(plan.idx.size());
  at::Tensor flat;
  int64_t stride = 1;
  for (int64_t k = m - 1; k >= 0; --k) {
    const int64_t dim = plan.first + k, size = self.size(dim);
    const at::Tensor i = plan.idx[k].to(at::kLong);
    checkBounds(i, size, dim);
    const at::Tensor wrapped = at::where(i < 0, i + size, i);
    const at::Tensor term = stride == 1 ? wrapped : wrapped * stride;
    flat = flat.defined() ? flat + term : term;
    stride *= size;
  }
  return flat;
}

// self with dims first..first+m-1 merged into one: (before, merged, after).
std::vector<int64_t> mergedShape(const at::Tensor& self, const Plan& plan) {
  const int64_t m = static_cast<int64_t>(plan.idx.size());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().begin() + plan.first);
  int64_t merged = 1;
  for (int64_t k = 0; k < m; ++k) merged *= self.size(plan.first + k);
  shape.push_back(merged);
  shape.insert(shape.end(), self.sizes().begin() + plan.first + m, self.sizes().end());
  return shape;
}

// The result's shape: the index shape where the indexed dims were.
std::vector<int64_t> resultShape(const at::Tensor& self, const Plan& plan) {
  const int64_t m = static_cast<int64_t>(plan.idx.size());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().begin() + plan.first);
  const auto idx_shape = plan.idx[0].sizes();
  shape.insert(shape.end(), idx_shape.begin(), idx_shape.end());
  shape.insert(shape.end(), self.sizes().begin() + plan.first + m, self.sizes().end());
  return shape;
}

bool usableSelf(const at::Tensor& self) {
  return self.defined() && self.device().is_privateuseone() && self.dim() > 0;
}

// index.Tensor(self, indices) -> Tensor
bool indexTensor(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableSelf(self)) return false;
  const std::optional<Plan> plan = planFor(self, a[1]);
  if (!plan) return false;
  const at::Tensor flat = flatIndex(self, *plan);
  const at::Tensor out = self.reshape(mergedShape(self, *plan))
                             .index_select(plan->first, flat.reshape({-1}))
                             .view(resultShape(self, *plan));
  replaceArgs(stack, kArgs, {out});
  return true;
}

// _index_put_impl_(self, indices, values, accumulate, unsafe): self, updated
// in place (the bridge copies the result into self: it is self).
bool indexPut(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[2].isTensor() || !a[3].isBool()) return false;
  const at::Tensor self = a[0].toTensor(), values = a[2].toTensor();
  if (!usableSelf(self) || values.device() != self.device() ||
      values.scalar_type() != self.scalar_type())
    return false;
  // Accumulating 16-bit floats rounds every partial sum, so the order of
  // duplicate indices decides the result; under deterministic algorithms
  // it must not vary. Both take CPU's own serial kernel on the host tier
  // (Note [Atomic scatters decline], generated/tier.cpp).
  if (a[3].toBool() && (self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16 ||
                        at::globalContext().deterministicAlgorithms()))
    return false;
  const std::optional<Plan> plan = planFor(self, a[1]);
  if (!plan) return false;
  // Written through a merged view: self's dims must merge without a copy.
  const std::vector<int64_t> merged = mergedShape(self, *plan);
  const std::optional<std::vector<int64_t>> strides =
      at::detail::computeStride(self.sizes(), self.strides(), merged);
  if (!strides) return false;
  // Values that do not broadcast to the result: CPU's error from the host tier.
  if (!at::is_expandable_to(values.sizes(), resultShape(self, *plan))) return false;
  const at::Tensor flat = flatIndex(self, *plan).reshape({-1});
  at::Tensor target = self.view(merged);
  // values broadcast to the result's shape, then the index dims flattened.
  std::vector<int64_t> value_shape(merged.begin(), merged.end());
  value_shape[plan->first] = flat.numel();
  const at::Tensor v = values.expand(resultShape(self, *plan)).reshape(value_shape);
  if (a[3].toBool()) {
    target.index_add_(plan->first, flat, v);
  } else {  // index_copy_ as a scatter: the index spread over the other dims
    std::vector<int64_t> along(value_shape.size(), 1);
    along[plan->first] = flat.numel();
    target.scatter_(plan->first, flat.view(along).expand(value_shape), v);
  }
  replaceArgs(stack, kArgs, {self});
  return true;
}

}  // namespace

void addAdvancedIndexComposites(Register add) {
  add("index", indexTensor, false);
  add("index_put", indexPut, true);
}

}  // namespace flagos::composite
