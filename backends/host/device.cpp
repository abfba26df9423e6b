// The device table: probe, init/shutdown, enumeration, the per-thread
// current device and device-wide synchronization.
//
// A host device is a slice of this machine: its memory is an arena of the
// process's address space (arena.cpp), its streams are worker threads
// (stream.cpp). Devices are numbered 0 .. FLAGOS_HOST_DEVICES-1.
#include <sys/utsname.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "host.h"

namespace flagos_host {
namespace {

// Calls with no explicit device act on this one (like cudaSetDevice).
thread_local int32_t t_current_device = 0;

template <size_t N>
void copyString(char (&dst)[N], const std::string& src) {
  const size_t n = std::min(src.size(), N - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

// Writes @p value into a caller's struct that starts with struct_size: only
// the first struct_size bytes, so a core built against an older minor (a
// smaller struct) is never overrun; struct_size keeps the caller's value.
template <typename T>
flagosStatus_t writeSized(const char* call, T* out, const T& value) {
  if (out == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host %s: out is NULL", call);
  const uint32_t caller_size = out->struct_size;
  if (caller_size < sizeof(uint32_t)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host %s: struct_size %u is too small", call,
                caller_size);
  }
  std::memcpy(out, &value, std::min<size_t>(caller_size, sizeof(T)));
  out->struct_size = caller_size;
  return FLAGOS_SUCCESS;
}

std::string machineArch() {
  struct utsname name {};
  return uname(&name) == 0 ? std::string(name.machine) : std::string("unknown");
}

flagosStatus_t probe(flagosProbeInfo* info) noexcept {
  return guard("probe", [&] {
    flagosProbeInfo result{};
    copyString(result.sdk_name, "host");
    copyString(result.sdk_version, kVersion);
    Config config;
    std::string reason;
    if (!loadConfig(&config, &reason)) {
      config.device_count = 0;
    } else if (config.device_count == 0) {
      reason = "FLAGOS_HOST_DEVICES=0: no host devices requested";
    }
    result.device_count = config.device_count;
    copyString(result.reason, reason);
    const flagosStatus_t status = writeSized("probe", info, result);
    if (status != FLAGOS_SUCCESS) return status;
    if (!reason.empty()) return fail(FLAGOS_ERROR_NO_DEVICE, "host probe: %s", reason.c_str());
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t init() noexcept {
  return guard("init", [&] {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.init_mutex);
    if (s.initialized) return FLAGOS_SUCCESS;
    Config config;
    std::string error;
    if (!loadConfig(&config, &error)) {
      return fail(FLAGOS_ERROR_DEVICE, "host init: %s", error.c_str());
    }
    if (config.device_count == 0) {
      return fail(FLAGOS_ERROR_DEVICE, "host init: FLAGOS_HOST_DEVICES=0: no host devices");
    }
    std::vector<std::unique_ptr<Device>> devices;
    for (int32_t i = 0; i < config.device_count; ++i) {
      auto device = std::make_unique<Device>();
      device->index = i;
      device->arena = Arena::create(i, config.memory_limit);
      if (!device->arena) return FLAGOS_ERROR_DEVICE;  // create() left the message
      devices.push_back(std::move(device));
    }
    s.devices = std::move(devices);
    s.initialized = true;
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t shutdown() noexcept {
  return guard("shutdown", [&] {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.init_mutex);
    // The core destroyed its streams already; any left over are drained and
    // joined here so that no worker outlives the library (dlclose).
    for (auto& device : s.devices) {
      std::lock_guard<std::mutex> streams_lock(device->streams_mutex);
      for (flagosStream_t stream : device->streams) delete stream;
      device->streams.clear();
    }
    s.initialized = false;
    s.devices.clear();  // unmaps the arenas
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t getCount(int32_t* count) noexcept {
  return guard("getCount", [&] {
    if (count == nullptr)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host getCount: count is NULL");
    if (!state().initialized) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host getCount: plugin not initialized");
    }
    *count = static_cast<int32_t>(state().devices.size());
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t getProperties(int32_t index, flagosDeviceProperties* props) noexcept {
  return guard("getProperties", [&] {
    Device* device = findDevice("getProperties", index);
    if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    flagosDeviceProperties result{};
    result.compute_units = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
    result.total_memory = device->arena->size();
    copyString(result.name, "host");
    copyString(result.arch, machineArch());
    result.preferred_work_group_size = static_cast<uint32_t>(kDefaultGrain);  // no work-groups
    return writeSized("getProperties", props, result);
  });
}

flagosStatus_t setCurrent(int32_t index) noexcept {
  return guard("setCurrent", [&] {
    if (findDevice("setCurrent", index) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    t_current_device = index;
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t getCurrent(int32_t* index) noexcept {
  return guard("getCurrent", [&] {
    if (index == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host getCurrent: device is NULL");
    }
    *index = t_current_device;
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t synchronize(int32_t index) noexcept {
  return guard("synchronize", [&] {
    Device* device = findDevice("synchronize", index);
    return device == nullptr ? FLAGOS_ERROR_INVALID_ARGUMENT : synchronizeDevice(device);
  });
}

}  // namespace

State& state() {
  static State* s = new State();  // never destroyed: see the comment on State
  return *s;
}

Device* findDevice(const char* call, int32_t index) noexcept {
  State& s = state();
  if (!s.initialized) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host %s: plugin not initialized (init() not called)",
         call);
    return nullptr;
  }
  if (index < 0 || static_cast<size_t>(index) >= s.devices.size()) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host %s: device %d out of range (%zu devices)", call,
         index, s.devices.size());
    return nullptr;
  }
  return s.devices[static_cast<size_t>(index)].get();
}

Arena* findArena(const void* ptr, uint64_t bytes) noexcept {
  State& s = state();
  if (!s.initialized) return nullptr;
  for (auto& device : s.devices) {
    if (device->arena->contains(ptr, bytes)) return device->arena.get();
  }
  return nullptr;
}

flagosStatus_t synchronizeDevice(Device* device) {
  std::lock_guard<std::mutex> lock(device->streams_mutex);
  flagosStatus_t first = FLAGOS_SUCCESS;
  for (flagosStream_t stream : device->streams) {
    const flagosStatus_t status = stream->synchronize();
    if (first == FLAGOS_SUCCESS) first = status;
  }
  return first;
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

}  // namespace flagos_host
