// The stream table (stream.h): streams and events. A stream is a queue of
// tasks and one worker thread running them in order; an SDK's queues (CUDA
// streams, OpenCL command queues) replace it. An event is the Mark of the
// last record: eventRecord enqueues a task completing a fresh Mark, and
// streamWaitEvent enqueues a task waiting for the Mark captured at the call.
#include <memory>

#include "skeleton.h"

using flagos_skeleton::Mark;

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

void flagosStream_st::enqueueMark(std::shared_ptr<Mark> mark) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({[] { return FLAGOS_SUCCESS; }, std::move(mark)});
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
    if (item.mark != nullptr) {
      std::lock_guard<std::mutex> mark_lock(item.mark->mu);
      item.mark->when = std::chrono::steady_clock::now();
      item.mark->done = true;
      item.mark->cv.notify_all();
    }
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

bool validStream(const char* call, flagosStream_t s) {
  return flagos_kit::validHandle(call, "stream", s, kStreamMagic);
}
bool validEvent(const char* call, flagosEvent_t e) {
  return flagos_kit::validHandle(call, "event", e, kEventMagic);
}

std::shared_ptr<Mark> lastMark(flagosEvent_t event) {
  std::lock_guard<std::mutex> lock(event->mu);
  return event->last;
}

bool markDone(Mark& mark) {
  std::lock_guard<std::mutex> lock(mark.mu);
  return mark.done;
}

flagosStatus_t streamCreate(int32_t device, int32_t priority, flagosStream_t* stream) noexcept {
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

flagosStatus_t streamDestroy(flagosStream_t stream) noexcept {
  return guard("streamDestroy", [&] {
    if (!validStream("streamDestroy", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
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

flagosStatus_t streamSynchronize(flagosStream_t stream) noexcept {
  return guard("streamSynchronize", [&] {
    return validStream("streamSynchronize", stream) ? stream->synchronize()
                                                    : FLAGOS_ERROR_INVALID_ARGUMENT;
  });
}

flagosStatus_t streamQuery(flagosStream_t stream) noexcept {
  return guard("streamQuery", [&] {
    return validStream("streamQuery", stream) ? stream->query() : FLAGOS_ERROR_INVALID_ARGUMENT;
  });
}

flagosStatus_t streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept {
  return guard("streamWaitEvent", [&] {
    if (!validStream("streamWaitEvent", stream) || !validEvent("streamWaitEvent", event)) {
      return FLAGOS_ERROR_INVALID_ARGUMENT;
    }
    std::shared_ptr<Mark> mark = lastMark(event);
    if (mark == nullptr) return FLAGOS_SUCCESS;  // never recorded: complete
    stream->enqueue([mark] {
      std::unique_lock<std::mutex> lock(mark->mu);
      mark->cv.wait(lock, [&] { return mark->done; });
      return FLAGOS_SUCCESS;
    });
    return FLAGOS_SUCCESS;
  });
}

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
    delete event;  // queued tasks hold their own reference to the Mark
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
                  "skeleton eventRecord: event of device %d, stream of device %d", event->device,
                  stream->device);
    }
    auto mark = std::make_shared<Mark>();
    {
      std::lock_guard<std::mutex> lock(event->mu);
      event->last = mark;
    }
    stream->enqueueMark(std::move(mark));
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t eventQuery(flagosEvent_t event) noexcept {
  return guard("eventQuery", [&] {
    if (!validEvent("eventQuery", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    std::shared_ptr<Mark> mark = lastMark(event);
    return mark == nullptr || markDone(*mark) ? FLAGOS_SUCCESS : FLAGOS_ERROR_NOT_READY;
  });
}

flagosStatus_t eventSynchronize(flagosEvent_t event) noexcept {
  return guard("eventSynchronize", [&] {
    if (!validEvent("eventSynchronize", event)) return FLAGOS_ERROR_INVALID_ARGUMENT;
    std::shared_ptr<Mark> mark = lastMark(event);
    if (mark == nullptr) return FLAGOS_SUCCESS;
    std::unique_lock<std::mutex> lock(mark->mu);
    mark->cv.wait(lock, [&] { return mark->done; });
    return FLAGOS_SUCCESS;
  });
}

flagosStatus_t eventElapsedTime(float* ms, flagosEvent_t start, flagosEvent_t end) noexcept {
  return guard("eventElapsedTime", [&] {
    if (ms == nullptr || !validEvent("eventElapsedTime", start) ||
        !validEvent("eventElapsedTime", end)) {
      return ms == nullptr
                 ? fail(FLAGOS_ERROR_INVALID_ARGUMENT, "skeleton eventElapsedTime: ms is NULL")
                 : FLAGOS_ERROR_INVALID_ARGUMENT;
    }
    if (!(start->flags & end->flags & FLAGOS_EVENT_TIMING)) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "skeleton eventElapsedTime: both events need FLAGOS_EVENT_TIMING");
    }
    std::shared_ptr<Mark> a = lastMark(start), b = lastMark(end);
    if (a == nullptr || b == nullptr) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "skeleton eventElapsedTime: an event was never recorded");
    }
    if (!markDone(*a) || !markDone(*b)) return FLAGOS_ERROR_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
    return FLAGOS_SUCCESS;
  });
}

}  // namespace

const flagosStreamTable* streamTable() {
  static const flagosStreamTable table = [] {
    flagosStreamTable t{};
    t.struct_size = sizeof(t);
    t.streamCreate = streamCreate;
    t.streamDestroy = streamDestroy;
    t.streamSynchronize = streamSynchronize;
    t.streamQuery = streamQuery;
    t.streamWaitEvent = streamWaitEvent;
    t.eventCreate = eventCreate;
    t.eventDestroy = eventDestroy;
    t.eventRecord = eventRecord;
    t.eventQuery = eventQuery;
    t.eventSynchronize = eventSynchronize;
    t.eventElapsedTime = eventElapsedTime;
    return t;
  }();
  return &table;
}

}  // namespace flagos_skeleton
