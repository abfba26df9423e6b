// PrivateUse1 hooks: how ATen's device-generic code (RNG, pin_memory,
// from_blob, storage resize, torch.accelerator) reaches the flagos runtime.
// The base class throws for anything not overridden here.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/util/Exception.h>

#include "runtime/allocator.h"
#include "runtime/backend.h"
#include "runtime/generator.h"
#include "runtime/host_allocator.h"

namespace flagos {
namespace {

struct FlagosHooks final : public at::PrivateUse1HooksInterface {
  // Never throw (torch._C._get_accelerator, torch.accelerator).
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return flagos::deviceCount() > 0; }
  c10::DeviceIndex deviceCount() const override { return flagos::deviceCount(); }

  bool hasPrimaryContext(c10::DeviceIndex device) const override {
    return device >= 0 && device < flagos::deviceCount();
  }
  // at::globalContext().lazyInitDevice(PrivateUse1). The plugin itself is
  // brought up by flagos_torchfl.initialize(), which knows the options.
  void init() const override {
    TORCH_CHECK(isInitialized(),
                "flagos: the backend is not initialized; call flagos_torchfl.initialize() first");
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    flagos::setCurrentDevice(device);
  }
  c10::DeviceIndex getCurrentDevice() const override { return flagos::currentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = flagos::currentDevice();
    if (device >= 0 && device != old) flagos::setCurrentDevice(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return defaultGenerator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return newGenerator(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    auto device = deviceOfPointer(data);
    TORCH_CHECK(device.has_value(), "flagos: pointer ", data,
                " is not memory of the flagos device");
    return at::Device(c10::DeviceType::PrivateUse1, *device);
  }

  bool isPinnedPtr(const void* data) const override { return flagos::isPinnedPtr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinnedAllocator(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resizeStorageBytes(storage, new_bytes);
  }
};

const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new FlagosHooks());
  return true;
}();

}  // namespace
}  // namespace flagos
