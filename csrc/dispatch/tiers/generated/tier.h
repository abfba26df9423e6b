// Tier 2 of the semantic bridge: generated kernels through the kernel cache.
// See Note [The generated tier] in tier.cpp.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "flagos/stream.h"
#include "jit/gen/generator.h"

namespace flagos::semantic {

// Whether semantic op @p op (index into kOps) has a recipe and the active
// backend a compiler table. Cheap after the first call per op.
bool hasGeneratedKernel(int op);

// Whether op @p op's generated kernel takes in-place calls only
// (kernels::inPlaceOnly for the active compiler's language).
bool generatedInPlaceOnly(int op);

// Runs @p call (prepared by the bridge exactly as for a native kernel) with
// a generated kernel on @p stream of logical device @p device. False: the
// generator declined this call or its kernel failed to compile (reported
// once per kernel); the bridge takes the next tier. Launch errors raise.
bool runGeneratedKernel(int op, c10::DeviceIndex device, flagosStream_t stream,
                        const kernels::Call& call);

// {"policy": ..., "devices": [per-device cache stats], "declined": n, ...} as JSON.
std::string kernelCacheStatsJson();
// Blocks until every device's background compiler pool is idle.
void waitForSpecializations();

}  // namespace flagos::semantic
