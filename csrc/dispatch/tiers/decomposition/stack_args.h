// What every composite does with its boxed call: find its arguments on the
// stack, check the tensors it relies on, and replace the arguments by the
// results (Note [Composite kernels]).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/stack.h>

#include <initializer_list>

namespace flagos::composite {

// The last @p n stack entries (the call's arguments), or nullptr.
inline const c10::IValue* argsOf(const torch::jit::Stack& stack, size_t n) {
  return stack.size() < n ? nullptr : &stack[stack.size() - n];
}

// A `Tensor?` argument (undefined for None).
inline at::Tensor optTensor(const c10::IValue& v) {
  return v.isTensor() ? v.toTensor() : at::Tensor();
}

// The first tensor of a call a composite takes: on the flagos device, with
// elements, float32 or float64 (the types the BLAS and generated tiers
// cover alike; half types stay with the host tier's CPU semantics).
// @p allow_empty: the composite is correct on zero elements too.
inline bool usableFirst(const at::Tensor& t, bool allow_empty = false) {
  return t.defined() && t.device().is_privateuseone() && (allow_empty || t.numel() > 0) &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble);
}

// Another tensor of the call: same device and dtype as @p like.
inline bool usableLike(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.device() == like.device() && t.scalar_type() == like.scalar_type();
}

// @p dim wrapped into [0, rank) as ATen wraps it, or -1 when it is out of
// range (CPU raises: the composite declines and the host tier gives the
// error). Callers pass max(dim(), 1) as @p rank where ATen treats a 0-d
// tensor as having one dim.
inline int64_t wrapDim(int64_t dim, int64_t rank) {
  if (dim < -rank || dim >= rank) return -1;
  return dim < 0 ? dim + rank : dim;
}

// Drops the @p n arguments and pushes the results.
inline void replaceArgs(torch::jit::Stack* stack, size_t n,
                        std::initializer_list<at::Tensor> results) {
  torch::jit::drop(*stack, n);
  for (const at::Tensor& r : results) torch::jit::push(*stack, r);
}

}  // namespace flagos::composite
