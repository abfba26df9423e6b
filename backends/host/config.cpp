// The plugin's two environment variables, read by probe() and init():
//
//   FLAGOS_HOST_DEVICES       number of host devices, 0..64 (default 1;
//                             0 makes probe() report "no device").
//   FLAGOS_HOST_MEMORY_LIMIT  bytes of memory per device: an integer with an
//                             optional suffix K, M, G, T (also KB/KiB, ...;
//                             all binary, case-insensitive), at least 4K.
//                             Default: half of the physical RAM.
//
// An empty variable counts as unset. Garbage is never silently replaced by a default: probe() fails
// and its reason names the variable and the value.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "flagos_kit/byte_size.h"
#include "flagos_kit/env.h"
#include "host.h"

namespace flagos_host {
namespace {

constexpr int32_t kMaxDevices = 64;
constexpr uint64_t kMinMemoryLimit = 4096;

bool parseDeviceCount(const char* text, int32_t* count, std::string* error) {
  const std::string s = flagos_kit::trimmed(text);
  uint64_t value = 0;
  if (flagos_kit::parseDigits(s, &value) != s.size() || s.empty() || value > kMaxDevices) {
    *error = "FLAGOS_HOST_DEVICES='" + std::string(text) + "' is not a number of devices (0.." +
             std::to_string(kMaxDevices) + ")";
    return false;
  }
  *count = static_cast<int32_t>(value);
  return true;
}

uint64_t defaultMemoryLimit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 30;  // unknown RAM: 1 GiB
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / 2;
}

}  // namespace

bool loadConfig(Config* config, std::string* error) {
  Config result;
  const auto devices = flagos_kit::envValue("FLAGOS_HOST_DEVICES");
  if (devices && !parseDeviceCount(devices->c_str(), &result.device_count, error)) return false;
  if (!flagos_kit::envByteSize("FLAGOS_HOST_MEMORY_LIMIT", kMinMemoryLimit, defaultMemoryLimit(),
                               &result.memory_limit, error))
    return false;
  *config = result;
  return true;
}

}  // namespace flagos_host
