// Where flagos keeps what outlives a process (generated kernels, their
// manifests, the shape store), whether a process preloads from it, and how
// large the kernel files may grow.
#pragma once

#include <cstdint>
#include <string>

namespace flagos::semantic {

// $FLAGOS_CACHE_DIR, else $XDG_CACHE_HOME/flagos, else ~/.cache/flagos ("" when none is known).
std::string defaultCacheDir();

// FLAGOS_PRELOAD (on|off; Note [Kernel preload], Note [Shape inference
// across processes]); a bad value throws.
bool preloadEnabled();

// FLAGOS_CACHE_MAX_BYTES, parsed like the plugins' memory limits; unset:
// @p fallback. A bad value throws.
uint64_t maxDiskBytes(uint64_t fallback);

}  // namespace flagos::semantic
