// Scatters that reduce (scatter_reduce, index_reduce, the legacy scatter
// with reduce=) from sorts, scans and plain scatters on the device.
//
// Note [Scatter reductions as segmented scans]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// scatter_reduce(self, dim, index, src, reduce, include_self) folds every
// src element into the out element its index names. As CPU: out starts as
// self, its scattered elements reset to the reduction's identity when
// include_self is false (0, 1, the lowest or the highest value). sum is
// scatter_add_; mean divides that sum by the count of what reached each
// element (self included when include_self; floor division for integers;
// untouched elements keep self). prod, amax and amin have no scatter of
// their own, so each src element gets the flat offset of its destination,
// a stable sort by offset makes each destination's elements one segment,
// and a log-step inclusive scan within segments (step s combines element i
// with i - s when both lie in one segment: sorted keys make that a single
// comparison) leaves each segment's reduction in its last element; those
// are combined with out at their offsets, which are distinct, by one
// index_put_. amax/amin propagate NaN as CPU's do. index_reduce is the
// same with index broadcast along source's other dims, and the legacy
// scatter(reduce='add'|'multiply') is sum/prod with include_self. Indices
// out of range, shapes CPU refuses, bool and complex take the host tier
// and its error (one range check on the host first).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/decomposition/stack_args.h"

namespace flagos::composite {
namespace {

enum class Reduce { kSum, kProd, kMean, kAmax, kAmin };

std::optional<Reduce> parseReduce(const std::string& r) {
  if (r == "sum" || r == "add") return Reduce::kSum;
  if (r == "prod" || r == "multiply") return Reduce::kProd;
  if (r == "mean") return Reduce::kMean;
  if (r == "amax") return Reduce::kAmax;
  if (r == "amin") return Reduce::kAmin;
  return std::nullopt;
}

// The reduction's identity in @p dtype (CPU's init value for include_self=False).
at::Scalar identity(Reduce r, at::ScalarType dtype) {
  if (r == Reduce::kProd) return 1;
  if (r != Reduce::kAmax && r != Reduce::kAmin) return 0;
  const bool lowest = r == Reduce::kAmax;
  if (at::isFloatingType(dtype))
    return lowest ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity();
  at::Scalar v;
  AT_DISPATCH_INTEGRAL_TYPES(dtype, "scatter_reduce identity", [&] {
    v = lowest ? std::numeric_limits<scalar_t>::lowest() : std::numeric_limits<scalar_t>::max();
  });
  return v;
}

at::Tensor combine(Reduce r, const at::Tensor& a, const at::Tensor& b) {
  switch (r) {
    case Reduce::kProd:
      return at::mul(a, b);
    case Reduce::kAmax:
      return at::maximum(a, b);
    default:
      return at::minimum(a, b);
  }
}

// Whether the call is one CPU computes: same device, index int64 and in
// range, index no larger than src or (off dim) self, types CPU takes.
bool valid(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  if (!self.defined() || !self.device().is_privateuseone() || self.dim() == 0 ||
      self.scalar_type() == at::kBool || self.is_complex() || !index.defined() ||
      index.device() != self.device() || index.scalar_type() != at::kLong ||
      index.dim() != self.dim() || !src.defined() || src.device() != self.device() ||
      src.scalar_type() != self.scalar_type() || src.dim() != self.dim() || dim < 0 ||
      dim >= self.dim())
    return false;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (index.size(d) > src.size(d) || (d != dim && index.size(d) > self.size(d))) return false;
  if (index.numel() == 0) return true;
  return !at::logical_or(at::lt(index, 0), at::ge(index, self.size(dim))).any().item<bool>();
}

// The flat offsets in a contiguous tensor of @p sizes of the elements
// index names along @p dim (index's own position elsewhere).
at::Tensor destinations(at::IntArrayRef sizes, int64_t dim, const at::Tensor& index) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  at::Tensor dest = index * strides[dim];
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    std::vector<int64_t> shape(index.dim(), 1);
    shape[d] = index.size(d);
    dest = dest + at::arange(index.size(d), index.options()).view(shape) * strides[d];
  }
  return dest;
}

// out (contiguous) with prod/amax/amin of @p vals folded in at @p index
// (Note [Scatter reductions as segmented scans]).
void segmentedFold(at::Tensor& out, int64_t dim, const at::Tensor& index, const at::Tensor& vals,
                   Reduce r) {
  const at::Tensor dest = destinations(out.sizes(), dim, index).reshape({-1});
  auto [keys, order] = at::sort(dest, /*stable=*/true, 0, /*descending=*/false);
  at::Tensor v = vals.reshape({-1}).index_select(0, order);
  const int64_t n = keys.numel();
  for (int64_t s = 1; s < n; s *= 2) {
    const at::Tensor tail = v.narrow(0, s, n - s);
    const at::Tensor same = at::eq(keys.narrow(0, s, n - s), keys.narrow(0, 0, n - s));
    v = at::cat(
        {v.narrow(0, 0, s), at::where(same, combine(r, tail, v.narrow(0, 0, n - s)), tail)});
  }
  const at::Tensor last = at::cat({at::ne(keys.narrow(0, 0, n - 1), keys.narrow(0, 1, n - 1)),
                                   at::ones({1}, keys.options().dtype(at::kBool))});
  const at::Tensor at_dest = keys.masked_select(last);
  const at::Tensor folded = v.masked_select(last);
  at::Tensor flat = out.view({-1});
  flat.index_put_({at_dest}, combine(r, flat.index_select(0, at_dest), folded));
}

// A copy of @p self with src folded in (valid() holds).
at::Tensor scatterReduce(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                         const at::Tensor& src, Reduce r, bool include_self) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  if (index.numel() == 0) return out;
  if (!include_self) out.scatter_(dim, index, identity(r, self.scalar_type()));
  at::Tensor vals = src;
  for (int64_t d = 0; d < src.dim(); ++d) vals = vals.narrow(d, 0, index.size(d));
  switch (r) {
    case Reduce::kSum:
      out.scatter_add_(dim, index, vals);
      break;
    case Reduce::kMean: {
      out.scatter_add_(dim, index, vals);
      at::Tensor count = include_self ? at::ones_like(out) : at::zeros_like(out);
      count.scatter_add_(dim, index, at::ones_like(vals));
      count.masked_fill_(at::eq(count, 0), 1);
      if (at::isFloatingType(out.scalar_type())) {
        out.div_(count);
      } else {
        out.div_(count, "floor");
      }
      break;
    }
    default:
      segmentedFold(out, dim, index, vals, r);
  }
  return out;
}

// scatter_reduce.two(self, dim, index, src, reduce, *, include_self).
bool scatterReduceOp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 6;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isTensor() || !a[3].isTensor() ||
      !a[4].isString() || !a[5].isBool())
    return false;
  const at::Tensor self = a[0].toTensor();
  const std::string name = a[4].toStringRef();
  const std::optional<Reduce> r =
      name == "add" || name == "multiply" ? std::nullopt : parseReduce(name);
  const int64_t dim = wrapDim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  if (!r || !valid(self, dim, a[2].toTensor(), a[3].toTensor())) return false;
  replaceArgs(stack, kArgs,
              {scatterReduce(self, dim, a[2].toTensor(), a[3].toTensor(), *r, a[5].toBool())});
  return true;
}

// index_reduce(self, dim, index, source, reduce, *, include_self): index is
// 1-D, one entry per slice of source along dim.
bool indexReduceOp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 6;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isTensor() || !a[3].isTensor() ||
      !a[4].isString() || !a[5].isBool())
    return false;
  const at::Tensor index = a[2].toTensor();
  at::Tensor self = a[0].toTensor(), source = a[3].toTensor();
  const std::string name = a[4].toStringRef();
  if (name != "prod" && name != "mean" && name != "amax" && name != "amin") return false;
  const std::optional<Reduce> r = parseReduce(name);
  if (!self.defined() || !source.defined()) return false;
  const bool scalar = self.dim() == 0;  // a 0-d self and source: one element along dim 0
  if (scalar && (source.dim() != 0 || index.numel() != 1)) return false;
  if (scalar) {
    self = self.reshape({1});
    source = source.reshape({1});
  }
  const int64_t dim = wrapDim(a[1].toInt(), self.dim());
  if (!index.defined() || index.dim() != 1 || source.dim() != self.dim() || dim < 0 ||
      source.size(dim) != index.numel())
    return false;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != dim && source.size(d) != self.size(d)) return false;  // CPU's error
  std::vector<int64_t> shape(self.dim(), 1);
  shape[dim] = index.numel();
  const at::Tensor expanded = index.view(shape).expand(source.sizes());
  if (!valid(self, dim, expanded, source)) return false;
  at::Tensor out = scatterReduce(self, dim, expanded, source, *r, a[5].toBool());
  replaceArgs(stack, kArgs, {scalar ? out.reshape({}) : out});
  return true;
}

// scatter.reduce(self, dim, index, src, *, reduce) and scatter.value_reduce
// (a Scalar value): reduce 'add' or 'multiply', self included.
template <bool kValue>
bool scatterLegacyReduce(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  constexpr int kArgs = 5;
  const c10::IValue* a = argsOf(*stack, kArgs);
  if (!a || !a[0].isTensor() || !a[1].isInt() || !a[2].isTensor() || !a[4].isString()) return false;
  const at::Tensor self = a[0].toTensor(), index = a[2].toTensor();
  const std::string name = a[4].toStringRef();
  if (name != "add" && name != "multiply") return false;  // CPU's error
  at::Tensor src;
  if (kValue) {
    if (!a[3].isScalar() || !self.defined()) return false;
    src = at::full(index.sizes(), a[3].toScalar(), self.options());
  } else {
    if (!a[3].isTensor()) return false;
    src = a[3].toTensor();
  }
  const int64_t dim = wrapDim(a[1].toInt(), std::max<int64_t>(self.dim(), 1));
  if (!valid(self, dim, index, src)) return false;
  replaceArgs(stack, kArgs,
              {scatterReduce(self, dim, index, src, *parseReduce(name), /*include_self=*/true)});
  return true;
}

}  // namespace

void addScatterReduceComposites(Register add) {
  add("scatter_reduce", scatterReduceOp, kInPlace);
  add("index_reduce", indexReduceOp, kInPlace);
  add("scatter_reduce_legacy", scatterLegacyReduce<false>, kInPlace);
  add("scatter_value_reduce_legacy", scatterLegacyReduce<true>, kInPlace);
}

}  // namespace flagos::composite
