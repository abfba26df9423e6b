// Operators whose output size depends on the data: nonzero, masked_select,
// unique and unique_consecutive (argwhere and boolean-mask indexing reach
// nonzero); nonzero_static, nonzero cut or padded to a given size.
//
// Note [Data-dependent output sizes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CUDA computes these in three steps, and so do we, each step one of the
// device's own operators (Note [Composite kernels]):
//  - count: a mask of the selected elements;
//  - scan: the mask's cumulative sum gives each selected element its place
//    in the output (cumsum's composite, Note [Log-step scans]);
//  - write: a scatter of the elements' linear indices to their places.
// The count (the scan's last element) goes to the host once, to size the
// output: the one synchronization CUDA's nonzero also makes. Unselected
// elements scatter to one extra slot past the end, which is then cut off,
// so the write needs no compaction pass; only that slot sees duplicates.
#include <ATen/ATen.h>

#include <tuple>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

// On the flagos device, of a type the generated comparisons cover.
bool usableSource(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() && !t.is_complex() &&
         !at::isQIntType(t.scalar_type());
}

// The row-major linear indices of @p mask's true elements, in order, on the
// device (Note [Data-dependent output sizes]).
at::Tensor selectedIndices(const at::Tensor& mask) {
  const at::Tensor flat = mask.reshape({-1});
  const at::TensorOptions longs = flat.options().dtype(at::kLong);
  const int64_t n = flat.numel();
  if (n == 0) return at::empty({0}, longs);
  const at::Tensor place = flat.to(at::kLong).cumsum(0);  // 1-based place of a true element
  const int64_t count = place.select(0, n - 1).item<int64_t>();
  const at::Tensor target = at::where(flat, place - 1, at::scalar_tensor(count, longs));
  return at::empty({count + 1}, longs)
      .scatter_(0, target, at::arange(n, longs))
      .narrow(0, 0, count);
}

// nonzero(self) -> Tensor [count, self.dim()] of int64 coordinates.
bool nonzero(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const c10::IValue* a = argsOf(*stack, 1);
  if (!a || !a[0].isTensor()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableSource(self)) return false;
  const at::Tensor linear = selectedIndices(self.ne(0));
  const int64_t count = linear.size(0), rank = self.dim();
  at::Tensor out;
  if (rank == 0) {
    out = at::empty({count, 0}, linear.options());
  } else {
    // Coordinate d of a linear index: (linear / stride_d) % size_d, with
    // the strides of the contiguous layout.
    std::vector<at::Tensor> coordinates(static_cast<size_t>(rank));
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t size = self.size(d);
      coordinates[static_cast<size_t>(d)] =
          stride == 1 ? linear.remainder(size) : linear.div(stride, "floor").remainder(size);
      stride *= size;
    }
    out = at::stack(coordinates, 1);
  }
  replaceArgs(stack, 1, {out});
  return true;
}

// masked_select(self, mask) -> the elements of self where the broadcast
// mask is true, flattened in row-major order.
bool maskedSelect(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 2;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isTensor()) return false;
  const at::Tensor self = a[0].toTensor(), mask = a[1].toTensor();
  // A mask that is not bool, on another device or not broadcastable: CPU's
  // error from the host tier.
  if (!usableSource(self) || !mask.defined() || mask.device() != self.device() ||
      mask.scalar_type() != at::kBool)
    return false;
  std::vector<at::Tensor> both;
  try {
    both = at::broadcast_tensors({self, mask});  // views: nothing computed yet
  } catch (const c10::Error&) {
    return false;
  }
  const at::Tensor values = both[0].reshape({-1}).index_select(0, selectedIndices(both[1]));
  replaceArgs(stack, kArgs, {values});
  return true;
}

// unique / unique_consecutive of the flattened @p self (sort first for
// unique): the runs of equal values, each run's first element, the run of
// every element and the runs' lengths, as CPU returns them (inverse and
// counts are empty unless asked for). Runs start where a value differs from
// the one before it (NaN from every value, so each NaN is its own run, as on
// CPU); their number goes to the host once.
std::vector<at::Tensor> runsOf(const at::Tensor& self, bool sort, bool return_inverse,
                               bool return_counts) {
  const at::TensorOptions longs = self.options().dtype(at::kLong);
  const bool boolean = self.scalar_type() == at::kBool;  // sorted as bytes
  const at::Tensor flat = boolean ? self.reshape({-1}).to(at::kByte) : self.reshape({-1});
  const int64_t n = flat.numel();
  at::Tensor values = flat, order;
  if (sort && n > 0) std::tie(values, order) = flat.sort(/*stable=*/true, 0, false);
  at::Tensor output, inverse = at::empty({0}, longs), counts = at::empty({0}, longs);
  if (n == 0) {
    output = at::empty({0}, self.options());
    if (return_inverse) inverse = at::empty(self.sizes(), longs);
    return {output, inverse, counts};
  }
  const at::Tensor starts = at::cat({at::ones({1}, values.options().dtype(at::kBool)),
                                     values.narrow(0, 1, n - 1).ne(values.narrow(0, 0, n - 1))});
  const at::Tensor run = starts.to(at::kLong).cumsum(0) - 1;  // the run of each value
  const int64_t count = run.select(0, n - 1).item<int64_t>() + 1;
  // Only a run's first element writes (the others go to the extra slot),
  // so the output is CPU's: the first of each run, -0.0 or 0.0 alike.
  const at::Tensor target = at::where(starts, run, at::scalar_tensor(count, longs));
  output = at::empty({count + 1}, values.options()).scatter_(0, target, values).narrow(0, 0, count);
  if (boolean) output = output.to(at::kBool);
  if (return_inverse) {
    const at::Tensor of_input =
        sort ? at::empty({n}, longs).scatter_(0, order, run) : run;  // order: a permutation
    inverse = of_input.reshape(self.sizes());
  }
  if (return_counts) {
    const at::Tensor first =
        at::empty({count + 1}, longs).scatter_(0, target, at::arange(n, longs)).narrow(0, 0, count);
    counts = at::cat({first.narrow(0, 1, count - 1), at::full({1}, n, longs)}) - first;
  }
  return {output, inverse, counts};
}

// _unique2(self, sorted, return_inverse, return_counts): CPU sorts whatever
// `sorted` says, and so does this.
bool unique(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[2].isBool() || !a[3].isBool()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableSource(self)) return false;
  const std::vector<at::Tensor> r = runsOf(self, true, a[2].toBool(), a[3].toBool());
  replaceArgs(stack, kArgs, {r[0], r[1], r[2]});
  return true;
}

// unique_consecutive(self, return_inverse, return_counts, dim=None); a dim
// takes the host tier.
bool uniqueConsecutive(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 4;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isBool() || !a[2].isBool() || !a[3].isNone()) return false;
  const at::Tensor self = a[0].toTensor();
  if (!usableSource(self)) return false;
  const std::vector<at::Tensor> r = runsOf(self, false, a[1].toBool(), a[2].toBool());
  replaceArgs(stack, kArgs, {r[0], r[1], r[2]});
  return true;
}

// nonzero_static(self, size, fill_value): nonzero's first `size` rows, or
// all of them followed by rows of fill_value up to `size`.
bool nonzeroStatic(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 3;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isInt()) return false;
  const at::Tensor self = a[0].toTensor();
  const int64_t size = a[1].toInt();
  if (!self.defined() || !self.device().is_privateuseone() || size < 0) return false;
  const at::Tensor found = at::nonzero(self);
  at::Tensor out;
  if (found.size(0) >= size) {
    out = found.slice(0, 0, size).clone();
  } else {
    out = at::cat(
        {found, at::full({size - found.size(0), found.size(1)}, a[2].toInt(), found.options())});
  }
  replaceArgs(stack, kArgs, {out});
  return true;
}

}  // namespace

void addDataDependentComposites(Register add) {
  add("nonzero_static", nonzeroStatic, false);
  add("nonzero", nonzero, false);
  add("masked_select", maskedSelect, false);
  add("unique", unique, false);
  add("unique_consecutive", uniqueConsecutive, false);
}

}  // namespace flagos::composite
