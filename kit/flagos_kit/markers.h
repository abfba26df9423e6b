// Events as markers: for a plugin whose streams are its own queues of work
// (a worker thread each, as in the host and skeleton plugins), not an SDK's.
// eventRecord puts a fresh Marker at the tail of the stream and the stream
// completes it when it gets there; queries and waits look at the marker
// captured when they were called, so re-recording never disturbs earlier
// waits. Markers are shared with the queued work, so destroying an event
// while a record or a wait is pending leaves no dangling pointer. An event
// never recorded counts as complete (stream.h).
//
// The members below are templates over the plugin's flagosEvent_st, which
// has, besides what events.h asks, `std::mutex mu` and
// `std::shared_ptr<flagos_kit::Marker> last`: MarkerEvent below.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "flagos/stream.h"
#include "flagos_kit/error.h"
#include "flagos_kit/events.h"
#include "flagos_kit/streams.h"

namespace flagos_kit {

// One recorded point of a stream.
struct Marker {
  // The stream got here; @p timestamp: stamp `when` (timing events).
  void complete(bool timestamp) {
    std::lock_guard<std::mutex> lock(mu);
    if (timestamp) when = std::chrono::steady_clock::now();
    is_done = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [this] { return is_done; });
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu);
    return is_done;
  }

  std::mutex mu;
  std::condition_variable cv;
  bool is_done = false;
  std::chrono::steady_clock::time_point when{};  // immutable once done
};

// The event's current capture (nullptr: never recorded).
template <typename Event>
std::shared_ptr<Marker> lastMarker(Event* event) {
  std::lock_guard<std::mutex> lock(event->mu);
  return event->last;
}

// stream.h eventRecord: @p enqueue(stream, marker) queues the completion of
// a fresh marker at the tail of @p stream (whose `device` is an index),
// which then becomes the event's capture.
template <typename Event, typename Stream, typename Enqueue>
flagosStatus_t recordMarker(Event* event, Stream* stream, Enqueue&& enqueue) {
  const flagosStatus_t checked =
      checkRecord(event, stream, [](const Stream* s) { return s->device; });
  if (checked != FLAGOS_SUCCESS) return checked;
  auto marker = std::make_shared<Marker>();
  enqueue(stream, marker);  // first: a marker nothing will complete never becomes the capture
  std::lock_guard<std::mutex> lock(event->mu);
  event->last = std::move(marker);
  return FLAGOS_SUCCESS;
}

// stream.h streamWaitEvent: @p enqueue(stream, marker) queues a wait for the
// event's capture on @p stream (on the stream, not on the caller); nothing
// to wait for when it was never recorded or is done.
template <typename Stream, typename Event, typename Enqueue>
flagosStatus_t waitMarker(Stream* stream, Event* event, Enqueue&& enqueue) {
  if (!validStream("streamWaitEvent", stream) || !validEvent("streamWaitEvent", event)) {
    return FLAGOS_ERROR_INVALID_ARGUMENT;
  }
  std::shared_ptr<Marker> marker = lastMarker(event);
  if (marker != nullptr && !marker->done()) enqueue(stream, std::move(marker));
  return FLAGOS_SUCCESS;
}

// stream.h eventQuery.
template <typename Event = flagosEvent_st>
flagosStatus_t eventQuery(Event* event) noexcept {
  return guard("eventQuery", [&] {
    if (!validEvent("eventQuery", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    const std::shared_ptr<Marker> marker = lastMarker(event);
    return marker == nullptr || marker->done() ? FLAGOS_SUCCESS : FLAGOS_ERROR_NOT_READY;
  });
}

// stream.h eventSynchronize.
template <typename Event = flagosEvent_st>
flagosStatus_t eventSynchronize(Event* event) noexcept {
  return guard("eventSynchronize", [&] {
    if (!validEvent("eventSynchronize", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    if (const std::shared_ptr<Marker> marker = lastMarker(event)) marker->wait();
    return FLAGOS_SUCCESS;
  });
}

// stream.h eventElapsedTime, from the markers' timestamps.
template <typename Event = flagosEvent_st>
flagosStatus_t eventElapsedTime(float* ms, Event* start, Event* end) noexcept {
  return guard("eventElapsedTime", [&] {
    const flagosStatus_t checked = checkElapsedTime(ms, start, end);
    if (checked != FLAGOS_SUCCESS) return checked;
    const std::shared_ptr<Marker> first = lastMarker(start), second = lastMarker(end);
    if (first == nullptr || second == nullptr) return neverRecorded();
    if (!first->done() || !second->done()) return FLAGOS_ERROR_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(second->when - first->when).count();
    return FLAGOS_SUCCESS;
  });
}

// A flagosEvent_st over markers: `struct flagosEvent_st :
// flagos_kit::MarkerEvent<magic> {};`.
template <uint32_t Magic>
struct MarkerEvent : EventHandle<Magic> {
  std::mutex mu;
  std::shared_ptr<Marker> last;  // nullptr: never recorded
};

// The three members above as a base of the plugin's StreamCalls (tables.h):
// eventQuery, eventSynchronize, eventElapsedTime.
template <typename Event = flagosEvent_st>
struct MarkerEventCalls {
  static constexpr auto eventQuery = flagos_kit::eventQuery<Event>;
  static constexpr auto eventSynchronize = flagos_kit::eventSynchronize<Event>;
  static constexpr auto eventElapsedTime = flagos_kit::eventElapsedTime<Event>;
};

}  // namespace flagos_kit
