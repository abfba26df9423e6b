// Events: eventRecord enqueues a marker (clEnqueueMarkerWithWaitList) at
// the tail of the stream's in-order queue and keeps it; the marker
// completes when everything queued before it has. Queries and waits look at
// the marker captured when they were called, so re-recording never disturbs
// earlier waits, and OpenCL reference-counts markers, so destroying an
// event while a wait on it is pending is safe (the barrier holds its own
// reference). Timing uses CL_PROFILING_COMMAND_END of the two markers (the
// queues are created with profiling enabled).
#include "opencl.h"

flagosEvent_st::~flagosEvent_st() {
  if (marker != nullptr) clReleaseEvent(marker);
}

namespace flagos_opencl {
namespace {

using flagos_kit::validEvent;

// Owns one reference to a marker (or none: never recorded).
class MarkerRef {
 public:
  explicit MarkerRef(flagosEvent_t event) {
    std::lock_guard<std::mutex> lock(event->mu);
    marker_ = event->marker;
    if (marker_ != nullptr) clRetainEvent(marker_);
  }
  ~MarkerRef() {
    if (marker_ != nullptr) clReleaseEvent(marker_);
  }
  MarkerRef(const MarkerRef&) = delete;
  MarkerRef& operator=(const MarkerRef&) = delete;
  cl_event get() const { return marker_; }
  // CL_COMPLETE, a pending state (> 0) or a negative error.
  cl_int status() const {
    cl_int status = CL_COMPLETE;
    const cl_int error = clGetEventInfo(marker_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                                        &status, nullptr);
    return error != CL_SUCCESS ? error : status;
  }

 private:
  cl_event marker_ = nullptr;
};

flagosStatus_t markerFailed(const char* call, cl_int status) {
  return fail(FLAGOS_ERROR_DEVICE, "opencl %s: the work the event captured failed: %s", call,
              clErrorName(status).c_str());
}

// Completes the user event @p gate (a stream of another device waits on
// it) when the marker it stands for completes; see streamWaitEvent.
void CL_CALLBACK openGate(cl_event, cl_int status, void* gate) noexcept {
  auto event = static_cast<cl_event>(gate);
  clSetUserEventStatus(event, status < 0 ? status : CL_COMPLETE);
  clReleaseEvent(event);
}

}  // namespace

flagosStatus_t EventCalls::eventRecord(flagosEvent_t event, flagosStream_t stream) noexcept {
  return guard("eventRecord", [&] {
    const flagosStatus_t checked = flagos_kit::checkRecord(
        event, stream, [](const flagosStream_st* s) { return s->device->index; });
    if (checked != FLAGOS_SUCCESS) return checked;
    cl_event marker = nullptr;
    const cl_int error = stream->enqueue([&](cl_command_queue queue, cl_event* out) {
      const cl_int e = clEnqueueMarkerWithWaitList(queue, 0, nullptr, out);
      if (e != CL_SUCCESS) return e;
      marker = *out;
      clRetainEvent(marker);  // one reference for the stream, one for the event
      // Another queue may wait on this marker: OpenCL asks for a flush of
      // the queue before a wait on one of its events from elsewhere.
      return clFlush(queue);
    });
    if (error != CL_SUCCESS) {
      if (marker != nullptr) clReleaseEvent(marker);
      return fail(FLAGOS_ERROR_DEVICE, "opencl eventRecord: clEnqueueMarkerWithWaitList failed: %s",
                  clErrorName(error).c_str());
    }
    std::lock_guard<std::mutex> lock(event->mu);
    if (event->marker != nullptr) clReleaseEvent(event->marker);
    event->marker = marker;
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t EventCalls::eventQuery(flagosEvent_t event) noexcept {
  return guard("eventQuery", [&] {
    if (!validEvent("eventQuery", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    const MarkerRef marker(event);
    if (marker.get() == nullptr) return FLAGOS_SUCCESS;  // never recorded
    const cl_int status = marker.status();
    if (status > CL_COMPLETE) return FLAGOS_ERROR_NOT_READY;
    return status < 0 ? markerFailed("eventQuery", status) : FLAGOS_SUCCESS;
  });
}

flagosStatus_t EventCalls::eventSynchronize(flagosEvent_t event) noexcept {
  return guard("eventSynchronize", [&] {
    if (!validEvent("eventSynchronize", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    const MarkerRef marker(event);
    if (marker.get() == nullptr) return FLAGOS_SUCCESS;
    cl_event waited = marker.get();
    const cl_int error = clWaitForEvents(1, &waited);
    const cl_int status = marker.status();
    if (status < 0) return markerFailed("eventSynchronize", status);
    return error != CL_SUCCESS ? markerFailed("eventSynchronize", error) : FLAGOS_SUCCESS;
  });
}

flagosStatus_t EventCalls::eventElapsedTime(float* ms, flagosEvent_t start,
                                            flagosEvent_t end) noexcept {
  return guard("eventElapsedTime", [&] {
    const flagosStatus_t checked = flagos_kit::checkElapsedTime(ms, start, end);
    if (checked != FLAGOS_SUCCESS) return checked;
    const MarkerRef first(start), second(end);
    if (first.get() == nullptr || second.get() == nullptr) return flagos_kit::neverRecorded();
    const cl_int status_first = first.status(), status_second = second.status();
    if (status_first < 0 || status_second < 0) {
      return markerFailed("eventElapsedTime", status_first < 0 ? status_first : status_second);
    }
    if (status_first != CL_COMPLETE || status_second != CL_COMPLETE) {
      return FLAGOS_ERROR_NOT_READY;
    }
    cl_ulong t0 = 0, t1 = 0;
    cl_int error =
        clGetEventProfilingInfo(first.get(), CL_PROFILING_COMMAND_END, sizeof(t0), &t0, nullptr);
    if (error == CL_SUCCESS) {
      error =
          clGetEventProfilingInfo(second.get(), CL_PROFILING_COMMAND_END, sizeof(t1), &t1, nullptr);
    }
    if (error != CL_SUCCESS) {
      return fail(FLAGOS_ERROR_DEVICE, "opencl eventElapsedTime: no marker timestamps: %s",
                  clErrorName(error).c_str());
    }
    // Nanoseconds, signed: an end recorded before its start reads negative.
    *ms = static_cast<float>(static_cast<double>(static_cast<int64_t>(t1 - t0)) / 1e6);
    return FLAGOS_SUCCESS;
  });
}

// Work queued on @p stream after this call waits, on the device, until the
// event's current capture has completed. A marker of the same device
// becomes the wait list of a barrier. A marker of another device lives in
// another context, which a wait list may not name: a user event of the
// stream's context stands in for it, opened by a callback when the marker
// completes.
flagosStatus_t EventCalls::streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept {
  return guard("streamWaitEvent", [&] {
    if (!validStream("streamWaitEvent", stream) || !validEvent("streamWaitEvent", event)) {
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    }
    const MarkerRef marker(event);
    if (marker.get() == nullptr || marker.status() == CL_COMPLETE) return FLAGOS_SUCCESS;
    cl_event wait_for = marker.get();
    cl_event gate = nullptr;
    cl_int error = CL_SUCCESS;
    if (event->device != stream->device->index) {
      gate = clCreateUserEvent(stream->device->context, &error);
      if (gate == nullptr) {
        return fail(FLAGOS_ERROR_DEVICE, "opencl streamWaitEvent: clCreateUserEvent failed: %s",
                    clErrorName(error).c_str());
      }
      clRetainEvent(gate);  // the callback's reference
      error = clSetEventCallback(marker.get(), CL_COMPLETE, openGate, gate);
      if (error != CL_SUCCESS) {
        openGate(nullptr, CL_COMPLETE, gate);  // drops the callback's reference
        clReleaseEvent(gate);
        return fail(FLAGOS_ERROR_DEVICE, "opencl streamWaitEvent: clSetEventCallback failed: %s",
                    clErrorName(error).c_str());
      }
      wait_for = gate;
    }
    error = stream->enqueue([&](cl_command_queue queue, cl_event* out) {
      return clEnqueueBarrierWithWaitList(queue, 1, &wait_for, out);
    });
    if (gate != nullptr) clReleaseEvent(gate);
    if (error != CL_SUCCESS) {
      return fail(FLAGOS_ERROR_DEVICE,
                  "opencl streamWaitEvent: clEnqueueBarrierWithWaitList failed: %s",
                  clErrorName(error).c_str());
    }
    return FLAGOS_SUCCESS;
  });
}

}  // namespace flagos_opencl
