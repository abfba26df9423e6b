// Generators of the flagos device. See Note [Generators of the flagos device].
#include "runtime/generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Utils.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/CallOnce.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>

#include "runtime/backend.h"

namespace flagos {
namespace {

constexpr size_t kStateBytes = 2 * sizeof(uint64_t);  // seed, offset

struct FlagosGeneratorImpl final : public c10::GeneratorImpl {
  explicit FlagosGeneratorImpl(c10::DeviceIndex device)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t current_seed() const override { return seed_; }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t seed() override {
    const uint64_t s = c10::detail::getNonDeterministicRandom();
    set_current_seed(s);
    return s;
  }
  // CUDA's layout: seed then offset, native byte order, as uint8[16].
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = at::detail::empty_cpu({static_cast<int64_t>(kStateBytes)}, at::ScalarType::Byte,
                                       std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    auto* bytes = static_cast<uint8_t*>(state.data_ptr());
    std::memcpy(bytes, &seed_, sizeof seed_);
    std::memcpy(bytes + sizeof seed_, &offset_, sizeof offset_);
    return state.getIntrusivePtr();
  }
  void set_state(const c10::TensorImpl& state) override {
    at::detail::check_rng_state(state);
    TORCH_CHECK(state.numel() == static_cast<int64_t>(kStateBytes), "flagos: RNG state must be ",
                kStateBytes,
                " bytes (seed and offset, as on CUDA), "
                "got ",
                state.numel());
    const auto* bytes = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, bytes, sizeof seed_);
    std::memcpy(&offset_, bytes + sizeof seed_, sizeof offset_);
  }

 private:
  FlagosGeneratorImpl* clone_impl() const override {
    auto* copy = new FlagosGeneratorImpl(device_.index());
    copy->seed_ = seed_;
    copy->offset_ = offset_;
    return copy;
  }

  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t offset_ = 0;
};

FlagosGeneratorImpl* impl(const at::Generator& gen) {
  TORCH_INTERNAL_ASSERT(isFlagosGenerator(gen));
  return static_cast<FlagosGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
}

// SplitMix64 (Steele, Lea, Flood 2014): the standard way to fill a large
// generator state from a small key; every output bit depends on the key.
uint64_t splitMix64(uint64_t* x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  if (device < 0) device = currentDevice();
  checkDeviceIndex(device, "for a generator ");
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
  const FlagosGeneratorImpl* g = impl(gen);
  // The key (seed, offset) -> a whole mt19937 state. Mixing the offset in
  // first keeps (s, o) and (s', o') apart for any s != s' or o != o'.
  uint64_t offset = g->get_offset();
  uint64_t x = g->current_seed() ^ splitMix64(&offset);
  at::mt19937_data_pod data{};
  data.seed_ = g->current_seed();
  data.seeded_ = true;
  for (size_t i = 0; i < data.state_.size(); i += 2) {
    const uint64_t v = splitMix64(&x);
    data.state_[i] = static_cast<uint32_t>(v);
    if (i + 1 < data.state_.size()) data.state_[i + 1] = static_cast<uint32_t>(v >> 32);
  }
  data.left_ = 1;  // twist before the first number, as a freshly seeded engine does
  data.next_ = 0;
  at::mt19937 engine;
  engine.set_data(data);
  at::Generator twin = at::make_generator<at::CPUGeneratorImpl>();
  static_cast<at::CPUGeneratorImpl*>(twin.unsafeGetGeneratorImpl())->set_engine(engine);
  return twin;
}

void advanceOffset(const at::Generator& gen, uint64_t numbers) {
  FlagosGeneratorImpl* g = impl(gen);
  const uint64_t step = numbers == 0 ? 4 : (numbers + 3) / 4 * 4;
  g->set_offset(g->get_offset() + step);
}

}  // namespace flagos
