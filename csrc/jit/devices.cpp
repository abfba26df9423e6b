// The per-device generators (devices.h).
#include "jit/devices.h"

#include <algorithm>
#include <utility>

#include "jit/cache_dir.h"
#include "jit/preload.h"
#include "jit/target.h"
#include "runtime/backend.h"
#include "runtime/lifecycle.h"
#include "runtime/plugin_loader.h"

namespace flagos::semantic {

// Note [Background priority]: low enough that the foreground's threads take
// the cores first, not so low (19) that a build a caller waits for starves.
constexpr int kDefaultBackgroundNice = 10;

Generators& Generators::get() {
  static Generators* g = new Generators();  // leaked: kernels may run at exit
  return *g;
}

DeviceGenerator& Generators::device(c10::DeviceIndex logical) {
  std::lock_guard<std::mutex> lock(mu_);
  // No background compile may be inside the SDK's compiler while it
  // tears down (Note [Stopping background work], runtime/lifecycle.h).
  static const bool stop_at_exit =
      (registerBackgroundStopper(
           "the kernel cache's background builds",
           [](std::chrono::milliseconds bound) { return Generators::get().stopAll(bound); }),
       true);
  (void)stop_at_exit;
  auto& slot = devices_[logical];
  if (!slot) slot = create(logical);
  return *slot;
}

bool Generators::stopAll(std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  bool idle = true;
  for (DeviceGenerator* d : all()) {
    const auto left = std::max(std::chrono::milliseconds(0),
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()));
    idle = d->cache->stopBackground(left) && idle;
    if (d->first_launches) d->first_launches->close();
    writeManifest(*d);
  }
  return idle;
}

std::vector<DeviceGenerator*> Generators::all() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<DeviceGenerator*> out;
  for (auto& [index, d] : devices_) out.push_back(d.get());
  return out;
}

std::unique_ptr<DeviceGenerator> Generators::create(c10::DeviceIndex logical) {
  const Backend& b = backend();
  const flagosCompilerTable* compiler = b.tables.compiler;
  const int32_t physical = physicalDevice(logical);
  auto d = std::make_unique<DeviceGenerator>();
  d->target.language = compiler->language;
  d->target.local_size = localSize(physical);
  kernels::CacheConfig config;
  const std::string root = defaultCacheDir();
  config.dir = root.empty() ? "" : root + "/kernels";
  const std::string device = deviceIdentity(physical);
  // Note [Kernel preload]: the last process's manifest lists the kernels to
  // load in the background (and answers fp64 for a plugin that does not
  // report it).
  kernels::Manifest manifest;
  bool preload = false;
  if (preloadEnabled()) {
    d->manifest_path = manifestPath(config.dir, d->target.language, device);
    preload = !d->manifest_path.empty() && kernels::readManifest(d->manifest_path, &manifest);
  }
  // The plugin's answer first (ABI 1.1); a 1.0 plugin's device is probed.
  const int32_t reported = reportedFp64(physical);
  d->target.fp64 = reported == FLAGOS_FP64_NATIVE ? true
                   : reported == FLAGOS_FP64_NONE ? false
                   : preload                      ? manifest.fp64
                                                  : probeFp64(compiler, physical);
  config.max_disk_bytes = maxDiskBytes(config.max_disk_bytes);
  config.compile_threads = compileThreads(config.compile_threads);
  config.background_nice = backgroundNice(kDefaultBackgroundNice);
  config.device_arch = device + (d->target.fp64 ? "|fp64" : "");
  config.last_error = [] { return detail::lastError(backend().tables); };
  d->cache = std::make_unique<kernels::KernelCache>(compiler, physical, std::move(config));
  d->first_launches =
      std::make_unique<FirstLaunches>(physical, d->target.local_size, manifest.kernels);
  if (preload) {
    std::vector<kernels::KernelKey> keys;
    for (const kernels::UsedKernel& k : manifest.kernels) keys.push_back(k.key);
    FirstLaunches* first = d->first_launches.get();  // lives as long as the cache's pool
    d->cache->preload(keys, [first](const auto& loaded) { first->run(loaded); });
    d->earlier = std::move(manifest);
  }
  return d;
}

}  // namespace flagos::semantic
