// Table members whose logic is the same in every plugin, written once over
// the plugin's own lookups: probe's answer, the thread's current device,
// synchronize and getProperties' checks (device.h), memGetInfo, malloc's arguments and memFill's
// pattern (memory.h), the argument checks of kernelLaunch (compiler.h). Stream and event members:
// streams.h, events.h.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <string>

#include "flagos/compiler.h"
#include "flagos/device.h"
#include "flagos/memory.h"
#include "flagos_kit/error.h"
#include "flagos_kit/handle.h"
#include "flagos_kit/out_struct.h"
#include "flagos_kit/streams.h"

namespace flagos_kit {

// memory.h memFill's checks before the plugin looks at dst: a live
// @p stream, a non-NULL pattern of 1, 2, 4 or 8 bytes, and a byte count
// count * pattern_size that does not overflow, written to @p bytes (0:
// nothing to fill, and the answer is FLAGOS_SUCCESS).
template <typename Stream = flagosStream_st>
flagosStatus_t checkFill(const Stream* stream, const void* pattern, uint32_t pattern_size,
                         uint64_t count, uint64_t* bytes) noexcept {
  *bytes = 0;
  if (!validStream("memFill", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  if (pattern == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s memFill: pattern is NULL", kPluginName);
  }
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s memFill: pattern_size %u is not 1, 2, 4 or 8",
                kPluginName, pattern_size);
  }
  if (count > UINT64_MAX / pattern_size) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s memFill: %" PRIu64 " x %u bytes overflow",
                kPluginName, count, pattern_size);
  }
  *bytes = count * pattern_size;
  return FLAGOS_SUCCESS;
}

// memory.h memFill: checkFill, then the plugin's @p Fill(dst, pattern,
// pattern_size, count, bytes, stream) queues the fill of bytes > 0.
template <auto Fill, typename Stream = flagosStream_st>
flagosStatus_t memFill(void* dst, const void* pattern, uint32_t pattern_size, uint64_t count,
                       Stream* stream) noexcept {
  return guard("memFill", [&] {
    uint64_t bytes = 0;
    const flagosStatus_t checked = checkFill(stream, pattern, pattern_size, count, &bytes);
    if (checked != FLAGOS_SUCCESS || bytes == 0) return checked;
    return Fill(dst, pattern, pattern_size, count, bytes, stream);
  });
}

// memory.h malloc: @p ptr not NULL (then set to NULL, the answer on every
// failure), @p bytes not 0, the device (@p FindDevice); then the plugin's
// @p Allocate(device, index, bytes, ptr) allocates.
template <auto FindDevice, auto Allocate>
flagosStatus_t malloc(int32_t index, uint64_t bytes, void** ptr) noexcept {
  return guard("malloc", [&] {
    if (ptr == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s malloc: ptr is NULL", kPluginName);
    }
    *ptr = nullptr;
    if (bytes == 0) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s malloc: bytes is 0", kPluginName);
    }
    auto* device = FindDevice("malloc", index);
    return device == nullptr ? FLAGOS_ERROR_INVALID_ARGUMENT : Allocate(device, index, bytes, ptr);
  });
}

// Calls with no explicit device act on the calling thread's current device
// (like cudaSetDevice); 0 until set.
inline int32_t& currentDevice() noexcept {
  thread_local int32_t device = 0;
  return device;
}

// The end of device.h probe: writes @p result with @p reason (empty: the
// plugin is usable) into the core's @p info, and answers NO_DEVICE with the
// reason as the message when there is one.
inline flagosStatus_t answerProbe(flagosProbeInfo* info, flagosProbeInfo result,
                                  const std::string& reason) {
  copyString(result.reason, reason);
  const flagosStatus_t status = writeSized("probe", info, result);
  if (status != FLAGOS_SUCCESS || reason.empty()) return status;
  return fail(FLAGOS_ERROR_NO_DEVICE, "%s probe: %s", kPluginName, reason.c_str());
}

// device.h setCurrent, over the plugin's lookup @p FindDevice(call, index)
// (which records its own message when it finds nothing).
template <auto FindDevice>
flagosStatus_t setCurrent(int32_t index) noexcept {
  return guard("setCurrent", [&] {
    if (FindDevice("setCurrent", index) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    currentDevice() = index;
    return FLAGOS_SUCCESS;
  });
}

// device.h getCurrent.
inline flagosStatus_t getCurrent(int32_t* index) noexcept {
  return guard("getCurrent", [&] {
    if (index == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s getCurrent: device is NULL", kPluginName);
    }
    *index = currentDevice();
    return FLAGOS_SUCCESS;
  });
}

// device.h synchronize, over the plugin's @p FindDevice and its
// @p SynchronizeDevice(Device*) (streams.h synchronizeStreams does the loop).
template <auto FindDevice, auto SynchronizeDevice>
flagosStatus_t synchronize(int32_t index) noexcept {
  return guard("synchronize", [&] {
    auto* device = FindDevice("synchronize", index);
    return device == nullptr ? FLAGOS_ERROR_INVALID_ARGUMENT : SynchronizeDevice(device);
  });
}

// The three members above as a base of the plugin's DeviceCalls
// (tables.h): setCurrent, getCurrent and synchronize.
template <auto FindDevice, auto SynchronizeDevice>
struct DeviceCallsBase {
  static constexpr auto setCurrent = flagos_kit::setCurrent<FindDevice>;
  static constexpr auto getCurrent = flagos_kit::getCurrent;
  static constexpr auto synchronize = flagos_kit::synchronize<FindDevice, SynchronizeDevice>;
};

// device.h getProperties: checks the device (@p FindDevice), then the
// plugin's @p Properties(device) describes it, written in the caller's
// struct size (out_struct.h).
template <auto FindDevice, auto Properties>
flagosStatus_t getProperties(int32_t index, flagosDeviceProperties* props) noexcept {
  return guard("getProperties", [&] {
    auto* device = FindDevice("getProperties", index);
    if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    return writeSized("getProperties", props, Properties(*device));
  });
}

// memory.h memGetInfo: checks the out-parameters and the device
// (@p FindDevice), then the plugin's @p Info(device, free_bytes,
// total_bytes) fills them.
template <auto FindDevice, auto Info>
flagosStatus_t memGetInfo(int32_t index, uint64_t* free_bytes, uint64_t* total_bytes) noexcept {
  return guard("memGetInfo", [&] {
    if (free_bytes == nullptr || total_bytes == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s memGetInfo: an out-parameter is NULL",
                  kPluginName);
    }
    auto* device = FindDevice("memGetInfo", index);
    if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    Info(device, free_bytes, total_bytes);
    return FLAGOS_SUCCESS;
  });
}

// The checks compiler.h asks of every kernelLaunch before it looks at the
// program: a name, an argument array matching num_args, work_dim 1..3 with
// a global size, and no zero local size.
inline flagosStatus_t checkLaunchArgs(const char* name, const flagosKernelArg* args,
                                      int32_t num_args, int32_t work_dim, const uint64_t* global,
                                      const uint64_t* local) {
  if (name == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s kernelLaunch: name is NULL", kPluginName);
  }
  if (num_args < 0 || (num_args > 0 && args == nullptr)) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s kernelLaunch: %d arguments and args %s",
                kPluginName, num_args, args == nullptr ? "NULL" : "given");
  }
  if (work_dim < 1 || work_dim > 3 || global == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s kernelLaunch: work_dim %d (1..3) and global %s",
                kPluginName, work_dim, global == nullptr ? "NULL" : "given");
  }
  for (int32_t d = 0; local != nullptr && d < work_dim; ++d) {
    if (local[d] == 0) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s kernelLaunch: local[%d] is 0", kPluginName, d);
    }
  }
  return FLAGOS_SUCCESS;
}

// All of the above for kernelLaunch, after the handles: @p program (whose
// struct has a `static constexpr uint32_t kMagic`, handle.h) and @p stream.
template <typename Program, typename Stream>
flagosStatus_t checkLaunch(const Program* program, const Stream* stream, const char* name,
                           const flagosKernelArg* args, int32_t num_args, int32_t work_dim,
                           const uint64_t* global, const uint64_t* local) {
  if (!validHandle("kernelLaunch", "program", program, Program::kMagic) ||
      !validStream("kernelLaunch", stream)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  return checkLaunchArgs(name, args, num_args, work_dim, global, local);
}

// The checks of kernelLaunch's argument @p i of kernel @p name that need no
// device: a DEVICE_PTR has value -> void* and size sizeof(void*), and its
// pointer goes to @p address (left NULL for BYTES); BYTES have a value and a
// size; no other kind.
inline flagosStatus_t checkKernelArg(const char* name, int32_t i, const flagosKernelArg& arg,
                                     const void** address) {
  if (arg.kind == FLAGOS_ARG_DEVICE_PTR) {
    if (arg.value == nullptr || arg.size != sizeof(void*)) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "%s kernelLaunch: '%s' argument %d: a DEVICE_PTR needs value -> void* and size "
                  "%zu",
                  kPluginName, name, i, sizeof(void*));
    }
    std::memcpy(address, arg.value, sizeof(*address));
    return FLAGOS_SUCCESS;
  }
  if (arg.kind == FLAGOS_ARG_BYTES) {
    if (arg.value == nullptr || arg.size == 0) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "%s kernelLaunch: '%s' argument %d: BYTES needs a value and a size", kPluginName,
                  name, i);
    }
    return FLAGOS_SUCCESS;
  }
  return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s kernelLaunch: '%s' argument %d: unknown kind %d",
              kPluginName, name, i, arg.kind);
}

}  // namespace flagos_kit
