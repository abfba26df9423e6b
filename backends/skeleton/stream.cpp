// The stream table (stream.h): streams and events. A stream is a queue of
// tasks and one worker thread running them in order; an SDK's queues (CUDA
// streams, OpenCL command queues) replace it. An event is the marker of
// the last record (kit/flagos_kit/markers.h): eventRecord enqueues a task
// completing a fresh marker, and streamWaitEvent enqueues a task waiting for
// the marker captured at the call. SDK events replace them.
#include <memory>

#include "skeleton.h"

using flagos_kit::Marker;

flagosStream_st::flagosStream_st(int32_t device_index)
    : device(device_index), worker_([this] { run(); }) {}

flagosStream_st::~flagosStream_st() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();  // the worker drains the queue before it stops
  magic = 0;       // a later call with this handle fails validHandle (usually)
}

void flagosStream_st::enqueue(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(task), nullptr});
    ++queued_;
  }
  cv_.notify_all();
}

void flagosStream_st::enqueueMark(std::shared_ptr<Marker> marker) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({[] { return FLAGOS_SUCCESS; }, std::move(marker)});
    ++queued_;
  }
  cv_.notify_all();
}

void flagosStream_st::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const flagosStatus_t status =
        flagos_kit::guard("stream task", [&] { return item.task(); });  // Note [ABI boundary]
    const std::string message = status == FLAGOS_SUCCESS ? "" : flagos_kit::lastError();
    lock.lock();
    if (status != FLAGOS_SUCCESS && error_ == FLAGOS_SUCCESS) {
      error_ = status;
      error_message_ = message;
    }
    ++done_;
    if (item.marker != nullptr) item.marker->complete(true);
    cv_.notify_all();
  }
}

flagosStatus_t flagosStream_st::takeError() {
  const flagosStatus_t status = error_;
  if (status != FLAGOS_SUCCESS) flagos_kit::fail(status, "%s", error_message_.c_str());
  error_ = FLAGOS_SUCCESS;
  return status;
}

flagosStatus_t flagosStream_st::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = queued_;
  cv_.wait(lock, [&] { return done_ >= target; });
  return takeError();
}

flagosStatus_t flagosStream_st::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_ < queued_) return FLAGOS_ERROR_NOT_READY;
  return takeError();
}

namespace flagos_skeleton {
namespace {

// The stream table (stream.h), one static member per entry. From the kit:
// streamSynchronize/streamQuery (check the handle, then the stream's own
// synchronize()/query()) and eventCreate/eventDestroy (flags DEFAULT or
// TIMING, a device findDevice knows), in events.h; eventQuery,
// eventSynchronize and eventElapsedTime over the marker of the last record
// (never recorded counts as complete), in markers.h. SDK: create the SDK's
// event in eventCreate too, and replace markers by SDK events.
struct StreamCalls : flagos_kit::StreamCallsBase<findDevice>, flagos_kit::MarkerEventCalls<> {
  static flagosStatus_t streamCreate(int32_t device, int32_t priority,
                                     flagosStream_t* stream) noexcept {
    return guard("streamCreate", [&] {
      (void)priority;  // a hint; this device has no priorities
      if (stream == nullptr)
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton streamCreate: NULL");
      *stream = nullptr;
      Device* d = findDevice("streamCreate", device);
      if (d == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      auto created = std::make_unique<flagosStream_st>(device);
      std::lock_guard<std::mutex> lock(d->mu);
      d->streams.insert(created.get());
      *stream = created.release();
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t streamDestroy(flagosStream_t stream) noexcept {
    return guard("streamDestroy", [&] {
      if (!flagos_kit::validStream("streamDestroy", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      Device* d = findDevice("streamDestroy", stream->device);
      if (d == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      {
        std::lock_guard<std::mutex> lock(d->mu);
        d->streams.erase(stream);
      }
      delete stream;  // blocks until its queued work completes (stream.h)
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept {
    return guard("streamWaitEvent", [&] {
      // SDK: make the stream wait for the event (cudaStreamWaitEvent).
      return flagos_kit::waitMarker(stream, event, [](flagosStream_t s, std::shared_ptr<Marker> m) {
        s->enqueue([m] {
          m->wait();
          return FLAGOS_SUCCESS;
        });
      });
    });
  }

  static flagosStatus_t eventRecord(flagosEvent_t event, flagosStream_t stream) noexcept {
    return guard("eventRecord", [&] {
      // SDK: record the event on the stream (cudaEventRecord).
      return flagos_kit::recordMarker(
          event, stream,
          [](flagosStream_t s, std::shared_ptr<Marker> m) { s->enqueueMark(std::move(m)); });
    });
  }
};

}  // namespace

const flagosStreamTable* streamTable() {
  return flagos_kit::streamTable<StreamCalls>();
}

}  // namespace flagos_skeleton
