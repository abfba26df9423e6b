// Launches of generated kernels with no work, so the driver builds what a
// kernel's first real launch would wait for: the manifest's kernels after a
// preload (Note [First launch]) and each specialized kernel before it is
// published (Note [Warm before publishing]); both Notes are in
// csrc/jit/gen/kernel_cache.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "flagos/stream.h"
#include "jit/gen/generator.h"
#include "jit/gen/kernel_cache.h"
#include "jit/gen/manifest.h"

namespace flagos::semantic {

// Launches with no work, for kernel_cache_stats().
extern std::atomic<uint64_t> g_first_launches;  // Note [First launch]
extern std::atomic<uint64_t> g_warm_launches;   // Note [Warm before publishing]

// One device's zero-work launches, on a stream of their own, on the cache's
// pool thread.
class FirstLaunches {
 public:
  FirstLaunches(int32_t physical, uint64_t local, const std::vector<kernels::UsedKernel>& kernels);
  void run(const std::vector<std::pair<kernels::KernelKey, const kernels::CompiledKernel*>>&
               loaded) noexcept;
  // After the cache's pool stopped (no run() any more).
  void close() noexcept;

  // Note [Warm before publishing] (kernel_cache.h): one launch of @p kernel
  // with no work in @p shape, waited for. On the cache's pool thread.
  void warm(const kernels::CompiledKernel& kernel, const kernels::LaunchShape& shape) noexcept;

 private:
  void launch(const kernels::KernelKey& key, const kernels::CompiledKernel& kernel) noexcept;
  void launchShape(const kernels::CompiledKernel& kernel, const kernels::LaunchShape& shape,
                   bool wait, std::atomic<uint64_t>& launched) noexcept;

  const int32_t physical_;
  const uint64_t local_;  // Note [Launch geometry]
  std::unordered_map<kernels::KernelKey, kernels::LaunchShape, kernels::KernelKeyHash> shapes_;
  std::mutex mu_;
  flagosStream_t stream_ = nullptr;
  bool closed_ = false;
};

// The zero-work launches that build a kernel's work-group functions for
// @p launch (Note [Warm before publishing]).
kernels::LaunchShape warmShape(const kernels::Launch& launch, bool with_call);

}  // namespace flagos::semantic
