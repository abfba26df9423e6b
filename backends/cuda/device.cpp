// The device table (device.h): probe (driver, devices, NVRTC), init (each
// device's primary context), properties.
//
// Note [Primary contexts]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The plugin works in each device's primary context, the one the CUDA
// runtime (and so torch's own CUDA, cuBLAS, cuDNN) uses too: memory and
// streams are valid on both sides, which is what lets a native `cuda`
// tensor and a `flagos` tensor on the same GPU share memory (DLPack), and
// what cuBLASLt and cuDNN, runtime-API libraries, need to see our memory.
// Every entry point that calls the driver first makes the device's primary
// context current on the calling thread (useContext), since the thread may
// be new or may have run another device's work.
#include <algorithm>
#include <cinttypes>

#include "cuda_plugin.h"

namespace flagos_cuda {
namespace {

std::string versionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

int attribute(CUdevice device, CUdevice_attribute what) {
  int value = 0;
  cu().cuDeviceGetAttribute(&value, what, device);
  return value;
}

flagosStatus_t makeDevices(std::vector<std::unique_ptr<Device>>& devices) {
  std::string reason;
  const Driver* d = driver(&reason);
  if (d == nullptr) return fail(FLAGOS_ERROR_DEVICE, "cuda init: %s", reason.c_str());
  int count = 0;
  flagosStatus_t st = check(d->cuDeviceGetCount(&count), "init", "cuDeviceGetCount");
  if (st != FLAGOS_SUCCESS) return FLAGOS_ERROR_DEVICE;
  if (count == 0) return fail(FLAGOS_ERROR_DEVICE, "cuda init: no CUDA device");
  for (int i = 0; i < count; ++i) {
    auto device = std::make_unique<Device>();
    device->index = i;
    if (check(d->cuDeviceGet(&device->device, i), "init", "cuDeviceGet") != FLAGOS_SUCCESS ||
        check(d->cuDevicePrimaryCtxRetain(&device->context, device->device), "init",
              "cuDevicePrimaryCtxRetain") != FLAGOS_SUCCESS) {
      return FLAGOS_ERROR_DEVICE;
    }
    char name[256] = {};
    d->cuDeviceGetName(name, sizeof(name) - 1, device->device);
    device->name = name;
    size_t total = 0;
    d->cuDeviceTotalMem(&total, device->device);
    device->total_memory = total;
    device->sm_count = attribute(device->device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    device->cc_major = attribute(device->device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    device->cc_minor = attribute(device->device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    device->warp = std::max(1, attribute(device->device, CU_DEVICE_ATTRIBUTE_WARP_SIZE));
    device->max_threads =
        std::max(1, attribute(device->device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    devices.push_back(std::move(device));
  }
  return FLAGOS_SUCCESS;
}

// getProperties' answer for @p device (flagos_kit::getProperties checks
// the index and writes it).
flagosDeviceProperties deviceProperties(const Device& device) {
  flagosDeviceProperties result{};
  result.compute_units = std::max(1, device.sm_count);
  result.total_memory = device.total_memory;
  result.capability_major = device.cc_major;
  result.capability_minor = device.cc_minor;
  flagos_kit::copyString(result.name, device.name);
  flagos_kit::copyString(result.arch, archOf(device));
  result.max_work_group_size = static_cast<uint32_t>(device.max_threads);
  // Eight warps: segments of 32 items (one warp) for row reductions and
  // enough blocks per SM for the memory-bound generated kernels.
  result.preferred_work_group_size = static_cast<uint32_t>(std::min(256, device.max_threads));
  result.fp64 = FLAGOS_FP64_NATIVE;
  result.autocast_dtype = FLAGOS_DTYPE_FLOAT16;  // what torch.autocast("cuda") picks
  return result;
}

// The device table (device.h), one static member per entry. setCurrent,
// getCurrent and synchronize are the kit's (calls.h).
struct DeviceCalls : flagos_kit::DeviceCallsBase<findDevice, synchronizeDevice> {
  static flagosStatus_t probe(flagosProbeInfo* info) noexcept {
    return guard("probe", [&] {
      flagosProbeInfo result{};
      flagos_kit::copyString(result.sdk_name, "CUDA");
      std::string reason;
      const Driver* d = driver(&reason);
      if (d != nullptr) {
        int count = 0;
        const CUresult r = d->cuDeviceGetCount(&count);
        if (r != CUDA_SUCCESS) reason = "cuDeviceGetCount failed: " + errorText(r);
        if (r == CUDA_SUCCESS && count == 0) reason = "no CUDA device";
        result.device_count = reason.empty() ? count : 0;
        flagos_kit::copyString(result.driver_version, versionString(d->version));
      }
      std::string nvrtc_reason;
      const std::string nvrtc = nvrtcVersion(&nvrtc_reason);
      flagos_kit::copyString(result.sdk_version,
                             "headers " + versionString(CUDA_VERSION) + ", NVRTC " +
                                 (nvrtc.empty() ? "missing (no generated kernels)" : nvrtc));
      return flagos_kit::answerProbe(info, result, reason);
    });
  }

  static flagosStatus_t init() noexcept {
    return guard("init", [&] { return state().open(makeDevices); });
  }

  // Primary contexts stay retained: torch's CUDA may use them until exit.
  static flagosStatus_t shutdown() noexcept {
    return guard("shutdown", [&] { return state().close(); });
  }

  static constexpr auto getCount = flagos_kit::getCount<state>;

  static constexpr auto getProperties = flagos_kit::getProperties<findDevice, deviceProperties>;
};

}  // namespace

State& state() {
  static State* s = new State();  // never destroyed: tables may run at process exit
  return *s;
}

Device* findDevice(const char* call, int32_t index) noexcept {
  return state().find(call, index);
}

flagosStatus_t useContext(const Device& device, const char* call) {
  CUcontext current = nullptr;
  const Driver& d = cu();
  if (d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == device.context) {
    return FLAGOS_SUCCESS;
  }
  return check(d.cuCtxSetCurrent(device.context), call, "cuCtxSetCurrent");
}

flagosStatus_t synchronizeDevice(Device* device) {
  std::lock_guard<std::mutex> lock(device->streams_mutex);
  return flagos_kit::synchronizeStreams(device->streams);
}

std::string archOf(const Device& device) {
  return "sm_" + std::to_string(device.cc_major) + std::to_string(device.cc_minor);
}

namespace {

// Note [Foreign device memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A flagos tensor may view memory the plugin did not allocate: a native
// `cuda` tensor's, through flagos_torchfl.interop.from_native. The driver
// knows every allocation of the context, so an address outside our own
// allocations is accepted when the driver says it is device memory of that
// device and the whole range lies in its allocation (cuMemGetAddressRange).
Device* foreignOwner(uintptr_t p, uint64_t bytes, Device* only) {
  const Driver& d = cu();
  CUmemorytype type{};
  int ordinal = -1;
  if (d.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) != CUDA_SUCCESS ||
      type != CU_MEMORYTYPE_DEVICE ||
      d.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) != CUDA_SUCCESS) {
    return nullptr;
  }
  for (auto& device : state().devices) {
    if (device->device != ordinal || (only != nullptr && device.get() != only)) continue;
    CUdeviceptr base = 0;
    size_t size = 0;
    if (useContext(*device, "address check") != FLAGOS_SUCCESS ||
        d.cuMemGetAddressRange(&base, &size, p) != CUDA_SUCCESS || p - base + bytes > size) {
      return nullptr;
    }
    return device.get();
  }
  return nullptr;
}

}  // namespace

bool isDeviceRange(const char* call, const void* ptr, uint64_t bytes, Device* only,
                   Device** owner) noexcept {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  State& s = state();
  if (s.initialized) {
    for (auto& device : s.devices) {
      if (only != nullptr && device.get() != only) continue;
      std::lock_guard<std::mutex> lock(device->memory_mutex);
      auto it = device->live.upper_bound(p);  // first allocation starting after p
      if (it == device->live.begin()) continue;
      --it;
      if (p - it->first <= it->second && bytes <= it->first + it->second - p) {
        if (owner != nullptr) *owner = device.get();
        return true;
      }
    }
    if (Device* foreign = foreignOwner(p, bytes, only)) {
      if (owner != nullptr) *owner = foreign;
      return true;
    }
  }
  fail(FLAGOS_ERROR_INVALID_ARGUMENT,
       "cuda %s: [%p, +%" PRIu64 ") is not inside a live allocation%s", call, ptr, bytes,
       only != nullptr ? " of this device" : "");
  return false;
}

const flagosDeviceTable* deviceTable() {
  return flagos_kit::deviceTable<DeviceCalls>();
}

}  // namespace flagos_cuda
