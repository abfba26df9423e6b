// A plugin's list of devices: built by init(), emptied by shutdown(), never
// destroyed (tables may be called during process exit, after static
// destructors would have run), and the lookups every table member starts
// with. `devices` is written only by init() and shutdown(), which the core
// calls before and after every other member.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "flagos/status.h"
#include "flagos_kit/error.h"

namespace flagos_kit {

template <typename Device>
struct DeviceList {
  std::mutex init_mutex;
  std::atomic<bool> initialized{false};  // set after devices is filled
  std::vector<std::unique_ptr<Device>> devices;

  // The device of @p index, or nullptr after recording an INVALID_ARGUMENT
  // message naming @p call (also before init()).
  Device* find(const char* call, int32_t index) noexcept {
    if (!initialized) {
      fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: plugin not initialized (init() not called)",
           kPluginName, call);
      return nullptr;
    }
    if (index < 0 || static_cast<size_t>(index) >= devices.size()) {
      fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: device %d out of range (%zu devices)",
           kPluginName, call, index, devices.size());
      return nullptr;
    }
    return devices[static_cast<size_t>(index)].get();
  }

  // device.h init's frame: once per process (a second call succeeds at
  // once), under the lock. @p make(devices) fills the list or returns the
  // error (with its message recorded); only then is the list published.
  // @p opened() runs once, still under the lock, after it is published
  // (opencl starts its warm-up there).
  template <typename Make, typename Opened>
  flagosStatus_t open(Make&& make, Opened&& opened) {
    std::lock_guard<std::mutex> lock(init_mutex);
    if (initialized) return FLAGOS_SUCCESS;
    std::vector<std::unique_ptr<Device>> made;
    const flagosStatus_t status = make(made);
    if (status != FLAGOS_SUCCESS) return status;
    devices = std::move(made);
    initialized = true;
    opened();
    return FLAGOS_SUCCESS;
  }
  template <typename Make>
  flagosStatus_t open(Make&& make) {
    return open(std::forward<Make>(make), [] {});
  }

  // device.h shutdown's frame, under the lock: @p before() runs first (opencl
  // stops its warm-up, which uses the devices), then streams the core left
  // behind (it destroys its own first) are deleted, which drains and joins
  // them so that no worker outlives the library (dlclose), then the devices
  // go. Device needs `streams_mutex` and a `streams` container of handles.
  template <typename Before>
  flagosStatus_t close(Before&& before) {
    std::lock_guard<std::mutex> lock(init_mutex);
    before();
    for (auto& device : devices) {
      std::lock_guard<std::mutex> streams_lock(device->streams_mutex);
      for (auto stream : device->streams) delete stream;
      device->streams.clear();
    }
    initialized = false;
    devices.clear();
    return FLAGOS_SUCCESS;
  }
  flagosStatus_t close() {
    return close([] {});
  }

  // device.h getCount.
  flagosStatus_t count(int32_t* count) {
    if (count == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s getCount: count is NULL", kPluginName);
    }
    if (!initialized) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s getCount: plugin not initialized",
                  kPluginName);
    }
    *count = static_cast<int32_t>(devices.size());
    return FLAGOS_SUCCESS;
  }
};

// device.h getCount over the plugin's @p List() (returning its DeviceList).
template <auto List>
flagosStatus_t getCount(int32_t* count) noexcept {
  return guard("getCount", [&] { return List().count(count); });
}

}  // namespace flagos_kit
