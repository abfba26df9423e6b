// The host-side range check of index arguments before tiers 1 and 2 launch
// (Note [Index bounds] in index_bounds.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/SmallVector.h>

#include "dispatch/bridge/catalog.h"
#include "flagos/kernel.h"

namespace flagos::semantic {

// Whether calls of @p spec get checkIndexRange.
bool checksIndexRange(const OpSpec& spec);
// Raises CPU's error when an index (or nll_loss target) is out of range;
// @p inputs and @p scalars are the prepared call's.
void checkIndexRange(const OpSpec& spec, c10::ArrayRef<c10::MaybeOwned<at::Tensor>> inputs,
                     const c10::SmallVectorImpl<flagosScalar>& scalars);

}  // namespace flagos::semantic
