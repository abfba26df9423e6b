// Typed kernels in front of the bridge for the hottest overloads (Note
// [Unboxed entries] in unboxed.cpp).
#pragma once

#include <torch/library.h>

#include <memory>

#include "dispatch/bridge/semantic_kernel.h"

namespace flagos::semantic {

// Registers @p kernel's overload with an unboxed entry when it has one,
// taking ownership of @p kernel; false (and @p kernel untouched) otherwise.
bool registerUnboxed(torch::Library& m, std::unique_ptr<SemanticKernel>& kernel);

}  // namespace flagos::semantic
