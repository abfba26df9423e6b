// CPU's argument checks and warnings that the meta kernels do not make
// (Note [Argument checks the meta kernels skip] in argument_checks.cpp).
#pragma once

#include <ATen/core/ivalue.h>

#include "dispatch/bridge/catalog.h"
#include "dispatch/bridge/schema.h"

namespace flagos::semantic {

// The check of a semantic operator's calls; nullptr for most operators.
using ArgumentCheck = void (*)(const OverloadSchema& schema, const c10::IValue* args);
ArgumentCheck argumentCheckFor(const OpSpec& spec);

}  // namespace flagos::semantic
