// The plugin's environment variables, read by probe() and init() (and
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
//   FLAGOS_OPENCL_WARMUP        the SDK warm-up thread after init (Note [SDK
//                               warm-up] in warmup.cpp): on (default; also
//                               1/true/yes), off (0/false/no), or verbose
//                               (on, and one line per step on stderr).
//   FLAGOS_OPENCL_SMALL_GEMM    the largest GEMM, in multiply-adds (batch *
//                               M * N * K, a plain integer), that runs on the
//                               plugin's own kernel instead of CLBlast (Note
//                               [Small GEMMs] in kernels/gemm_small.cpp).
//                               Default 262144 (64^3); 0: CLBlast always.
//
// An empty variable counts as unset. Garbage is never silently replaced by a
// default: probe() fails and its reason names the variable and the value.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "flagos_kit/byte_size.h"
#include "opencl.h"

namespace flagos_opencl {
namespace {

constexpr uint64_t kMinMemoryLimit = 4096;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parseDeviceType(const char* text, DeviceType* type, std::string* error) {
  const std::string s = lower(flagos_kit::trimmed(text));
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

bool parseMemoryLimit(const char* text, uint64_t* bytes, std::string* error) {
  uint64_t value = 0;
  if (!flagos_kit::parseByteSize(text, &value) || value < kMinMemoryLimit) {
    *error = "FLAGOS_OPENCL_MEMORY_LIMIT='" + std::string(text) +
             "' is not a size in bytes of at least 4K (examples: 1073741824, 512M, 2GiB)";
    return false;
  }
  *bytes = value;
  return true;
}

bool parseWarmup(const char* text, Warmup* mode, std::string* error) {
  const std::string s = lower(flagos_kit::trimmed(text));
  if (s == "on" || s == "1" || s == "true" || s == "yes") {
    *mode = Warmup::kOn;
  } else if (s == "off" || s == "0" || s == "false" || s == "no") {
    *mode = Warmup::kOff;
  } else if (s == "verbose") {
    *mode = Warmup::kVerbose;
  } else {
    *error = "FLAGOS_OPENCL_WARMUP='" + std::string(text) + "' is not on, off or verbose";
    return false;
  }
  return true;
}

bool parseSmallGemm(const char* text, uint64_t* macs, std::string* error) {
  const std::string s = flagos_kit::trimmed(text);
  uint64_t value = 0;
  if (s.empty() || flagos_kit::parseDigits(s, &value) != s.size()) {
    *error = "FLAGOS_OPENCL_SMALL_GEMM='" + std::string(text) +
             "' is not a number of multiply-adds (a non-negative integer; 0: always CLBlast)";
    return false;
  }
  *macs = value;
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
  const char* warmup = std::getenv("FLAGOS_OPENCL_WARMUP");
  if (warmup != nullptr && *warmup != '\0' && !parseWarmup(warmup, &result.warmup, error))
    return false;
  const char* small = std::getenv("FLAGOS_OPENCL_SMALL_GEMM");
  if (small != nullptr && *small != '\0' && !parseSmallGemm(small, &result.small_gemm_macs, error))
    return false;
  *config = result;
  return true;
}

}  // namespace flagos_opencl
