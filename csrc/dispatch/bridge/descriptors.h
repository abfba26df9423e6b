// The ABI's tensor descriptors (flagosTensor) for the tensors of a prepared
// call: what tiers 1 and 2 hand to a kernel.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "flagos/kernel.h"

namespace flagos::semantic {

// Per-call storage for the descriptors' shape/stride arrays.
struct DescStore {
  int64_t shape[FLAGOS_MAX_DIMS];
  int64_t strides[FLAGOS_MAX_DIMS];
};

// @p t as it is (undefined: data == NULL); false when the ABI cannot
// describe it (rank, dtype).
bool describe(const at::Tensor& t, flagosTensor& d, DescStore& s);
// @p t seen with @p out's shape: size-1 and missing leading dims get stride 0.
bool describeBroadcast(const at::Tensor& t, const at::Tensor& out, flagosTensor& d, DescStore& s);

}  // namespace flagos::semantic
