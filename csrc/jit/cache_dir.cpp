// The cache directory's settings (cache_dir.h), read once per process.
#include "jit/cache_dir.h"

#include <c10/util/Exception.h>

#include "flagos_kit/byte_size.h"
#include "runtime/env.h"

namespace flagos::semantic {

std::string defaultCacheDir() {
  if (auto dir = env::value("FLAGOS_CACHE_DIR")) return *dir;
  if (auto xdg = env::value("XDG_CACHE_HOME")) return *xdg + "/flagos";
  if (auto home = env::value("HOME")) return *home + "/.cache/flagos";
  return "";
}

// FLAGOS_PRELOAD (Note [Kernel preload]): on (default) or off.
bool preloadEnabled() {
  static const bool on = env::flag("FLAGOS_PRELOAD", true);
  return on;
}

uint64_t maxDiskBytes(uint64_t fallback) {
  const auto text = env::value("FLAGOS_CACHE_MAX_BYTES");
  if (!text) return fallback;
  uint64_t bytes = 0;
  TORCH_CHECK(flagos_kit::parseByteSize(*text, &bytes), "FLAGOS_CACHE_MAX_BYTES='", *text,
              "': expected bytes, e.g. 536870912, 512M or 512MiB");
  return bytes;
}

}  // namespace flagos::semantic
