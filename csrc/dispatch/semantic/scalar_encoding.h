// Scalar encoding: a schema argument as the flagosScalar values its catalog
// `scalars` entry says (Encoding in catalog.h).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <cstdint>

#include "dispatch/semantic/catalog.h"
#include "dispatch/semantic/schema.h"
#include "flagos/kernel.h"

namespace flagos::semantic {

// Appends the values of scalar @p spec (argument @p arg of @p args) to
// @p out; dims are normalized against rank @p ndim. False: not expressible
// (-> next tier). Throws c10::Error for a dim out of range.
bool encodeScalar(const ScalarSpec& spec, const ScalarArg& arg, const c10::IValue* args,
                  int64_t ndim, c10::SmallVectorImpl<flagosScalar>& out);

}  // namespace flagos::semantic
