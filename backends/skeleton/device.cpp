// The device table (device.h). SDK calls to make here: probe = "is the
// driver there, how many devices"; init = create contexts; properties =
// query the device.
#include <algorithm>
#include <thread>
#include <vector>

#include "flagos_kit/calls.h"
#include "flagos_kit/out_struct.h"
#include "skeleton.h"

namespace flagos_skeleton {
namespace {

// Built by init(), never destroyed: tables may be called during process
// exit, after static destructors would have run.
std::vector<Device*>* g_devices = nullptr;
std::mutex g_init_mu;

// Waits for every stream of @p device (SDK: the device synchronize).
flagosStatus_t synchronizeDevice(Device* device) {
  std::lock_guard<std::mutex> lock(device->mu);
  return flagos_kit::synchronizeStreams(device->streams);
}

// getProperties' answer for @p device (flagos_kit::getProperties checks
// the index and writes it).
flagosDeviceProperties deviceProperties(const Device& /*device*/) {
  flagosDeviceProperties result{};
  result.compute_units = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  result.total_memory = kCapacity;
  flagos_kit::copyString(result.name, "flagos skeleton device");
  flagos_kit::copyString(result.arch, "skeleton");  // part of kernel-cache keys
  result.fp64 = FLAGOS_FP64_NATIVE;                 // SDK: does the device compute doubles?
  result.autocast_dtype = FLAGOS_DTYPE_BFLOAT16;    // the lower precision it runs fastest
  return result;
}

// The device table (device.h), one static member per entry.
// setCurrent/getCurrent (the calling thread's device) and synchronize
// (over synchronizeDevice) are the kit's (calls.h).
struct DeviceCalls : flagos_kit::DeviceCallsBase<findDevice, synchronizeDevice> {
  static flagosStatus_t probe(flagosProbeInfo* info) noexcept {
    return guard("probe", [&] {
      flagosProbeInfo result{};
      result.device_count = 1;  // SDK: the number of usable devices
      flagos_kit::copyString(result.sdk_name, "skeleton");
      flagos_kit::copyString(result.sdk_version, kVersion);
      return flagos_kit::writeSized("probe", info, result);
    });
  }

  static flagosStatus_t init() noexcept {
    return guard("init", [&] {
      std::lock_guard<std::mutex> lock(g_init_mu);
      if (g_devices != nullptr) return FLAGOS_SUCCESS;  // idempotent
      auto devices = std::make_unique<std::vector<Device*>>();
      devices->push_back(new Device());  // SDK: one context per device
      devices->back()->index = 0;
      g_devices = devices.release();
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t shutdown() noexcept {
    return FLAGOS_SUCCESS;  // the core freed everything; memory goes with the process
  }

  static flagosStatus_t getCount(int32_t* count) noexcept {
    return guard("getCount", [&] {
      if (count == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton getCount: NULL");
      if (findDevice("getCount", 0) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      *count = static_cast<int32_t>(g_devices->size());
      return FLAGOS_SUCCESS;
    });
  }

  static constexpr auto getProperties = flagos_kit::getProperties<findDevice, deviceProperties>;
};

}  // namespace

Device* findDevice(const char* call, int32_t index) noexcept {
  if (g_devices == nullptr) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton %s: plugin not initialized", call);
    return nullptr;
  }
  if (index < 0 || static_cast<size_t>(index) >= g_devices->size()) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton %s: device %d out of range (%zu devices)", call,
         index, g_devices->size());
    return nullptr;
  }
  return (*g_devices)[static_cast<size_t>(index)];
}

const flagosDeviceTable* deviceTable() {
  return flagos_kit::deviceTable<DeviceCalls>();
}

}  // namespace flagos_skeleton
