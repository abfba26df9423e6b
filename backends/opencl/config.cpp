// The plugin's two environment variables, read by probe() and init() (and
// FLAGOS_OPENCL_DEVICE_TYPE by the entry point, for the priority):
//
//   FLAGOS_OPENCL_DEVICE_TYPE   which devices to use: gpu, cpu, accelerator
//                               or all (default; case-insensitive). Under
//                               "all", GPUs and accelerators are chosen over
//                               CPU devices when there are any.
//   FLAGOS_OPENCL_MEMORY_LIMIT  bytes per device malloc may hand out: an
//                               integer with an optional suffix K, M, G, T
//                               (also KB/KiB, ...; all binary,
//                               case-insensitive), at least 4K. Capped at the
//                               device's CL_DEVICE_GLOBAL_MEM_SIZE (which
//                               PoCL's CPU device takes from
//                               POCL_MEMORY_LIMIT). Default: that size.
//
// An empty variable counts as unset. Garbage is never silently replaced by a
// default: probe() fails and its reason names the variable and the value.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "opencl.h"

namespace flagos_opencl {
namespace {

constexpr uint64_t kMinMemoryLimit = 4096;

std::string trim(const char* text) {
  std::string s(text);
  const auto first = s.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\n") - first + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parseDeviceType(const char* text, DeviceType* type, std::string* error) {
  const std::string s = lower(trim(text));
  if (s == "all") {
    *type = DeviceType::kAll;
  } else if (s == "gpu") {
    *type = DeviceType::kGpu;
  } else if (s == "cpu") {
    *type = DeviceType::kCpu;
  } else if (s == "accelerator") {
    *type = DeviceType::kAccelerator;
  } else {
    *error = "FLAGOS_OPENCL_DEVICE_TYPE='" + std::string(text) +
             "' is not a device type (gpu, cpu, accelerator or all)";
    return false;
  }
  return true;
}

// Parses leading decimal digits of @p s into @p value; returns the number of
// characters used (0 on no digits or overflow).
size_t parseDigits(const std::string& s, uint64_t* value) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return 0;
  errno = 0;
  char* end = nullptr;
  *value = std::strtoull(s.c_str(), &end, 10);
  if (errno == ERANGE) return 0;
  return static_cast<size_t>(end - s.c_str());
}

// Binary multiplier of a size suffix ("", "k", "KiB", "mb", ...), 0 if unknown.
uint64_t suffixMultiplier(const std::string& text) {
  const std::string suffix = lower(text);
  if (suffix.empty() || suffix == "b") return 1;
  const std::string units = "kmgt";
  const auto unit = units.find(suffix[0]);
  const std::string rest = suffix.substr(1);
  if (unit == std::string::npos || !(rest.empty() || rest == "b" || rest == "ib")) return 0;
  return uint64_t{1} << (10 * (unit + 1));
}

bool parseMemoryLimit(const char* text, uint64_t* bytes, std::string* error) {
  const std::string s = trim(text);
  uint64_t value = 0;
  const size_t digits = parseDigits(s, &value);
  const uint64_t multiplier = digits > 0 ? suffixMultiplier(trim(s.c_str() + digits)) : 0;
  if (multiplier == 0 || value > UINT64_MAX / multiplier || value * multiplier < kMinMemoryLimit) {
    *error = "FLAGOS_OPENCL_MEMORY_LIMIT='" + std::string(text) +
             "' is not a size in bytes of at least 4K (examples: 1073741824, 512M, 2GiB)";
    return false;
  }
  *bytes = value * multiplier;
  return true;
}

}  // namespace

bool loadConfig(Config* config, std::string* error) {
  Config result;
  const char* type = std::getenv("FLAGOS_OPENCL_DEVICE_TYPE");
  if (type != nullptr && *type != '\0' && !parseDeviceType(type, &result.device_type, error))
    return false;
  const char* limit = std::getenv("FLAGOS_OPENCL_MEMORY_LIMIT");
  if (limit != nullptr && *limit != '\0' && !parseMemoryLimit(limit, &result.memory_limit, error))
    return false;
  *config = result;
  return true;
}

}  // namespace flagos_opencl
