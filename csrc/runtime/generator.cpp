// Generators of the flagos device. See Note [Generators of the flagos device].
#include "runtime/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/CallOnce.h>
#include <c10/util/Exception.h>

#include <deque>

#include "runtime/backend.h"

namespace flagos {
namespace {

struct FlagosGeneratorImpl final : public at::CPUGeneratorImpl {
  explicit FlagosGeneratorImpl(c10::DeviceIndex device) {
    device_ = c10::Device(c10::DeviceType::PrivateUse1, device);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  // CPUGeneratorImpl::clone_impl would return a CPU generator; keep the
  // device (Generator.clone_state(), graph-safe state).
  FlagosGeneratorImpl* clone_impl() const override {
    auto* self = const_cast<FlagosGeneratorImpl*>(this);
    auto* copy = new FlagosGeneratorImpl(device_.index());
    copy->set_engine(self->engine());
    copy->set_next_float_normal_sample(self->next_float_normal_sample());
    copy->set_next_double_normal_sample(self->next_double_normal_sample());
    return copy;
  }
};

void copyState(at::CPUGeneratorImpl* from, at::CPUGeneratorImpl* to) {
  to->set_engine(from->engine());
  to->set_next_float_normal_sample(from->next_float_normal_sample());
  to->set_next_double_normal_sample(from->next_double_normal_sample());
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  const c10::DeviceIndex count = deviceCount();
  if (device < 0) device = currentDevice();
  TORCH_CHECK(device >= 0 && device < count, "flagos: invalid device index ",
              static_cast<int>(device), " for a generator (", static_cast<int>(count),
              " devices visible)");
  return device;
}

}  // namespace

const at::Generator& defaultGenerator(c10::DeviceIndex device) {
  // The device count is fixed once initialize() succeeded; resolve() fails
  // before that, so the list is built exactly once with the final count.
  static c10::once_flag once;
  static std::deque<at::Generator>* generators = nullptr;
  device = resolve(device);
  c10::call_once(once, [] {
    generators = new std::deque<at::Generator>();  // leaked: used until exit
    for (c10::DeviceIndex i = 0; i < deviceCount(); ++i) {
      generators->push_back(at::make_generator<FlagosGeneratorImpl>(i));
      generators->back().seed();
    }
  });
  return (*generators)[device];
}

at::Generator newGenerator(c10::DeviceIndex device) {
  return at::make_generator<FlagosGeneratorImpl>(resolve(device));
}

bool isFlagosGenerator(const at::Generator& gen) {
  return gen.defined() && gen.device().type() == c10::DeviceType::PrivateUse1 &&
         dynamic_cast<FlagosGeneratorImpl*>(gen.unsafeGetGeneratorImpl()) != nullptr;
}

at::Generator cpuTwin(const at::Generator& gen) {
  TORCH_INTERNAL_ASSERT(isFlagosGenerator(gen));
  at::Generator twin = at::make_generator<at::CPUGeneratorImpl>();
  copyState(static_cast<FlagosGeneratorImpl*>(gen.unsafeGetGeneratorImpl()),
            static_cast<at::CPUGeneratorImpl*>(twin.unsafeGetGeneratorImpl()));
  return twin;
}

void adoptState(const at::Generator& gen, const at::Generator& twin) {
  TORCH_INTERNAL_ASSERT(isFlagosGenerator(gen));
  copyState(static_cast<at::CPUGeneratorImpl*>(twin.unsafeGetGeneratorImpl()),
            static_cast<FlagosGeneratorImpl*>(gen.unsafeGetGeneratorImpl()));
}

}  // namespace flagos
