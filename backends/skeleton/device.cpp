// The device table (device.h). SDK calls to make here: probe = "is the
// driver there, how many devices"; init = create contexts; properties =
// query the device.
#include <algorithm>
#include <thread>
#include <vector>

#include "flagos_kit/out_struct.h"
#include "skeleton.h"

namespace flagos_skeleton {
namespace {

// Built by init(), never destroyed: tables may be called during process
// exit, after static destructors would have run.
std::vector<Device*>* g_devices = nullptr;
std::mutex g_init_mu;

flagosStatus_t probe(flagosProbeInfo* info) noexcept {
  return guard("probe", [&] {
    flagosProbeInfo result{};
    result.device_count = 1;  // SDK: the number of usable devices
    flagos_kit::copyString(result.sdk_name, "skeleton");
    flagos_kit::copyString(result.sdk_version, kVersion);
    return flagos_kit::writeSized("probe", info, result);
  });
}

flagosStatus_t init() noexcept {
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

flagosStatus_t shutdown() noexcept {
  return FLAGOS_SUCCESS;  // the core freed everything; memory goes with the process
}

flagosStatus_t getCount(int32_t* count) noexcept {
  return guard("getCount", [&] {
    if (count == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton getCount: NULL");
    if (findDevice("getCount", 0) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    *count = static_cast<int32_t>(g_devices->size());
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t getProperties(int32_t index, flagosDeviceProperties* props) noexcept {
  return guard("getProperties", [&] {
    if (findDevice("getProperties", index) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    flagosDeviceProperties result{};
    result.compute_units = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    result.total_memory = kCapacity;
    flagos_kit::copyString(result.name, "flagos skeleton device");
    flagos_kit::copyString(result.arch, "skeleton");  // part of kernel-cache keys
    result.fp64 = FLAGOS_FP64_NATIVE;                 // SDK: does the device compute doubles?
    result.autocast_dtype = FLAGOS_DTYPE_BFLOAT16;    // the lower precision it runs fastest
    return flagos_kit::writeSized("getProperties", props, result);
  });
}

flagosStatus_t setCurrent(int32_t index) noexcept {
  return guard("setCurrent", [&] {
    return flagos_kit::setCurrentDevice(
        index, [](int32_t i) { return findDevice("setCurrent", i) != nullptr; });
  });
}

flagosStatus_t getCurrent(int32_t* index) noexcept {
  return guard("getCurrent", [&] { return flagos_kit::getCurrentDevice(index); });
}

flagosStatus_t synchronize(int32_t index) noexcept {
  return guard("synchronize", [&] {
    Device* device = findDevice("synchronize", index);
    if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    std::lock_guard<std::mutex> lock(device->mu);
    flagosStatus_t first = FLAGOS_SUCCESS;
    for (flagosStream_t stream : device->streams) {
      const flagosStatus_t status = stream->synchronize();
      if (first == FLAGOS_SUCCESS) first = status;
    }
    return first;
  });
}

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
  static const flagosDeviceTable table = [] {
    flagosDeviceTable t{};
    t.struct_size = sizeof(t);
    t.probe = probe;
    t.init = init;
    t.shutdown = shutdown;
    t.getCount = getCount;
    t.getProperties = getProperties;
    t.setCurrent = setCurrent;
    t.getCurrent = getCurrent;
    t.synchronize = synchronize;
    return t;
  }();
  return &table;
}

}  // namespace flagos_skeleton
