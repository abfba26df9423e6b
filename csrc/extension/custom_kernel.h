// User kernels from source: the extension interface (docs/extensions.md).
//
// Note [Custom kernels]
// ~~~~~~~~~~~~~~~~~~~~~
// A user kernel (a fused RMSNorm, a flash-attention forward) is compiled
// through the active plugin's compiler table, like a generated kernel, and
// kept in the same per-device kernel cache (kernel_cache.h): in memory, on
// disk (checked, shared by processes), listed in the manifest so the next
// process preloads it. Its key is the whole text, options, entry point,
// plugin name and version (KernelKey words, tag kCustomTag so it can never
// equal a generated key, which starts with kGeneratorVersion), so an edited
// source or another plugin version never reuses a binary. The core prepends
// a prelude per language (preludeFor) with the ABI's argument conventions
// as macros, so a kernel does not spell out compiler.h's "opencl-c" buffer +
// offset pairs or "c"'s args[k] casts by hand. Launches go on the calling
// thread's current stream of the tensors' device; they are never noted in
// the kernel's LaunchLog, so no zero-work first launch (Note [First
// launch]) ever runs a user kernel with NULL pointers.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "jit/gen/kernel_cache.h"

namespace flagos::extension {

// The language the active plugin compiles ("opencl-c", "c", ...), or ""
// when it has no compiler table.
std::string language();

// The text the core puts before a user kernel's source in @p language:
// macros for the argument conventions (empty for a language it has none for).
const std::string& preludeFor(const std::string& language);

// Compiles entry point @p name of @p source (prelude added) with @p options
// for logical @p device, or finds it in the cache. Throws std::runtime_error
// with the compiler's log when the source is rejected, or when the backend
// has no compiler.
const kernels::CompiledKernel* build(c10::DeviceIndex device, const std::string& name,
                                     const std::string& source, const std::string& options);

// A fused kernel's whole program (Note [Fused kernels], kernels/fused.h),
// compiled or found in the cache like a custom kernel, under its own key tag.
const kernels::CompiledKernel* buildFused(c10::DeviceIndex device, const kernels::Source& source);

// One launch argument: a device address or bytes by value.
struct Arg {
  const void* address = nullptr;  // FLAGOS_ARG_DEVICE_PTR when bytes is empty
  std::string bytes;              // FLAGOS_ARG_BYTES
  bool by_value = false;
};

// Enqueues @p kernel on the current stream of @p device. @p local empty:
// the plugin chooses. Throws on a bad geometry or a failed launch. @p custom:
// counted in launches() (fused kernels count their own).
void launch(const kernels::CompiledKernel& kernel, c10::DeviceIndex device,
            const std::vector<Arg>& args, const std::vector<uint64_t>& global,
            const std::vector<uint64_t>& local, bool custom = true);

// Launches of custom kernels in this process (kernel_cache_stats()).
uint64_t launches();

}  // namespace flagos::extension
