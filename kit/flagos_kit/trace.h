// The tracing table (flagos/trace.h) for a plugin: the enabled flag, the
// thread's correlation id, a bounded buffer of finished records, and the
// four members over them. A plugin stamps its work where it queues it:
//
//   if (flagos_kit::trace::enabled()) {
//     auto rec = flagos_kit::trace::begin(FLAGOS_TRACE_KERNEL, device, stream_id, name);
//     ... run the work, then rec.start_ns / rec.end_ns = monotonicNs() ...
//     flagos_kit::trace::finish(rec);
//   }
//
// and hands out `flagos_kit::traceTable<Hooks>()`. Hooks is a struct of
// static members: `initialized()` (device.init() succeeded), `onEnable()`
// (returns a status: sample the device timer), `collect()` (called by drain
// before it reads the buffer: move records of completed work in, as opencl
// does with its profiling events); TraceHooks gives defaults.
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <utility>

#include "flagos/kernel.h"
#include "flagos/memory.h"
#include "flagos/trace.h"
#include "flagos_kit/error.h"

namespace flagos_kit {
namespace trace {

// The clock of flagosTraceRecord (trace.h: CLOCK_MONOTONIC; steady_clock is
// CLOCK_MONOTONIC in libstdc++ and libc++ on Linux).
inline int64_t monotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Undrained records kept at most (trace.h drain: "a bounded number").
constexpr size_t kMaxRecords = 65536;

// One per plugin library (an inline function's static: the library is
// loaded RTLD_LOCAL with hidden symbols, so each plugin has its own).
struct Recorder {
  std::atomic<bool> enabled{false};
  std::mutex mu;
  std::deque<flagosTraceRecord> done;  // oldest first
  uint64_t dropped = 0;                // since the last drain
};

inline Recorder& recorder() {
  static Recorder r;
  return r;
}

// The one check on the hot path while tracing is off.
inline bool enabled() {
  return recorder().enabled.load(std::memory_order_relaxed);
}

inline uint64_t& threadCorrelation() {
  thread_local uint64_t id = 0;
  return id;
}

// A record of work about to be queued by this thread: kind, where, name and
// the thread's correlation id now; the plugin fills the times.
inline flagosTraceRecord begin(flagosTraceKind_t kind, int32_t device, uint64_t stream_id,
                               const char* name) {
  flagosTraceRecord r{};
  r.kind = kind;
  r.device = device;
  r.stream_id = stream_id;
  r.correlation_id = threadCorrelation();
  if (name != nullptr) {
    std::strncpy(r.name, name, FLAGOS_TRACE_NAME_BYTES - 1);
    r.name[FLAGOS_TRACE_NAME_BYTES - 1] = '\0';
  }
  return r;
}

// Stores a finished record (any thread). Work queued while enabled still
// lands after disable (trace.h); a record beyond kMaxRecords is dropped.
inline void finish(const flagosTraceRecord& r) {
  Recorder& rec = recorder();
  std::lock_guard<std::mutex> lock(rec.mu);
  if (rec.done.size() >= kMaxRecords) {
    ++rec.dropped;
    return;
  }
  rec.done.push_back(r);
  if (rec.done.back().end_ns < rec.done.back().start_ns)
    rec.done.back().end_ns = rec.done.back().start_ns;
}

// A name to give the next launch of this thread, for a plugin whose queueing
// point does not know what it queues (host native kernels, opencl helpers).
// Static strings only; cleared by takeName().
inline const char*& threadName() {
  thread_local const char* name = nullptr;
  return name;
}
inline const char* takeName(const char* fallback) {
  const char* n = threadName();
  threadName() = nullptr;
  return n != nullptr ? n : fallback;
}

// Display names of copies, by memory.h kind.
inline const char* memcpyName(flagosMemcpyKind_t kind) {
  switch (kind) {
    case FLAGOS_MEMCPY_HOST_TO_DEVICE:
      return "Memcpy HtoD";
    case FLAGOS_MEMCPY_DEVICE_TO_HOST:
      return "Memcpy DtoH";
    case FLAGOS_MEMCPY_DEVICE_TO_DEVICE:
      return "Memcpy DtoD";
    default:
      return "Memcpy";
  }
}

// Note [Named kernel entries]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A kernel's record is made where it queues its work, which does not know
// the semantic ID it runs under. namedKernel(id, fn) gives the kernel table
// a trampoline instead of @p fn that names the calling thread's next launch
// (threadName) for the call and clears it after, so a kernel that declines
// leaves no stale name. One trampoline per slot; entries past kSlots keep
// their own fn (unnamed records). Called while the table is built, once.
namespace detail {
constexpr size_t kSlots = 1024;
inline std::array<flagosKernelEntry, kSlots>& slots() {
  static std::array<flagosKernelEntry, kSlots> s{};
  return s;
}
template <size_t I>
flagosStatus_t named(flagosStream_t stream, const flagosTensor* outputs, int32_t num_outputs,
                     const flagosTensor* inputs, int32_t num_inputs, const flagosScalar* scalars,
                     int32_t num_scalars) {
  threadName() = slots()[I].op_id;
  const flagosStatus_t status =
      slots()[I].fn(stream, outputs, num_outputs, inputs, num_inputs, scalars, num_scalars);
  threadName() = nullptr;
  return status;
}
template <size_t... I>
constexpr std::array<flagosKernelFn, sizeof...(I)> trampolines(std::index_sequence<I...>) {
  return {&named<I>...};
}
}  // namespace detail

}  // namespace trace

inline flagosKernelFn namedKernel(const char* op_id, flagosKernelFn fn) {
  static constexpr auto kTrampolines =
      trace::detail::trampolines(std::make_index_sequence<trace::detail::kSlots>{});
  static size_t used = 0;
  if (used >= trace::detail::kSlots) return fn;
  trace::detail::slots()[used] = {op_id, fn};
  return kTrampolines[used++];
}

struct TraceHooks {
  static flagosStatus_t onEnable() noexcept { return FLAGOS_SUCCESS; }
  static void collect() noexcept {}
};

// The members of trace.h over trace::recorder(). Hooks::initialized() is
// required (trace.h: "only after device.init() succeeded").
template <typename Hooks>
struct TraceCalls {
  static bool ready(const char* call) noexcept {
    if (Hooks::initialized()) return true;
    fail(FLAGOS_ERROR_INVALID_ARGUMENT, "%s %s: plugin not initialized (init() not called)",
         kPluginName, call);
    return false;
  }

  static flagosStatus_t enable() noexcept {
    return guard("trace enable", [&] {
      if (!ready("trace enable")) return FLAGOS_ERROR_INVALID_ARGUMENT;
      trace::Recorder& rec = trace::recorder();
      {
        std::lock_guard<std::mutex> lock(rec.mu);
        rec.done.clear();
        rec.dropped = 0;
      }
      const flagosStatus_t st = Hooks::onEnable();
      if (st == FLAGOS_SUCCESS) rec.enabled.store(true);
      return st;
    });
  }

  static flagosStatus_t disable() noexcept {
    return guard("trace disable", [&] {
      if (!ready("trace disable")) return FLAGOS_ERROR_INVALID_ARGUMENT;
      trace::recorder().enabled.store(false);
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t setCorrelationId(uint64_t correlation_id) noexcept {
    trace::threadCorrelation() = correlation_id;  // cheap: runs around every operator
    return FLAGOS_SUCCESS;
  }

  static flagosStatus_t drain(flagosTraceRecord* records, int32_t capacity, int32_t* count,
                              uint64_t* dropped) noexcept {
    return guard("trace drain", [&] {
      if (!ready("trace drain")) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (count == nullptr || capacity < 0 || (records == nullptr && capacity > 0)) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "%s trace drain: NULL count, negative capacity or NULL records", kPluginName);
      }
      Hooks::collect();
      trace::Recorder& rec = trace::recorder();
      std::lock_guard<std::mutex> lock(rec.mu);
      const size_t n = std::min(rec.done.size(), static_cast<size_t>(capacity));
      std::copy(rec.done.begin(), rec.done.begin() + static_cast<std::ptrdiff_t>(n), records);
      rec.done.erase(rec.done.begin(), rec.done.begin() + static_cast<std::ptrdiff_t>(n));
      *count = static_cast<int32_t>(n);
      if (dropped != nullptr) *dropped = rec.dropped;
      rec.dropped = 0;
      return FLAGOS_SUCCESS;
    });
  }
};

template <typename Hooks>
const flagosTraceTable* traceTable() {
  static const flagosTraceTable table = [] {
    flagosTraceTable t{};
    t.struct_size = sizeof(t);
    t.enable = TraceCalls<Hooks>::enable;
    t.disable = TraceCalls<Hooks>::disable;
    t.setCorrelationId = TraceCalls<Hooks>::setCorrelationId;
    t.drain = TraceCalls<Hooks>::drain;
    return t;
  }();
  return &table;
}

}  // namespace flagos_kit
