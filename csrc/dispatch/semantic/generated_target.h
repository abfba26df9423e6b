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

// Whether the device compiles double-precision code: a tiny probe build
// where the dialect has one (Dialect::fp64Probe).
bool probeFp64(const flagosCompilerTable* c, int32_t physical);

}  // namespace flagos::semantic
