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

#include "flagos_kit/calls.h"
#include "host.h"

namespace flagos_host {
namespace {

std::string machineArch() {
  struct utsname name {};
  return uname(&name) == 0 ? std::string(name.machine) : std::string("unknown");
}

// getProperties' answer for @p device (flagos_kit::getProperties checks
// the index and writes it).
flagosDeviceProperties deviceProperties(const Device& device) {
  flagosDeviceProperties result{};
  result.compute_units = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  result.total_memory = device.arena->size();
  flagos_kit::copyString(result.name, "host");
  flagos_kit::copyString(result.arch, machineArch());
  result.preferred_work_group_size = static_cast<uint32_t>(kDefaultGrain);  // no work-groups
  result.fp64 = FLAGOS_FP64_NATIVE;
  result.autocast_dtype = FLAGOS_DTYPE_BFLOAT16;  // CPUs have no fast float16 arithmetic
  return result;
}

// The device table (device.h), one static member per entry.
// setCurrent/getCurrent (the calling thread's device) and synchronize
// (over synchronizeDevice) are the kit's (calls.h).
struct DeviceCalls : flagos_kit::DeviceCallsBase<findDevice, synchronizeDevice> {
  static flagosStatus_t probe(flagosProbeInfo* info) noexcept {
    return guard("probe", [&] {
      flagosProbeInfo result{};
      flagos_kit::copyString(result.sdk_name, "host");
      flagos_kit::copyString(result.sdk_version, kVersion);
      Config config;
      std::string reason;
      if (!loadConfig(&config, &reason)) {
        config.device_count = 0;
      } else if (config.device_count == 0) {
        reason = "FLAGOS_HOST_DEVICES=0: no host devices requested";
      }
      result.device_count = config.device_count;
      return flagos_kit::answerProbe(info, result, reason);  // NO_DEVICE when reason is set
    });
  }

  static flagosStatus_t init() noexcept {
    return guard("init", [&] {
      return state().open([](std::vector<std::unique_ptr<Device>>& devices) {
        Config config;
        std::string error;
        if (!loadConfig(&config, &error)) {
          return fail(FLAGOS_ERROR_DEVICE, "host init: %s", error.c_str());
        }
        if (config.device_count == 0) {
          return fail(FLAGOS_ERROR_DEVICE, "host init: FLAGOS_HOST_DEVICES=0: no host devices");
        }
        for (int32_t i = 0; i < config.device_count; ++i) {
          auto device = std::make_unique<Device>();
          device->index = i;
          device->arena = Arena::create(i, config.memory_limit);
          if (!device->arena) return FLAGOS_ERROR_DEVICE;  // create() left the message
          devices.push_back(std::move(device));
        }
        return FLAGOS_SUCCESS;
      });
    });
  }

  static flagosStatus_t shutdown() noexcept {
    // Leftover streams are joined, then the devices go (unmapping the arenas).
    return guard("shutdown", [&] { return state().close(); });
  }

  static constexpr auto getCount = flagos_kit::getCount<state>;  // devices.h

  static constexpr auto getProperties = flagos_kit::getProperties<findDevice, deviceProperties>;
};

}  // namespace

State& state() {
  static State* s = new State();  // never destroyed: see the comment on State
  return *s;
}

Device* findDevice(const char* call, int32_t index) noexcept {
  return state().find(call, index);
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
  return flagos_kit::synchronizeStreams(device->streams);
}

const flagosDeviceTable* deviceTable() {
  return flagos_kit::deviceTable<DeviceCalls>();
}

}  // namespace flagos_host
