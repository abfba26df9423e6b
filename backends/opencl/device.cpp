// The device table: probe, init/shutdown, enumeration, the per-thread
// current device and device-wide synchronization.
//
// Each device gets its own context (so a device's buffers, queues and
// programs never mix with another's), a queue for synchronous copies, and
// a window of virtual addresses (address_space.h).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "flagos_kit/calls.h"
#include "opencl.h"

namespace flagos_opencl {
namespace {

// The kernel-cache key of a device: "opencl:<vendor>:<name>:<driver>". A
// binary built by one driver must never be loaded by another, so the driver
// version must survive; arch[] holds 63 characters, so a longer key keeps a
// readable prefix and ends in a hash of the whole key.
std::string archKey(const DeviceInfo& info) {
  const std::string key = deviceKey(info);
  constexpr size_t kCapacity = sizeof(flagosDeviceProperties{}.arch) - 1;
  if (key.size() <= kCapacity) return key;
  char hash[18];
  std::snprintf(hash, sizeof(hash), "#%016" PRIx64, fnv1a(key.data(), key.size()));
  return key.substr(0, kCapacity - 17) + hash;
}

// Creates what one device needs; nullptr after recording the error.
std::unique_ptr<Device> openDevice(int32_t index, const DeviceInfo& info, const Config& config) {
  auto device = std::make_unique<Device>();
  device->index = index;
  device->info = info;
  device->total_memory = config.memory_limit > 0 ? std::min(config.memory_limit, info.global_memory)
                                                 : info.global_memory;
  device->small_gemm_macs = config.small_gemm_macs;
  const cl_context_properties properties[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(info.platform), 0};
  cl_int error = CL_SUCCESS;
  device->context = clCreateContext(properties, 1, &info.id, nullptr, nullptr, &error);
  if (device->context == nullptr) {
    fail(FLAGOS_ERROR_DEVICE, "opencl init: clCreateContext for device %d (%s) failed: %s", index,
         info.name.c_str(), clErrorName(error).c_str());
    return nullptr;
  }
  device->sync_queue = clCreateCommandQueue(device->context, info.id, 0, &error);
  if (device->sync_queue == nullptr) {
    fail(FLAGOS_ERROR_DEVICE, "opencl init: clCreateCommandQueue for device %d failed: %s", index,
         clErrorName(error).c_str());
    return nullptr;
  }
  device->addresses = AddressSpace::create(index, device->total_memory);
  if (!device->addresses) return nullptr;  // create() left the message
  return device;
}

// getProperties' answer for @p device (flagos_kit::getProperties checks
// the index and writes it).
flagosDeviceProperties deviceProperties(const Device& device) {
  flagosDeviceProperties result{};
  result.compute_units = std::max(1, device.info.compute_units);
  result.total_memory = device.total_memory;
  // The device's OpenCL version: what the generator may assume.
  result.capability_major = device.info.cl_major;
  result.capability_minor = device.info.cl_minor;
  flagos_kit::copyString(result.name, device.info.name);
  flagos_kit::copyString(result.arch, archKey(device.info));
  result.max_work_group_size =
      static_cast<uint32_t>(std::min<uint64_t>(device.info.max_work_group_size, UINT32_MAX));
  result.fp64 = device.info.fp64 ? FLAGOS_FP64_NATIVE : FLAGOS_FP64_NONE;
  // CPU devices (PoCL) have no fast float16 either; GPUs run both, and
  // float16 is what CUDA code expects.
  result.autocast_dtype = device.info.accelerator ? FLAGOS_DTYPE_FLOAT16 : FLAGOS_DTYPE_BFLOAT16;
  return result;
}

// The device table (device.h), one static member per entry.
// setCurrent/getCurrent (the calling thread's device) and synchronize
// (over synchronizeDevice) are the kit's (calls.h).
struct DeviceCalls : flagos_kit::DeviceCallsBase<findDevice, synchronizeDevice> {
  static flagosStatus_t probe(flagosProbeInfo* info) noexcept {
    return guard("probe", [&] {
      flagosProbeInfo result{};
      flagos_kit::copyString(result.sdk_name, "OpenCL");
      Config config;
      std::string reason;
      std::vector<DeviceInfo> devices;
      if (loadConfig(&config, &reason) && discoverDevices(config, &devices, &reason)) {
        result.device_count = static_cast<int32_t>(devices.size());
        flagos_kit::copyString(result.sdk_version, devices.front().platform_version);
        flagos_kit::copyString(result.driver_version, devices.front().driver_version);
        // See Note [OpenCL plugin priority]: all chosen devices are of one class.
        if (!devices.front().accelerator) result.priority = FLAGOS_PRIORITY_CPU_HOSTED - 5;
      }
      return flagos_kit::answerProbe(info, result, reason);  // NO_DEVICE when reason is set
    });
  }

  static flagosStatus_t init() noexcept {
    return guard("init", [&] {
      State& s = state();
      Config config;
      auto make = [&](std::vector<std::unique_ptr<Device>>& devices) {
        std::string error;
        std::vector<DeviceInfo> infos;
        if (!loadConfig(&config, &error) || !discoverDevices(config, &infos, &error)) {
          return fail(FLAGOS_ERROR_DEVICE, "opencl init: %s", error.c_str());
        }
        for (size_t i = 0; i < infos.size(); ++i) {
          auto device = openDevice(static_cast<int32_t>(i), infos[i], config);
          if (!device) return FLAGOS_ERROR_DEVICE;
          devices.push_back(std::move(device));
        }
        bool pocl = false;
        for (const DeviceInfo& info : infos) pocl = pocl || info.pocl;
        setSerializeCompiles(pocl);
        return FLAGOS_SUCCESS;
      };
      auto opened = [&] {
        if (config.warmup == Warmup::kOff) return;
        std::vector<Device*> warm;
        for (auto& device : s.devices) warm.push_back(device.get());
        startWarmup(warm, config.warmup);  // returns at once
      };
      return s.open(make, opened);
    });
  }

  static flagosStatus_t shutdown() noexcept {
    // The warm-up uses the devices: the step in flight finishes first. Then
    // leftover streams finish and are released before their contexts go,
    // and the devices (buffers, queues, contexts, address windows).
    return guard("shutdown", [&] { return state().close([] { stopWarmup(); }); });
  }

  static constexpr auto getCount = flagos_kit::getCount<state>;  // devices.h

  static constexpr auto getProperties = flagos_kit::getProperties<findDevice, deviceProperties>;
};

}  // namespace

Device::~Device() {
  addresses.reset();  // releases buffers the core left behind
  if (sync_queue != nullptr) {
    clFinish(sync_queue);
    clReleaseCommandQueue(sync_queue);
  }
  if (context != nullptr) clReleaseContext(context);
}

State& state() {
  static State* s = new State();  // never destroyed: see the comment on State
  return *s;
}

Device* findDevice(const char* call, int32_t index) noexcept {
  return state().find(call, index);
}

bool resolve(const char* call, const void* address, uint64_t bytes, DevicePtr* out) noexcept {
  State& s = state();
  if (!s.initialized) {
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl %s: plugin not initialized", call);
    return false;
  }
  const auto value = reinterpret_cast<uint64_t>(address);
  for (auto& device : s.devices) {
    if (!device->addresses->owns(value)) continue;
    if (!device->addresses->find(value, bytes, &out->buffer, &out->offset)) {
      fail(FLAGOS_ERROR_INVALID_ARGUMENT,
           "opencl %s: [%p, +%" PRIu64 ") is not inside one live allocation of device %d", call,
           address, bytes, device->index);
      return false;
    }
    out->device = device.get();
    return true;
  }
  fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl %s: %p is not a device address of any opencl device",
       call, address);
  return false;
}

flagosStatus_t synchronizeDevice(Device* device) {
  std::lock_guard<std::mutex> lock(device->streams_mutex);
  flagosStatus_t first = flagos_kit::synchronizeStreams(device->streams);
  const cl_int error = clFinish(device->sync_queue);
  if (error != CL_SUCCESS && first == FLAGOS_SUCCESS) {
    first = fail(FLAGOS_ERROR_DEVICE, "opencl synchronize: clFinish on device %d failed: %s",
                 device->index, clErrorName(error).c_str());
  }
  return first;
}

std::string deviceKey(const DeviceInfo& info) {
  return "opencl:" + info.vendor + ":" + info.name + ":" + info.driver_version;
}

const flagosDeviceTable* deviceTable() {
  return flagos_kit::deviceTable<DeviceCalls>();
}

}  // namespace flagos_opencl
