// torch.profiler's device timing for the flagos device, two ways:
//
// 1. The legacy ProfilerStubs of PrivateUse1 (torch/csrc/profiler/stubs/base.h).
//    With these, `torch.autograd.profiler.profile(use_device="flagos")`
//    (use_kineto=False: ProfilerState::KINETO_PRIVATEUSE1_FALLBACK) records a
//    vendor event on the current stream at the start and end of every operator
//    and reports their elapsed time as the operator's device time
//    (`device_time`, the "flagos time" columns of key_averages()).
// 2. A Kineto child profiler (libkineto::IActivityProfiler, registered with
//    REGISTER_PRIVATEUSE1_PROFILER) for torch.profiler.profile(activities=[...,
//    PrivateUse1]) (KINETO_PRIVATEUSE1): it drains the plugin's tracing table
//    (flagos/trace.h) and hands Kineto one activity per kernel, copy or fill,
//    linked to the ATen operator that launched it. Built when the torch we
//    compile against has the registry (FLAGOS_HAVE_KINETO_PROFILER, set by
//    csrc/CMakeLists.txt); without it, or with a plugin without the table,
//    that path shows CPU time only.
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "runtime/backend.h"
#include "runtime/profiler.h"
#include "runtime/stream.h"

#ifdef FLAGOS_HAVE_KINETO_PROFILER
#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <set>
#include <vector>

#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#endif

namespace flagos {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

const flagosStreamTable& streams() {
  return *backend().tables.stream;
}

void destroyEvent(void* event) {
  if (event != nullptr && isInitialized()) {
    backend().tables.stream->eventDestroy(static_cast<flagosEvent_t>(event));
  }
}

// Note [Profiler events]
// ~~~~~~~~~~~~~~~~~~~~~~
// One timing event per record(), on the current stream of the current
// device, owned by the shared_ptr the profiler keeps; elapsed() waits for
// both and answers microseconds, as the CUDA stubs do. Before initialize()
// (or on a plugin whose events fail) record() leaves a NULL event and
// elapsed() answers 0: the profiler then shows no device time rather than
// failing the profiled program.
struct FlagosProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    if (!isInitialized()) {
      if (device != nullptr) *device = 0;
      if (event != nullptr) event->reset();
      return;
    }
    const c10::DeviceIndex index = currentDevice();
    if (device != nullptr) *device = index;
    if (event == nullptr) return;
    flagosEvent_t ev = nullptr;
    if (streams().eventCreate(physicalDevice(index), FLAGOS_EVENT_TIMING, &ev) != FLAGOS_SUCCESS) {
      event->reset();
      return;
    }
    *event = std::shared_ptr<void>(ev, destroyEvent);
    if (streams().eventRecord(ev, currentVendorStream(index)) != FLAGOS_SUCCESS) event->reset();
  }

  float elapsed(const ProfilerVoidEventStub* event,
                const ProfilerVoidEventStub* event2) const override {
    if (event == nullptr || event2 == nullptr || !*event || !*event2 || !isInitialized()) return 0;
    auto* start = static_cast<flagosEvent_t>(event->get());
    auto* end = static_cast<flagosEvent_t>(event2->get());
    // Never throws: this runs while the profiler builds its report.
    float ms = 0;
    if (streams().eventSynchronize(start) != FLAGOS_SUCCESS ||
        streams().eventSynchronize(end) != FLAGOS_SUCCESS ||
        streams().eventElapsedTime(&ms, start, end) != FLAGOS_SUCCESS) {
      return 0;
    }
    return ms * 1000.0f;
  }

  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    if (!isInitialized()) return;
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, i));
      op(i);
    }
  }

  void synchronize() const override {
    if (!isInitialized()) return;
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
      check(backend().tables.device->synchronize(physicalDevice(i)), "synchronize");
    }
  }
};

struct RegisterProfilerStubs {
  RegisterProfilerStubs() {
    static FlagosProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const RegisterProfilerStubs register_profiler_stubs;

#ifdef FLAGOS_HAVE_KINETO_PROFILER
constexpr bool kKinetoProfiler = true;
#else
constexpr bool kKinetoProfiler = false;
#endif

#ifdef FLAGOS_HAVE_KINETO_PROFILER

const flagosTraceTable* traceTable() {
  return isInitialized() ? backend().tables.trace : nullptr;
}

// The activity types we produce; torch asks for them with
// ProfilerActivity.PrivateUse1 (kineto_shim.cpp kPrivateUse1Types).
const std::set<libkineto::ActivityType>& ourActivities() {
  static const std::set<libkineto::ActivityType> types{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                       libkineto::ActivityType::GPU_MEMCPY,
                                                       libkineto::ActivityType::GPU_MEMSET};
  return types;
}

libkineto::ActivityType activityOf(flagosTraceKind_t kind) {
  switch (kind) {
    case FLAGOS_TRACE_MEMCPY:
      return libkineto::ActivityType::GPU_MEMCPY;
    case FLAGOS_TRACE_MEMSET:
      return libkineto::ActivityType::GPU_MEMSET;
    default:
      return libkineto::ActivityType::CONCURRENT_KERNEL;
  }
}

int64_t clockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// CLOCK_REALTIME minus CLOCK_MONOTONIC, read between two monotonic reads: a
// thread taken off the core between the reads would shift every record by
// the time it was away (hundreds of microseconds on a loaded machine, and
// then device records end after the operator that waited for them). Of a
// few brackets the tightest is kept, and its midpoint stands for the
// instant of the realtime read (torch's clock converter does the same).
int64_t realtimeMinusMonotonicNs() {
  int64_t best_width = INT64_MAX;
  int64_t offset = 0;
  for (int i = 0; i < 32; ++i) {
    const int64_t before = clockNs(CLOCK_MONOTONIC);
    const int64_t real = clockNs(CLOCK_REALTIME);
    const int64_t after = clockNs(CLOCK_MONOTONIC);
    if (after - before < best_width) {
      best_width = after - before;
      offset = real - (before + (after - before) / 2);
    }
  }
  return offset;
}

// Note [Correlation ids of the flagos session]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Kineto calls pushCorrelationId(id) / popCorrelationId() on every child
// session around each ATen operator, on the thread that runs it; the id is
// the one its CPU_OP activity carries. We keep the thread's stack (ops nest:
// aten::matmul around aten::mm) and tell the plugin the innermost one
// (trace.h setCorrelationId), which stamps it on the work it queues. At
// processTrace, getLinkedActivity(id) answers that CPU_OP, and torch's
// event tree makes the record a device child of the operator (its
// self_device_time).
thread_local std::vector<uint64_t> t_correlation;

// Note [Trace clocks]
// ~~~~~~~~~~~~~~~~~~~
// Records arrive on CLOCK_MONOTONIC (trace.h); Kineto's capture window and
// torch's CPU_OP times are Unix-epoch nanoseconds (system_clock, through
// torch's ApproximateClockToUnixTimeConverter). We sample both clocks at
// start() (realtimeMinusMonotonicNs: the tightest of several brackets) and
// shift every record by the difference, then keep only records inside the
// capture window processTrace is given.
class FlagosKinetoSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    offset_ns_ = realtimeMinusMonotonicNs();
    enabled_ = tryEnable();
  }

  void stop() override {
    if (!enabled_) return;
    // Work queued inside the window finishes before we drain; failures here
    // only cost records, never the profiled program.
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
      try {
        (void)backend().tables.device->synchronize(physicalDevice(i));
      } catch (...) {
      }
    }
    const flagosTraceTable* t = traceTable();
    if (t == nullptr) return;
    (void)t->disable();
    std::vector<flagosTraceRecord> buf(4096);
    for (;;) {
      int32_t n = 0;
      uint64_t dropped = 0;
      if (t->drain(buf.data(), static_cast<int32_t>(buf.size()), &n, &dropped) != FLAGOS_SUCCESS)
        break;
      dropped_ += dropped;
      records_.insert(records_.end(), buf.begin(), buf.begin() + n);
      if (n < static_cast<int32_t>(buf.size())) break;
    }
    if (dropped_ > 0)
      errors_.push_back("flagos: " + std::to_string(dropped_) +
                        " device records dropped (trace buffer full)");
    enabled_ = false;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, INT64_MAX);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback getLinkedActivity, int64_t startTime,
                    int64_t endTime) override {
    buffer_.span = libkineto::TraceSpan(startTime, endTime, "flagos");
    for (const flagosTraceRecord& r : records_) {
      const int64_t start = r.start_ns + offset_ns_;
      const int64_t end = r.end_ns + offset_ns_;
      if (start < startTime || end > endTime) continue;  // outside the capture window
      buffer_.emplace_activity(buffer_.span, activityOf(r.kind), std::string(r.name));
      auto& act = buffer_.activities.back();
      act->startTime = start;
      act->endTime = end;
      act->device = r.device;
      act->resource = static_cast<int32_t>(r.stream_id);
      act->id = static_cast<int32_t>(r.correlation_id);
      act->flow.id = static_cast<uint32_t>(r.correlation_id);
      act->flow.type = libkineto::kLinkAsyncCpuGpu;
      act->flow.start = 0;
      if (getLinkedActivity && r.correlation_id != 0)
        act->linked = getLinkedActivity(static_cast<int32_t>(r.correlation_id));
      streams_.insert({r.device, r.stream_id});
      ++buffer_.span.opCount;
      ++buffer_.gpuOpCount;
      // The logger keeps a pointer; the activity lives on in the buffer that
      // getTraceBuffer() hands Kineto.
      logger.handleActivity(*act);
    }
    records_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : streams_) {
      out.push_back({static_cast<int64_t>(stream), static_cast<int64_t>(stream), device,
                     "flagos stream " + std::to_string(stream)});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  void pushCorrelationId(uint64_t id) override {
    t_correlation.push_back(id);
    tell(id);
  }

  void popCorrelationId() override {
    if (!t_correlation.empty()) t_correlation.pop_back();
    tell(t_correlation.empty() ? 0 : t_correlation.back());
  }

 private:
  // The device may be initialized only inside the window (the first tensor
  // moved there): enable then.
  bool tryEnable() {
    const flagosTraceTable* t = traceTable();
    if (t == nullptr) return false;
    if (t->enable() != FLAGOS_SUCCESS) {
      errors_.push_back(std::string("flagos: trace enable failed: ") +
                        backend().tables.getLastError());
      return false;
    }
    return true;
  }

  void tell(uint64_t id) {
    if (!enabled_) {
      // Operators run on several threads (autograd's): one of them enables.
      if (isInitialized() && !started_late_.exchange(true)) enabled_ = tryEnable();
      if (!enabled_) return;
    }
    if (const flagosTraceTable* t = traceTable()) (void)t->setCorrelationId(id);
  }

  int64_t offset_ns_ = 0;
  std::atomic<bool> enabled_{false};
  std::atomic<bool> started_late_{false};
  uint64_t dropped_ = 0;
  std::vector<std::string> errors_;
  std::vector<flagosTraceRecord> records_;
  std::set<std::pair<int64_t, uint64_t>> streams_;
  libkineto::CpuTraceBuffer buffer_;
};

class FlagosKinetoProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return ourActivities();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    for (const auto type : activity_types) {
      if (ourActivities().count(type) != 0) return std::make_unique<FlagosKinetoSession>();
    }
    return nullptr;  // CPU only asked for
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/,
      const std::set<libkineto::ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"flagos"};
};

REGISTER_PRIVATEUSE1_PROFILER(FlagosKinetoProfiler);

#endif  // FLAGOS_HAVE_KINETO_PROFILER

}  // namespace

bool kinetoProfilerBuilt() noexcept {
  return kKinetoProfiler;
}

bool profilerDeviceActivity() noexcept {
  return kKinetoProfiler && isInitialized() && backend().tables.trace != nullptr;
}

}  // namespace flagos
