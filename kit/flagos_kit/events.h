// Event-table members, and the checks of the others, whose logic is the same
// in every plugin, whatever an event is underneath (an SDK event, an OpenCL
// marker, markers.h). Templates over the plugin's flagosEvent_st (and
// flagosStream_st), which must have a `static constexpr uint32_t kMagic`
// and `magic`, `device` and `flags` members; the structs are only looked at
// where the plugin uses these.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <cstdint>
#include <memory>

#include "flagos/stream.h"
#include "flagos_kit/error.h"
#include "flagos_kit/handle.h"
#include "flagos_kit/streams.h"

namespace flagos_kit {

// Is @p event a live event? Records the message naming @p call if not.
template <typename Event = flagosEvent_st>
bool validEvent(const char* call, const Event* event) noexcept {
  return validHandle(call, "event", event, Event::kMagic);
}

// stream.h eventCreate: flags DEFAULT or TIMING, on a device that
// @p FindDevice(call, index) (the plugin's lookup, which records its own
// message) finds.
template <auto FindDevice, typename Event = flagosEvent_st>
flagosStatus_t eventCreate(int32_t device, uint32_t flags, Event** event) noexcept {
  return guard("eventCreate", [&] {
    if (event == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s eventCreate: event is NULL", kPluginName);
    }
    *event = nullptr;
    if ((flags & ~FLAGOS_EVENT_TIMING) != 0) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s eventCreate: unknown flags 0x%x", kPluginName,
                  flags);
    }
    if (FindDevice("eventCreate", device) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
    auto created = std::make_unique<Event>();
    created->device = device;
    created->flags = flags;
    *event = created.release();
    return FLAGOS_SUCCESS;
  });
}

// stream.h eventDestroy: what the event captured lives on where it is
// still waited for (the plugin's own reference counting: shared markers,
// cl_event references), so the handle itself can go at once.
template <typename Event = flagosEvent_st>
flagosStatus_t eventDestroy(Event* event) noexcept {
  return guard("eventDestroy", [&] {
    if (!validEvent("eventDestroy", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    event->magic = 0;  // a later call with this handle fails validEvent (usually)
    delete event;
    return FLAGOS_SUCCESS;
  });
}

// The checks of eventRecord: both handles live, and the stream on the
// event's device (@p device_of(stream): the stream's device index).
template <typename Event, typename Stream, typename DeviceOf>
flagosStatus_t checkRecord(const Event* event, const Stream* stream, DeviceOf&& device_of) {
  if (!validEvent("eventRecord", event) || !validStream("eventRecord", stream)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  const int32_t stream_device = device_of(stream);
  if (event->device != stream_device) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "%s eventRecord: event of device %d recorded on a stream of device %d", kPluginName,
                event->device, stream_device);
  }
  return FLAGOS_SUCCESS;
}

// The checks of eventElapsedTime before it looks at what was recorded: an
// out-parameter, two live events, both created with FLAGOS_EVENT_TIMING.
template <typename Event>
flagosStatus_t checkElapsedTime(const float* ms, const Event* start, const Event* end) {
  if (ms == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s eventElapsedTime: ms is NULL", kPluginName);
  }
  if (!validEvent("eventElapsedTime", start) || !validEvent("eventElapsedTime", end)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  if ((start->flags & end->flags & FLAGOS_EVENT_TIMING) == 0) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "%s eventElapsedTime: both events need FLAGOS_EVENT_TIMING", kPluginName);
  }
  return FLAGOS_SUCCESS;
}

// The message for an eventElapsedTime whose start or end was never recorded.
inline flagosStatus_t neverRecorded() {
  return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s eventElapsedTime: an event was never recorded",
              kPluginName);
}

// The members every plugin shares, as a base of its StreamCalls (tables.h):
// streamSynchronize, streamQuery (streams.h), eventCreate, eventDestroy.
template <auto FindDevice, typename Stream = flagosStream_st, typename Event = flagosEvent_st>
struct StreamCallsBase {
  static constexpr auto streamSynchronize = flagos_kit::streamSynchronize<Stream>;
  static constexpr auto streamQuery = flagos_kit::streamQuery<Stream>;
  static constexpr auto eventCreate = flagos_kit::eventCreate<FindDevice, Event>;
  static constexpr auto eventDestroy = flagos_kit::eventDestroy<Event>;
};

// The members events.h asks of a flagosEvent_st; a plugin derives its
// struct from this (`struct flagosEvent_st : flagos_kit::EventHandle<...>`).
template <uint32_t Magic>
struct EventHandle {
  static constexpr uint32_t kMagic = Magic;
  uint32_t magic = Magic;
  int32_t device = 0;
  uint32_t flags = 0;
};

}  // namespace flagos_kit
