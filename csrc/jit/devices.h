// One generator per device: its kernel cache, target, zero-work launches,
// manifest and per-key bookkeeping, created on first use (or at initialize,
// Note [Kernel preload]) and stopped at exit.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "jit/first_launches.h"
#include "jit/gen/generator.h"
#include "jit/gen/kernel_cache.h"
#include "jit/gen/manifest.h"
#include "jit/specialization.h"

namespace flagos::semantic {

struct DeviceGenerator {
  std::unique_ptr<kernels::KernelCache> cache;
  // Launches with no work: the manifest's (Note [First launch]) and each
  // specialized kernel's before it is published (Note [Warm before publishing]).
  std::unique_ptr<FirstLaunches> first_launches;
  kernels::Target target;
  std::string manifest_path;             // Note [Kernel preload]; "" without a cache dir
  kernels::Manifest earlier;             // the manifest read at creation, merged at exit
  SpecializationCounts specializations;  // FLAGOS_SPECIALIZE=after:N
  // Keys whose compile failed and was reported.
  std::mutex failed_mu;
  std::unordered_map<kernels::KernelKey, bool, kernels::KernelKeyHash> reported;
};

class Generators {
 public:
  static Generators& get();
  DeviceGenerator& device(c10::DeviceIndex logical);
  // Note [Stopping background work]: false when a build outlived @p bound.
  bool stopAll(std::chrono::milliseconds bound);
  std::vector<DeviceGenerator*> all();

 private:
  std::unique_ptr<DeviceGenerator> create(c10::DeviceIndex logical);
  std::mutex mu_;
  std::unordered_map<c10::DeviceIndex, std::unique_ptr<DeviceGenerator>> devices_;
};

}  // namespace flagos::semantic
