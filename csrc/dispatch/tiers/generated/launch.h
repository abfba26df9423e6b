// Launching generated kernels, shared by the generated tier
// (tier.cpp) and the generated copies (copy.cpp).
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>

#include "flagos/stream.h"
#include "jit/gen/generator.h"

namespace flagos::semantic {

// For kernel_cache_stats().
extern std::atomic<uint64_t> g_declined;  // calls the generator declined (dtype, rank, ...)
extern std::atomic<uint64_t> g_failed;    // calls that met a failed compile
extern std::atomic<uint64_t> g_launches;  // generic + specialized launches
extern std::atomic<uint64_t> g_specialized_launches;
// Launches of reductions and row operators per strategy (Launch::strategy:
// 1 rows, 2 columns, 3 group; Note [Reduction strategies]).
extern std::atomic<uint64_t> g_strategy_launches[4];

// The generated tier for one prepared call of semantic op @p id; false: the
// generator declined it or its kernel failed to build. Launch errors raise.
bool launchGenerated(const char* id, const kernels::Recipe* recipe, c10::DeviceIndex device,
                     flagosStream_t stream, const kernels::Call& call);

}  // namespace flagos::semantic
