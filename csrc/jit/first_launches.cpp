// Note [First launch] (kernel_cache.h): a device's preloaded kernels, their
// launch shapes from the manifest repeated with no work (NULL pointers,
// zeroed bytes: meta.work == 0) on a stream of their own, on the cache's
// pool thread once the loads are done (a first launch may compile: it must
// not hold up the loads). Not waited for; the plugin also learns these work
// sizes, so the caller's repeats of them take no compile lock (opencl: Note
// [Launches without the compile lock]). Failures only lose the head start.
#include "jit/first_launches.h"

#include "runtime/backend.h"

namespace flagos::semantic {

std::atomic<uint64_t> g_first_launches{0};
std::atomic<uint64_t> g_warm_launches{0};

FirstLaunches::FirstLaunches(int32_t physical, uint64_t local,
                             const std::vector<kernels::UsedKernel>& kernels)
    : physical_(physical), local_(local) {
  for (const kernels::UsedKernel& k : kernels)
    if (!k.shape.globals.empty() && !k.shape.arg_sizes.empty()) shapes_.emplace(k.key, k.shape);
}

void FirstLaunches::run(
    const std::vector<std::pair<kernels::KernelKey, const kernels::CompiledKernel*>>&
        loaded) noexcept {
  for (const auto& [key, kernel] : loaded) launch(key, *kernel);
}

void FirstLaunches::close() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_) {
    backend().tables.stream->streamSynchronize(stream_);
    backend().tables.stream->streamDestroy(stream_);
  }
  stream_ = nullptr;
  closed_ = true;
}

void FirstLaunches::warm(const kernels::CompiledKernel& kernel,
                         const kernels::LaunchShape& shape) noexcept {
  launchShape(kernel, shape, /*wait=*/true, g_warm_launches);
}

void FirstLaunches::launch(const kernels::KernelKey& key,
                           const kernels::CompiledKernel& kernel) noexcept {
  auto it = shapes_.find(key);
  if (it != shapes_.end()) launchShape(kernel, it->second, /*wait=*/false, g_first_launches);
}

void FirstLaunches::launchShape(const kernels::CompiledKernel& kernel,
                                const kernels::LaunchShape& shape, bool wait,
                                std::atomic<uint64_t>& launched) noexcept {
  const Backend& b = backend();
  std::lock_guard<std::mutex> lock(mu_);
  if (!stream_ && (closed_ || b.tables.stream->streamCreate(physical_, 0, &stream_) != 0)) {
    closed_ = true;
    return;
  }
  try {
    void* null = nullptr;
    std::vector<std::vector<uint8_t>> zeros;  // one buffer per BYTES argument
    zeros.reserve(shape.arg_sizes.size());
    std::vector<flagosKernelArg> args;
    for (uint32_t size : shape.arg_sizes) {
      if (size == 0) {
        args.push_back({FLAGOS_ARG_DEVICE_PTR, sizeof(void*), &null});
      } else {
        zeros.emplace_back(size, 0);
        args.push_back({FLAGOS_ARG_BYTES, size, zeros.back().data()});
      }
    }
    // Not waited for unless asked: the driver does the work on its threads.
    for (uint64_t global : shape.globals) {
      if (b.tables.compiler->kernelLaunch(kernel.program, kernel.kernel_name.c_str(), args.data(),
                                          static_cast<int32_t>(args.size()), 1, &global,
                                          local_ != 0 ? &local_ : nullptr,
                                          stream_) == FLAGOS_SUCCESS)
        launched.fetch_add(1, std::memory_order_relaxed);
    }
    if (wait) b.tables.stream->streamSynchronize(stream_);
  } catch (...) {  // bad_alloc: nothing lost but the head start
  }
}

// Note [Warm before publishing] (kernel_cache.h): the zero-work launches
// that build a kernel's work-group functions: the call's own global size
// (@p with_call) and a large grid. PoCL builds a second work-group function
// once a grid is large (a first call of 65537 floats stalled on it long
// after the generic kernels had run on 4096); 1 << 20 items (4096
// work-groups of 256) is past that point.
kernels::LaunchShape warmShape(const kernels::Launch& launch, bool with_call) {
  constexpr uint64_t kLargeGrid = uint64_t{1} << 20;
  kernels::LaunchShape shape;
  for (const flagosKernelArg& a : launch.args)
    shape.arg_sizes.push_back(a.kind == FLAGOS_ARG_DEVICE_PTR ? 0 : a.size);
  if (with_call) shape.globals.push_back(launch.global);
  if (launch.global < kLargeGrid) shape.globals.push_back(kLargeGrid);
  return shape;
}

}  // namespace flagos::semantic
