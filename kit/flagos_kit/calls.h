// Table members whose logic is the same in every plugin, written once over
// the plugin's own lookups: the thread's current device (device.h), the
// argument checks of eventCreate (stream.h) and kernelLaunch (compiler.h).
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <cstdint>
#include <memory>

#include "flagos/compiler.h"
#include "flagos/stream.h"
#include "flagos_kit/error.h"

namespace flagos_kit {

// Calls with no explicit device act on the calling thread's current device
// (like cudaSetDevice); 0 until set.
inline int32_t& currentDevice() noexcept {
  thread_local int32_t device = 0;
  return device;
}

// device.h setCurrent, given the plugin's check @p valid(index) (which
// records its own message when it fails).
template <typename Valid>
flagosStatus_t setCurrentDevice(int32_t index, Valid&& valid) {
  if (!valid(index)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  currentDevice() = index;
  return FLAGOS_SUCCESS;
}

// device.h getCurrent.
inline flagosStatus_t getCurrentDevice(int32_t* index) {
  if (index == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s getCurrent: device is NULL", kPluginName);
  }
  *index = currentDevice();
  return FLAGOS_SUCCESS;
}

// stream.h eventCreate for a plugin whose flagosEvent_st has `device` and
// `flags` members and a default constructor; @p valid checks the device.
// (Event is a template parameter so that the struct, which only the plugin
// defines, is looked at where the plugin calls this, not here.)
template <typename Valid, typename Event = flagosEvent_st>
flagosStatus_t createEvent(int32_t device, uint32_t flags, flagosEvent_t* event, Valid&& valid) {
  if (event == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s eventCreate: event is NULL", kPluginName);
  }
  *event = nullptr;
  if ((flags & ~FLAGOS_EVENT_TIMING) != 0) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s eventCreate: unknown flags 0x%x", kPluginName,
                flags);
  }
  if (!valid(device)) return FLAGOS_ERROR_INVALID_ARGUMENT;
  auto created = std::make_unique<Event>();
  created->device = device;
  created->flags = flags;
  *event = created.release();
  return FLAGOS_SUCCESS;
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

}  // namespace flagos_kit
