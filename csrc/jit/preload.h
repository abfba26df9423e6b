// The generated tier's side of Note [Kernel preload] (csrc/jit/gen/manifest.h):
// each device's manifest, written at exit and read at initialize.
#pragma once

#include <string>

#include "jit/devices.h"

namespace flagos::semantic {

// Where a device's manifest lives: beside its kernel files, named by the
// target and every device fact but the fp64 answer the manifest holds.
std::string manifestPath(const std::string& kernel_dir, const std::string& language,
                         const std::string& device);

// Note [Kernel preload]: what this process used, for the next one. Never
// throws (it runs at exit); a failed write only loses the preload.
void writeManifest(const DeviceGenerator& d);

// At initialize (initialize_hooks.cpp): the generators of the devices with
// a manifest, so their kernels load in the background.
void preloadKernels();

}  // namespace flagos::semantic
