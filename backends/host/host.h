// Internal header of the host reference plugin. Nothing here crosses the ABI:
// the core sees only the C tables that entry.cpp hands out.
//
// Files, one per table section (see README.md):
//   entry.cpp   the exported entry point (the kit's, over our tables)
//   config.cpp  FLAGOS_HOST_DEVICES / FLAGOS_HOST_MEMORY_LIMIT
//   device.cpp  device table: probe, init, current device, synchronize
//   arena.cpp   one device's memory arena (arena.h)
//   memory.cpp  memory table: malloc/free, copies, fill, pinned host memory
//   stream.cpp  stream table: streams (one worker thread each) and events,
//               markers the workers complete (kit/flagos_kit/markers.h)
//   compiler.cpp compiler table: C source -> cc -> dlopen, launches
//   fft.cpp     FFT library slot: KISS FFT, in double precision
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "arena.h"
#include "flagos/vendor.h"
#include "flagos_kit/devices.h"
#include "flagos_kit/error.h"
#include "flagos_kit/handle.h"
#include "flagos_kit/markers.h"
#include "flagos_kit/out_struct.h"
#include "flagos_kit/streams.h"
#include "flagos_kit/tables.h"
#include "flagos_kit/trace.h"

namespace flagos_host {

// Reported as flagosVendorTables.version and flagosProbeInfo.sdk_version.
constexpr const char* kVersion = "1.0.0";

// ---------------------------------------------------------------- errors ---

// The kit's last error and boundary guard (kit/flagos_kit/error.h: Note
// [Last error lifetime], Note [ABI boundary]).
using flagos_kit::fail;
using flagos_kit::guard;
using flagos_kit::lastError;

// A stream task's failure with a status of its own: the worker reports
// status() with the message (any other exception becomes
// FLAGOS_ERROR_INTERNAL, see Note [ABI boundary]).
class TaskError : public std::runtime_error {
 public:
  TaskError(flagosStatus_t status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  flagosStatus_t status() const noexcept { return status_; }

 private:
  flagosStatus_t status_;
};

// ---------------------------------------------------------------- config ---

// What the environment asks for. Read by probe() (to report) and by init()
// (to build the devices); see config.cpp for the accepted syntax.
struct Config {
  int32_t device_count = 1;
  uint64_t memory_limit = 0;  // bytes per device
};

// Fills @p config from the environment. On garbage returns false and writes
// a message naming the variable and the value to @p error.
bool loadConfig(Config* config, std::string* error);

// ------------------------------------------------------- devices, state ---

struct Device {
  int32_t index = 0;
  std::unique_ptr<Arena> arena;
  // Live streams of this device, for device-wide synchronize and shutdown.
  // Held while synchronizing so that a stream cannot be destroyed under it.
  std::mutex streams_mutex;
  std::vector<flagosStream_t> streams;
};

// The plugin's global state, created on first use and never destroyed (so
// that no static destructor runs while a stream worker may still be alive
// at process exit). devices is written only by init() and shutdown(), which
// the core calls before and after every other member.
using State = flagos_kit::DeviceList<Device>;  // kit/flagos_kit/devices.h
State& state();

// The device with physical index @p index, or nullptr after recording an
// INVALID_ARGUMENT message naming @p call (also before init()).
Device* findDevice(const char* call, int32_t index) noexcept;

// The arena holding [ptr, ptr + bytes), or nullptr (the range is not device
// memory of any device). Lock-free: arena bounds never change after init().
Arena* findArena(const void* ptr, uint64_t bytes) noexcept;

// Waits for every stream of @p device; the first asynchronous error, if any.
flagosStatus_t synchronizeDevice(Device* device);

// --------------------------------------------------------------- tables ---

const flagosDeviceTable* deviceTable();
const flagosMemoryTable* memoryTable();
const flagosStreamTable* streamTable();
// Language "c" through the system C compiler (compiler.cpp).
const flagosCompilerTable* compilerTable();
// Device-activity records for torch.profiler (trace.cpp).
const flagosTraceTable* traceTable();
// The FFT library slot over KISS FFT, or nullptr when built without it (fft.cpp).
const flagosFftTable* fftTable();
// The linear-algebra library slot over OpenBLAS's LAPACK (linalg.cpp).
const flagosLinalgTable* linalgTable();

// Checks a stream handle passed to @p call; records the message on failure
// (flagosStream_st::kMagic, kit/flagos_kit/handle.h).
using flagos_kit::validStream;

// ------------------------------------------------------ inline execution ---
// See Note [Inline execution] in stream.cpp. A task's cost is an estimate of
// its work in bytes touched (kernels: the tensors' bytes; gemm: M*N*K).

// The cost of a task that must never run on the caller (a wait on an event,
// a collective that blocks on other ranks): the stream's default.
// Work items per chunk of a generated kernel without a local size, and the
// local size the core is asked to give (preferred_work_group_size): launches
// below twice this run on the stream's worker alone (a thread hand-off costs
// more than small kernels).
constexpr int64_t kDefaultGrain = 4096;

constexpr int64_t kNeverInline = -1;
// The largest cost run inline on an idle stream: kernel time of the same
// order as the hand-off to the worker it saves (Note [Inline execution]).
constexpr int64_t kInlineMaxCost = 64 * 1024;

}  // namespace flagos_host

// ------------------------------------------------------ opaque handles ---
// The C headers declare these structs; only the plugin defines them.

namespace flagos_host {

// A callable borrowed for one call: what the inline path runs, so a small
// task on an idle stream is never copied into a std::function (a heap
// allocation and a free per kernel).
class TaskRef {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, TaskRef>>>
  TaskRef(F& f) : obj_(&f), call_([](void* o) { (*static_cast<F*>(o))(); }) {}
  void operator()() const { call_(obj_); }

 private:
  void* obj_;
  void (*call_)(void*);
};

}  // namespace flagos_host

// A stream: a FIFO of work run in order by one worker thread (small work on
// an idle stream runs on the caller: Note [Inline execution]).
struct flagosStream_st {
  using Task = std::function<void()>;

  explicit flagosStream_st(int32_t device);
  ~flagosStream_st();  // drains the queue and joins the worker

  // Appends @p task; the worker runs it after everything queued before. If
  // the stream is idle and 0 <= cost <= kInlineMaxCost, runs it at once on
  // the calling thread instead (Note [Inline execution]).
  void enqueue(Task task, int64_t cost = flagos_host::kNeverInline);
  // The same, recording the task's run as @p kind / @p name while tracing
  // is on (kit/flagos_kit/trace.h); @p name is copied at once. Any callable:
  // run inline, it is called where it is, never stored.
  template <class F>
  void enqueue(flagosTraceKind_t kind, const char* name, F&& task,
               int64_t cost = flagos_host::kNeverInline) {
    if (!flagos_kit::trace::enabled() && tryInline(flagos_host::TaskRef(task), cost)) return;
    enqueueTraced(kind, name, Task(std::forward<F>(task)), cost);
  }
  // Runs @p task at once on the calling thread if the stream is idle and
  // 0 <= cost <= kInlineMaxCost (Note [Inline execution]); false: not run.
  bool tryInline(flagos_host::TaskRef task, int64_t cost);
  // Blocks until the work queued before this call is done.
  flagosStatus_t synchronize();
  // SUCCESS when idle, NOT_READY while work is pending.
  flagosStatus_t query();

  static constexpr uint32_t kMagic = flagos_kit::magicOf("STRM");
  uint32_t magic = kMagic;
  const int32_t device;
  const uint64_t trace_id;  // flagosTraceRecord.stream_id: unique per stream of the process

 private:
  void run();  // the worker's loop
  void enqueueTraced(flagosTraceKind_t kind, const char* name, Task task, int64_t cost);
  // Runs @p task with @p lock (on mu_) released, then records its end;
  // @p owned (the stored task, if any) is released before that.
  void execute(flagos_host::TaskRef task, std::unique_lock<std::mutex>& lock, Task* owned);
  flagosStatus_t takeError();  // reports a failed task once; mu_ held

  std::mutex mu_;
  std::condition_variable work_cv_;  // worker: work arrived or stop
  std::condition_variable done_cv_;  // waiters: a task completed
  std::deque<Task> queue_;
  uint64_t enqueued_ = 0;   // tasks ever queued
  uint64_t completed_ = 0;  // tasks ever finished
  bool stop_ = false;
  bool busy_ = false;                      // a task is running (on the worker or inline)
  flagosStatus_t error_ = FLAGOS_SUCCESS;  // first failed task, until reported
  std::string error_message_;
  std::thread worker_;  // last: started once the members above exist
};

namespace flagos_host {

// Called from inside a running task: runs @p fn right after the stream has
// counted that task complete, under the stream's lock. An event's marker
// completes this way, so once eventSynchronize returns, streamQuery agrees
// that the record is done (no window where the event is complete but the
// stream still counts its task as running).
void onTaskCounted(std::function<void()> fn);

}  // namespace flagos_host

// An event: the marker of its last record (kit/flagos_kit/markers.h).
struct flagosEvent_st : flagos_kit::MarkerEvent<flagos_kit::magicOf("EVTN")> {};
