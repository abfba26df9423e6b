// Events: eventRecord puts a fresh Marker at the tail of a stream; the
// stream's worker completes it (and stamps the time, for timing events) when
// it gets there. Queries and waits look at the marker captured when they
// were called, so re-recording an event never disturbs earlier waits, and
// markers outlive their event (shared with the queued tasks), so
// eventDestroy is safe while a record or a wait is still pending.
#include <chrono>

#include "host.h"

namespace flagos_host {

void Marker::complete(bool timestamp) {
  std::lock_guard<std::mutex> lock(mu);
  if (timestamp) when = std::chrono::steady_clock::now();
  is_done = true;
  cv.notify_all();
}

void Marker::wait() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [this] { return is_done; });
}

bool Marker::done() {
  std::lock_guard<std::mutex> lock(mu);
  return is_done;
}

namespace {

bool validEvent(const char* call, flagosEvent_t event) {
  return flagos_kit::validHandle(call, "event", event, kEventMagic);
}

// The event's current capture (nullptr: never recorded, which counts as
// complete everywhere in stream.h).
std::shared_ptr<Marker> lastMarker(flagosEvent_t event) {
  std::lock_guard<std::mutex> lock(event->mu);
  return event->last;
}

}  // namespace

flagosStatus_t eventCreate(int32_t device, uint32_t flags, flagosEvent_t* event) noexcept {
  return guard("eventCreate", [&] {
    return flagos_kit::createEvent(device, flags, event, [](int32_t index) {
      return findDevice("eventCreate", index) != nullptr;
    });
  });
}

flagosStatus_t eventDestroy(flagosEvent_t event) noexcept {
  return guard("eventDestroy", [&] {
    if (!validEvent("eventDestroy", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    event->magic = 0;
    delete event;  // queued tasks hold their own reference to the marker
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t eventRecord(flagosEvent_t event, flagosStream_t stream) noexcept {
  return guard("eventRecord", [&] {
    if (!validEvent("eventRecord", event) || !validStream("eventRecord", stream)) {
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    }
    if (event->device != stream->device) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host eventRecord: event of device %d recorded on a stream of device %d",
                  event->device, stream->device);
    }
    auto marker = std::make_shared<Marker>();
    const bool timing = (event->flags & FLAGOS_EVENT_TIMING) != 0;
    // Cost 0: on an idle stream the marker completes now (Note [Inline execution]).
    // The marker completes once the stream has counted the record done.
    stream->enqueue(
        [marker, timing] { onTaskCounted([marker, timing] { marker->complete(timing); }); }, 0);
    std::lock_guard<std::mutex> lock(event->mu);
    event->last = std::move(marker);
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t eventQuery(flagosEvent_t event) noexcept {
  return guard("eventQuery", [&] {
    if (!validEvent("eventQuery", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    const auto marker = lastMarker(event);
    return marker == nullptr || marker->done() ? FLAGOS_SUCCESS : FLAGOS_ERROR_NOT_READY;
  });
}

flagosStatus_t eventSynchronize(flagosEvent_t event) noexcept {
  return guard("eventSynchronize", [&] {
    if (!validEvent("eventSynchronize", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    if (const auto marker = lastMarker(event)) marker->wait();
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t eventElapsedTime(float* ms, flagosEvent_t start, flagosEvent_t end) noexcept {
  return guard("eventElapsedTime", [&] {
    if (ms == nullptr)
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host eventElapsedTime: ms is NULL");
    if (!validEvent("eventElapsedTime", start) || !validEvent("eventElapsedTime", end)) {
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    }
    if ((start->flags & end->flags & FLAGOS_EVENT_TIMING) == 0) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host eventElapsedTime: both events need FLAGOS_EVENT_TIMING");
    }
    const auto first = lastMarker(start);
    const auto second = lastMarker(end);
    if (first == nullptr || second == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host eventElapsedTime: an event was never recorded");
    }
    if (!first->done() || !second->done()) return FLAGOS_ERROR_NOT_READY;
    // Completed markers are immutable: reading `when` needs no lock now.
    *ms = std::chrono::duration<float, std::milli>(second->when - first->when).count();
    return FLAGOS_SUCCESS;
  });
}

// Work queued on @p stream after this call waits (on the stream's worker,
// not on the caller) until the event's current capture has completed.
flagosStatus_t streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept {
  return guard("streamWaitEvent", [&] {
    if (!validStream("streamWaitEvent", stream) || !validEvent("streamWaitEvent", event)) {
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    }
    auto marker = lastMarker(event);
    if (marker == nullptr || marker->done()) return FLAGOS_SUCCESS;  // nothing to wait for
    stream->enqueue([marker] { marker->wait(); });                   // never inline: it blocks
    return FLAGOS_SUCCESS;
  });
}

}  // namespace flagos_host
