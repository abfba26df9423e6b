// torch.profiler's device timing for the flagos device: the legacy
// ProfilerStubs of PrivateUse1 (torch/csrc/profiler/stubs/base.h).
//
// With these, `torch.autograd.profiler.profile(use_device="flagos")`
// (use_kineto=False: ProfilerState::KINETO_PRIVATEUSE1_FALLBACK) records a
// vendor event on the current stream at the start and end of every operator
// and reports their elapsed time as the operator's device time
// (`device_time`, the "flagos time" columns of key_averages()).
// torch.profiler.profile(activities=[..., PrivateUse1]) takes the Kineto
// path (KINETO_PRIVATEUSE1), which reads device activity only from a
// libkineto::IActivityProfiler (REGISTER_PRIVATEUSE1_PROFILER); the core has
// none, so that path shows CPU time only (docs/tools.md, "bench").
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "runtime/backend.h"
#include "runtime/stream.h"

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

}  // namespace
}  // namespace flagos
