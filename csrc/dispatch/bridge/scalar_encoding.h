// Scalar encoding: a schema argument as the flagosScalar values its catalog
// `scalars` entry says (Encoding in catalog.h).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>

#include <cstdint>

#include "dispatch/bridge/catalog.h"
#include "dispatch/bridge/schema.h"
#include "flagos/kernel.h"

namespace flagos::semantic {

// Appends the values of scalar @p spec (argument @p arg of @p args) to
// @p out; dims are normalized against rank @p ndim; a generator (Philox)
// is the default one of @p device when absent, and advances by @p draws
// elements. False: not expressible (-> next tier). Throws c10::Error for
// a dim out of range.
bool encodeScalar(const ScalarSpec& spec, const ScalarArg& arg, const c10::IValue* args,
                  int64_t ndim, c10::Device device, int64_t draws,
                  c10::SmallVectorImpl<flagosScalar>& out);

}  // namespace flagos::semantic
