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
#include "flagos_kit/env.h"
#include "opencl.h"

namespace flagos_opencl {
namespace {

constexpr uint64_t kMinMemoryLimit = 4096;

bool parseDeviceType(const char* text, DeviceType* type, std::string* error) {
  const std::string s = flagos_kit::lowered(flagos_kit::trimmed(text));
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

bool parseWarmup(const char* text, Warmup* mode, std::string* error) {
  const std::string s = flagos_kit::lowered(flagos_kit::trimmed(text));
  if (const auto flag = flagos_kit::parseFlag(s)) {
    *mode = *flag ? Warmup::kOn : Warmup::kOff;
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
  const auto type = flagos_kit::envValue("FLAGOS_OPENCL_DEVICE_TYPE");
  if (type && !parseDeviceType(type->c_str(), &result.device_type, error)) return false;
  if (!flagos_kit::envByteSize("FLAGOS_OPENCL_MEMORY_LIMIT", kMinMemoryLimit, 0,
                               &result.memory_limit, error))
    return false;
  const auto warmup = flagos_kit::envValue("FLAGOS_OPENCL_WARMUP");
  if (warmup && !parseWarmup(warmup->c_str(), &result.warmup, error)) return false;
  const auto small = flagos_kit::envValue("FLAGOS_OPENCL_SMALL_GEMM");
  if (small && !parseSmallGemm(small->c_str(), &result.small_gemm_macs, error)) return false;
  *config = result;
  return true;
}

}  // namespace flagos_opencl
