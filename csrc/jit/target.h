// What generated code is built for: whether the backend has a compiler, and
// per device the facts a kernel depends on (identity, local size, fp64).
#pragma once

#include <cstdint>
#include <string>

#include "flagos/compiler.h"

namespace flagos::semantic {

// Whether the active backend has a compiler table (false before
// initialize; cached from then on).
bool hasCompiler();

// Everything about a device that changes a binary: backend, SDK and driver
// versions, architecture, model (the fp64 answer is added by the caller).
std::string deviceIdentity(int32_t physical);

// Note [Launch geometry] (compiler.h): the local size of every generated
// launch on @p physical; FLAGOS_WORK_GROUP_SIZE overrides the device's.
uint64_t localSize(int32_t physical);

// Whether the device computes double precision, as the plugin reports it
// (flagosDeviceProperties.fp64, ABI 1.1); FLAGOS_FP64_UNKNOWN from a 1.0
// plugin, which leaves the member zero.
int32_t reportedFp64(int32_t physical);

// Whether the device compiles double-precision code: a tiny probe build
// where the dialect has one (Dialect::fp64Probe). Only for devices whose
// plugin does not report fp64.
bool probeFp64(const flagosCompilerTable* c, int32_t physical);

}  // namespace flagos::semantic
