// The device guard of the flagos device: current device, streams, events.
// PyTorch's generic machinery (DeviceGuard, torch.Stream/Event,
// torch.accelerator, autograd's stream sync) drives the device through it.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/lifecycle.h"
#include "runtime/stream.h"

namespace flagos {
namespace {

const flagosStreamTable& streams() {
  return *backend().tables.stream;
}

// Non-blocking status query: true when done, false when NOT_READY.
bool ready(flagosStatus_t st, const char* what) {
  if (st == FLAGOS_ERROR_NOT_READY) return false;
  check(st, what);
  return true;
}

// Note [Events are created lazily]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// c10::Event starts with a NULL handle; the vendor event is created on the
// first record(), on the recording stream's device, with timing enabled
// only for BACKEND_DEFAULT (torch.Event(enable_timing=True)). A NULL event
// counts as completed, as in CUDA.
struct FlagosGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    const c10::DeviceIndex old = currentDevice();
    if (d.index() != old) setCurrentDevice(d.index());
    return c10::Device(kType, old);
  }
  c10::Device getDevice() const override { return c10::Device(kType, currentDevice()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    setCurrentDevice(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      setCurrentDevice(d.index());
    } catch (...) {
    }
  }
  c10::DeviceIndex deviceCount() const noexcept override { return flagos::deviceCount(); }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    check(backend().tables.device->synchronize(physicalDevice(device)), "synchronize");
  }
  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    return c10::DeviceCapability();  // every dtype: the host fallback runs what kernels lack
  }

  c10::Stream getStream(c10::Device d) const override { return currentStream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return defaultStream(d.index()); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return newStream(d.index(), high_priority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return newStream(d.index(), priority);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = currentStream(s.device_index());
    setCurrentStream(s);
    return old;
  }
  void* getStreamNativeHandle(const c10::Stream s) const override { return vendorStream(s); }
  bool queryStream(const c10::Stream& s) const override {
    return ready(streams().streamQuery(vendorStream(s)), "streamQuery");
  }
  void synchronizeStream(const c10::Stream& s) const override {
    check(streams().streamSynchronize(vendorStream(s)), "streamSynchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& s) const override {
    deviceAllocator()->recordStream(data_ptr, s);
  }

  void record(void** event, const c10::Stream& s, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == s.device_index(), "flagos: event on device ",
                static_cast<int>(device_index), " cannot record stream on device ",
                static_cast<int>(s.device_index()));
    auto* ev = reinterpret_cast<flagosEvent_t*>(event);
    if (*ev == nullptr) {
      const uint32_t flags =
          flag == c10::EventFlag::BACKEND_DEFAULT ? FLAGOS_EVENT_TIMING : FLAGOS_EVENT_DEFAULT;
      check(streams().eventCreate(physicalDevice(s.device_index()), flags, ev), "eventCreate");
    }
    check(streams().eventRecord(*ev, vendorStream(s)), "eventRecord");
  }
  void block(void* event, const c10::Stream& s) const override {
    if (event == nullptr) return;
    check(streams().streamWaitEvent(vendorStream(s), static_cast<flagosEvent_t>(event)),
          "streamWaitEvent");
  }
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    return ready(streams().eventQuery(static_cast<flagosEvent_t>(event)), "eventQuery");
  }
  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    check(streams().eventSynchronize(static_cast<flagosEvent_t>(event)), "eventSynchronize");
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    if (event == nullptr || !isInitialized() || inForkedChild()) return;
    backend().tables.stream->eventDestroy(static_cast<flagosEvent_t>(event));
  }
  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "flagos: both events must be recorded before elapsed_time()");
    float ms = 0;
    flagosStatus_t st = streams().eventElapsedTime(&ms, static_cast<flagosEvent_t>(start),
                                                   static_cast<flagosEvent_t>(end));
    TORCH_CHECK(st != FLAGOS_ERROR_NOT_READY,
                "flagos: elapsed_time(): an event has not completed yet (synchronize first)");
    TORCH_CHECK(st != FLAGOS_ERROR_INVALID_ARGUMENT,
                "flagos: elapsed_time() needs events created with enable_timing=True");
    check(st, "eventElapsedTime");
    return ms;
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, FlagosGuardImpl);

}  // namespace
}  // namespace flagos
