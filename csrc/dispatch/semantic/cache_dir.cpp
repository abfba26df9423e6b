// The cache directory's settings (cache_dir.h), read once per process.
#include "dispatch/semantic/cache_dir.h"

#include <c10/util/Exception.h>

#include <cstdlib>

#include "flagos_kit/byte_size.h"

namespace flagos::semantic {

std::string defaultCacheDir() {
  if (const char* dir = std::getenv("FLAGOS_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/flagos";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/flagos";
  return "";
}

// FLAGOS_PRELOAD (Note [Kernel preload]): on (default) or off.
bool preloadEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("FLAGOS_PRELOAD");
    const std::string value = v ? v : "on";
    TORCH_CHECK(value == "on" || value == "off" || value == "1" || value == "0", "FLAGOS_PRELOAD='",
                value, "': expected on or off");
    return value == "on" || value == "1";
  }();
  return on;
}

uint64_t maxDiskBytes(uint64_t fallback) {
  const char* text = std::getenv("FLAGOS_CACHE_MAX_BYTES");
  if (!text || !*text) return fallback;
  uint64_t bytes = 0;
  TORCH_CHECK(flagos_kit::parseByteSize(text, &bytes), "FLAGOS_CACHE_MAX_BYTES='", text,
              "': expected bytes, e.g. 536870912, 512M or 512MiB");
  return bytes;
}

}  // namespace flagos::semantic
