// Streams: one worker thread per stream runs the stream's queued work (async
// copies, fills, event records, waits on events) strictly in order, while the
// caller returns at once; small work on an idle stream runs on the caller
// (Note [Inline execution]). Events are markers the workers complete
// (kit/flagos_kit/markers.h). A real device's stream would be a queue in its
// SDK; the contract (stream.h) is the same.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <system_error>

#include "flagos_kit/events.h"
#include "host.h"

// ------------------------------------------------------------ the worker

namespace {
std::atomic<uint64_t> g_stream_ids{0};
}  // namespace

flagosStream_st::flagosStream_st(int32_t device_index)
    : device(device_index), trace_id(++g_stream_ids), worker_([this] { run(); }) {}

flagosStream_st::~flagosStream_st() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;  // the worker exits once the queue is empty
  }
  work_cv_.notify_one();
  worker_.join();
  magic = 0;  // a later call with this handle fails validStream (usually)
}

// Note [Inline execution]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Handing a task to the worker costs a condition-variable wake-up (a futex
// syscall here, a context switch there; more on a loaded machine) and makes
// the worker free memory the caller allocated (malloc arena lock contention).
// For a tiny kernel that is many times its own run time. So enqueue() runs a
// task at once on the calling thread when the stream is idle (nothing queued,
// nothing running) and the task is small (0 <= cost <= kInlineMaxCost,
// host.h):
//  - Order: nothing is ahead of it, and busy_ keeps the worker from starting
//    a task that another thread queues meanwhile (queued tasks wait; the
//    worker is woken when the inline task ends).
//  - Results: execute() records completion and errors exactly as for the
//    worker, so a failed task (TaskError or any exception) is still the
//    stream's asynchronous error, reported once by the next
//    synchronize/query; enqueued_/completed_ count it, so a synchronize on
//    another thread waits for it.
//  - Events: a record on an idle stream completes (and timestamps) its
//    marker at once, which is when the stream reaches it.
// Only small work: a large kernel inline would block the caller (Python)
// for its whole run and lose the overlap of the caller queuing ahead while
// the device computes, and the hop is noise next to it. Tasks that may
// block (waits on events, collectives) pass kNeverInline, the default.
void flagosStream_st::enqueue(Task task, int64_t cost) {
  std::unique_lock<std::mutex> lock(mu_);
  if (cost < 0 || cost > flagos_host::kInlineMaxCost || busy_ || !queue_.empty() || stop_) {
    queue_.push_back(std::move(task));
    ++enqueued_;
    lock.unlock();
    work_cv_.notify_one();
    return;
  }
  ++enqueued_;
  busy_ = true;  // the worker starts nothing while this runs
  execute(flagos_host::TaskRef(task), lock, &task);
  const bool more = !queue_.empty();  // queued by other threads meanwhile
  lock.unlock();
  if (more) work_cv_.notify_one();
}

bool flagosStream_st::tryInline(flagos_host::TaskRef task, int64_t cost) {
  if (cost < 0 || cost > flagos_host::kInlineMaxCost) return false;
  std::unique_lock<std::mutex> lock(mu_);
  if (busy_ || !queue_.empty() || stop_) return false;
  ++enqueued_;
  busy_ = true;
  execute(task, lock, nullptr);
  const bool more = !queue_.empty();
  lock.unlock();
  if (more) work_cv_.notify_one();
  return true;
}

// Note [Traced tasks]
// ~~~~~~~~~~~~~~~~~~~
// While tracing is on, a task is wrapped to stamp the host clock around its
// run (where it runs: the worker or, inline, the caller), so a record's
// times are those of the work itself, not of its queueing. The correlation
// id is taken now, on the queueing thread (the one running the operator).
void flagosStream_st::enqueueTraced(flagosTraceKind_t kind, const char* name, Task task,
                                    int64_t cost) {
  if (flagos_kit::trace::enabled()) {
    task = [rec = flagos_kit::trace::begin(kind, device, trace_id, name),
            inner = std::move(task)]() mutable {
      rec.start_ns = flagos_kit::trace::monotonicNs();
      inner();
      rec.end_ns = flagos_kit::trace::monotonicNs();
      flagos_kit::trace::finish(rec);
    };
  }
  enqueue(std::move(task), cost);
}

void flagosStream_st::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return !busy_ && (stop_ || !queue_.empty()); });
    if (queue_.empty()) return;  // stop_ and drained
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    execute(flagos_host::TaskRef(task), lock, &task);
  }
}

namespace {
thread_local std::function<void()> t_after_count;  // onTaskCounted() of the running task
}  // namespace

void flagos_host::onTaskCounted(std::function<void()> fn) {
  t_after_count = std::move(fn);
}

void flagosStream_st::execute(flagos_host::TaskRef task, std::unique_lock<std::mutex>& lock,
                              Task* owned) {
  lock.unlock();
  // See Note [ABI boundary]: an exception must not escape the thread
  // (std::terminate) or reach the C caller; it becomes the stream's
  // asynchronous error.
  std::string error;
  flagosStatus_t status = FLAGOS_SUCCESS;
  try {
    task();
  } catch (const flagos_host::TaskError& e) {
    status = e.status();
    error = e.what();
  } catch (const std::exception& e) {
    status = FLAGOS_ERROR_INTERNAL;
    error = e.what();
  } catch (...) {
    status = FLAGOS_ERROR_INTERNAL;
    error = "unknown exception";
  }
  if (owned) *owned = nullptr;  // release captures (markers, ...) before reporting done
  std::function<void()> after = std::move(t_after_count);
  t_after_count = nullptr;
  lock.lock();
  if (status != FLAGOS_SUCCESS && error_ == FLAGOS_SUCCESS) {
    error_ = status;
    error_message_ = std::move(error);
  }
  ++completed_;
  busy_ = false;
  if (after) after();
  done_cv_.notify_all();
}

flagosStatus_t flagosStream_st::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  // Wait for what is queued now, not for work other threads add meanwhile.
  const uint64_t target = enqueued_;
  done_cv_.wait(lock, [&] { return completed_ >= target; });
  return takeError();
}

flagosStatus_t flagosStream_st::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (completed_ < enqueued_) return FLAGOS_ERROR_NOT_READY;  // not an error: no message
  return takeError();
}

// A failed task is reported once, by the next synchronize/query, then the
// stream is clean again (host work has no sticky device state to poison).
flagosStatus_t flagosStream_st::takeError() {
  if (error_ == FLAGOS_SUCCESS) return FLAGOS_SUCCESS;
  const flagosStatus_t status = error_;
  error_ = FLAGOS_SUCCESS;
  return flagos_host::fail(status, "host stream (device %d): asynchronous error: %s", device,
                           error_message_.c_str());
}

namespace flagos_host {
namespace {

using flagos_kit::Marker;

// The stream table (stream.h), one static member per entry; events are
// markers (kit/flagos_kit/markers.h) that the stream workers complete.
// From the kit: streamSynchronize, streamQuery, eventCreate, eventDestroy
// (events.h), eventQuery, eventSynchronize, eventElapsedTime (markers.h).
struct StreamCalls : flagos_kit::StreamCallsBase<findDevice>, flagos_kit::MarkerEventCalls<> {
  static flagosStatus_t streamCreate(int32_t device, int32_t priority,
                                     flagosStream_t* stream) noexcept {
    (void)priority;  // a hint; one worker per stream needs no priorities
    return guard("streamCreate", [&] {
      if (stream == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host streamCreate: stream is NULL");
      }
      *stream = nullptr;
      Device* d = findDevice("streamCreate", device);
      if (d == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      std::unique_ptr<flagosStream_st> created;
      try {
        created = std::make_unique<flagosStream_st>(device);
      } catch (const std::system_error& e) {  // no thread to be had (limits)
        return fail(FLAGOS_ERROR_DEVICE, "host streamCreate: cannot start a worker: %s", e.what());
      }
      std::lock_guard<std::mutex> lock(d->streams_mutex);
      d->streams.push_back(created.get());
      *stream = created.release();
      return FLAGOS_SUCCESS;
    });
  }

  // Blocks until the queued work is done (stream.h: "after its queued work
  // completes"), then joins the worker.
  static flagosStatus_t streamDestroy(flagosStream_t stream) noexcept {
    return guard("streamDestroy", [&] {
      if (!validStream("streamDestroy", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      Device* d = findDevice("streamDestroy", stream->device);
      if (d == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      {
        std::lock_guard<std::mutex> lock(d->streams_mutex);
        auto it = std::find(d->streams.begin(), d->streams.end(), stream);
        if (it == d->streams.end()) {
          return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host streamDestroy: unknown stream %p",
                      static_cast<void*>(stream));
        }
        d->streams.erase(it);
      }
      delete stream;
      return FLAGOS_SUCCESS;
    });
  }

  // Work queued on @p stream after this call waits (on the stream's worker,
  // not on the caller) until the event's current capture has completed.
  static flagosStatus_t streamWaitEvent(flagosStream_t stream, flagosEvent_t event) noexcept {
    return guard("streamWaitEvent", [&] {
      return flagos_kit::waitMarker(stream, event, [](flagosStream_t s, std::shared_ptr<Marker> m) {
        s->enqueue([m] { m->wait(); });  // never inline: it blocks
      });
    });
  }

  static flagosStatus_t eventRecord(flagosEvent_t event, flagosStream_t stream) noexcept {
    return guard("eventRecord", [&] {
      return flagos_kit::recordMarker(event, stream, [event](flagosStream_t s, auto m) {
        const bool timing = (event->flags & FLAGOS_EVENT_TIMING) != 0;  // checked live by now
        // Cost 0: on an idle stream the marker completes now (Note [Inline
        // execution]), once the stream has counted the record done.
        s->enqueue([m, timing] { onTaskCounted([m, timing] { m->complete(timing); }); }, 0);
      });
    });
  }
};

}  // namespace

const flagosStreamTable* streamTable() {
  return flagos_kit::streamTable<StreamCalls>();
}

}  // namespace flagos_host
