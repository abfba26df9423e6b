// The stream table (stream.h): CUDA streams and events, one to one. An
// asynchronous fault (an illegal address in a kernel) is CUDA's sticky
// context error: every later synchronize reports it, which satisfies
// "reported by the next synchronize" (the context cannot be used again
// anyway).
#include <algorithm>

#include "cuda_plugin.h"

// Drains the stream, then frees its scratch and the CUDA stream.
flagosStream_st::~flagosStream_st() {
  using namespace flagos_cuda;
  const Driver& d = cu();
  if (useContext(*device, "streamDestroy") == FLAGOS_SUCCESS) {
    d.cuStreamSynchronize(stream);
    if (scratch != nullptr) d.cuMemFree(reinterpret_cast<CUdeviceptr>(scratch));
    d.cuStreamDestroy(stream);
  }
  magic = 0;
}

flagosStatus_t flagosStream_st::synchronize() {
  using namespace flagos_cuda;
  const flagosStatus_t st = useContext(*device, "streamSynchronize");
  if (st != FLAGOS_SUCCESS) return st;
  return check(cu().cuStreamSynchronize(stream), "streamSynchronize", "cuStreamSynchronize");
}

flagosStatus_t flagosStream_st::query() {
  using namespace flagos_cuda;
  const flagosStatus_t st = useContext(*device, "streamQuery");
  if (st != FLAGOS_SUCCESS) return st;
  return check(cu().cuStreamQuery(stream), "streamQuery", "cuStreamQuery");
}

namespace flagos_cuda {
namespace {

// The stream table (stream.h), one static member per entry. From the kit:
// streamSynchronize and streamQuery (the handle check, then the stream's own).
struct StreamCalls : flagos_kit::StreamCallsBase<findDevice> {
  static flagosStatus_t streamCreate(int32_t index, int32_t priority,
                                     flagosStream_t* stream) noexcept {
    return guard("streamCreate", [&] {
      if (stream == nullptr) return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda streamCreate: NULL");
      *stream = nullptr;
      Device* device = findDevice("streamCreate", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      flagosStatus_t st = useContext(*device, "streamCreate");
      if (st != FLAGOS_SUCCESS) return st;
      CUstream s = nullptr;
      // CUDA: lower numbers run first; out-of-range values are clamped.
      st = check(cu().cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, priority < 0 ? -1 : 0),
                 "streamCreate", "cuStreamCreateWithPriority");
      if (st != FLAGOS_SUCCESS) return st;
      auto created = std::make_unique<flagosStream_st>();
      created->device = device;
      created->stream = s;
      std::lock_guard<std::mutex> lock(device->streams_mutex);
      device->streams.push_back(created.get());
      *stream = created.release();
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t streamDestroy(flagosStream_t stream) noexcept {
    return guard("streamDestroy", [&] {
      if (!flagos_kit::validStream("streamDestroy", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      Device* device = stream->device;
      {
        std::lock_guard<std::mutex> lock(device->streams_mutex);
        auto& list = device->streams;
        list.erase(std::remove(list.begin(), list.end(), stream), list.end());
      }
      delete stream;  // drains it first (stream.h)
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept {
    return guard("streamWaitEvent", [&] {
      if (!flagos_kit::validStream("streamWaitEvent", stream) ||
          !flagos_kit::validEvent("streamWaitEvent", event)) {
        return FLAGOS_ERROR_INVALID_ARGUMENT;
      }
      if (!event->recorded.load()) return FLAGOS_SUCCESS;  // never recorded: complete
      const flagosStatus_t st = useContext(*stream->device, "streamWaitEvent");
      if (st != FLAGOS_SUCCESS) return st;
      return check(cu().cuStreamWaitEvent(stream->stream, event->event, 0), "streamWaitEvent",
                   "cuStreamWaitEvent");
    });
  }

  static flagosStatus_t eventCreate(int32_t index, uint32_t flags, flagosEvent_t* event) noexcept {
    return guard("eventCreate", [&] {
      flagosStatus_t st = flagos_kit::eventCreate<findDevice>(index, flags, event);
      if (st != FLAGOS_SUCCESS) return st;
      Device* device = findDevice("eventCreate", index);
      st = useContext(*device, "eventCreate");
      if (st == FLAGOS_SUCCESS) {
        const unsigned cu_flags =
            (flags & FLAGOS_EVENT_TIMING) != 0 ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
        st = check(cu().cuEventCreate(&(*event)->event, cu_flags), "eventCreate", "cuEventCreate");
      }
      if (st != FLAGOS_SUCCESS) {
        delete *event;
        *event = nullptr;
      }
      return st;
    });
  }

  // The driver keeps a destroyed event's pending record and waits alive.
  static flagosStatus_t eventDestroy(flagosEvent_t event) noexcept {
    return guard("eventDestroy", [&] {
      if (!flagos_kit::validEvent("eventDestroy", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      Device* device = findDevice("eventDestroy", event->device);
      if (device != nullptr && useContext(*device, "eventDestroy") == FLAGOS_SUCCESS)
        cu().cuEventDestroy(event->event);
      event->magic = 0;
      delete event;
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t eventRecord(flagosEvent_t event, flagosStream_t stream) noexcept {
    return guard("eventRecord", [&] {
      flagosStatus_t st = flagos_kit::checkRecord(
          event, stream, [](const flagosStream_st* s) { return s->device->index; });
      if (st == FLAGOS_SUCCESS) st = useContext(*stream->device, "eventRecord");
      if (st == FLAGOS_SUCCESS)
        st =
            check(cu().cuEventRecord(event->event, stream->stream), "eventRecord", "cuEventRecord");
      if (st == FLAGOS_SUCCESS) event->recorded.store(true);
      return st;
    });
  }

  static flagosStatus_t eventQuery(flagosEvent_t event) noexcept {
    return guard("eventQuery", [&] {
      if (!flagos_kit::validEvent("eventQuery", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (!event->recorded.load()) return FLAGOS_SUCCESS;
      return check(cu().cuEventQuery(event->event), "eventQuery", "cuEventQuery");
    });
  }

  static flagosStatus_t eventSynchronize(flagosEvent_t event) noexcept {
    return guard("eventSynchronize", [&] {
      if (!flagos_kit::validEvent("eventSynchronize", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (!event->recorded.load()) return FLAGOS_SUCCESS;
      return check(cu().cuEventSynchronize(event->event), "eventSynchronize", "cuEventSynchronize");
    });
  }

  static flagosStatus_t eventElapsedTime(float* ms, flagosEvent_t start,
                                         flagosEvent_t end) noexcept {
    return guard("eventElapsedTime", [&] {
      const flagosStatus_t st = flagos_kit::checkElapsedTime(ms, start, end);
      if (st != FLAGOS_SUCCESS) return st;
      if (!start->recorded.load() || !end->recorded.load()) return flagos_kit::neverRecorded();
      if (start == end) {
        const flagosStatus_t done = eventQuery(start);
        if (done == FLAGOS_SUCCESS) *ms = 0.0f;
        return done;
      }
      return check(cu().cuEventElapsedTime(ms, start->event, end->event), "eventElapsedTime",
                   "cuEventElapsedTime");
    });
  }
};

}  // namespace

const flagosStreamTable* streamTable() {
  return flagos_kit::streamTable<StreamCalls>();
}

}  // namespace flagos_cuda
